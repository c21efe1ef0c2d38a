import { describe, expect, it } from 'vitest';
import { pollAfterSeconds, workingWindow } from '../../domain/pnet/pacing.js';

const weekdays9to18 = { start: '09:00', end: '18:00', days: [1, 2, 3, 4, 5] };

describe('working hours', () => {
  it('is open inside the window and names when it closes', () => {
    // Wednesday 2026-11-18 10:00 in Berlin (UTC+1).
    expect(workingWindow(new Date('2026-11-18T09:00:00Z'), weekdays9to18, 'Europe/Berlin')).toEqual({
      open: true,
      closesAt: new Date('2026-11-18T17:00:00Z'),
    });
  });

  it('names the next opening after hours and over a weekend', () => {
    expect(workingWindow(new Date('2026-11-18T18:30:00Z'), weekdays9to18, 'Europe/Berlin')).toEqual({
      open: false,
      opensAt: new Date('2026-11-19T08:00:00Z'),
    });
    // Friday evening opens on Monday.
    expect(workingWindow(new Date('2026-11-20T19:00:00Z'), weekdays9to18, 'Europe/Berlin')).toEqual({
      open: false,
      opensAt: new Date('2026-11-23T08:00:00Z'),
    });
  });

  it('keeps a window that runs past midnight open into the next day', () => {
    const nights = { start: '22:00', end: '06:00', days: [5] };
    // Saturday 02:00 UTC is inside Friday's night window.
    expect(workingWindow(new Date('2026-11-21T02:00:00Z'), nights, 'UTC')).toEqual({
      open: true,
      closesAt: new Date('2026-11-21T06:00:00Z'),
    });
    expect(workingWindow(new Date('2026-11-21T07:00:00Z'), nights, 'UTC')).toMatchObject({
      open: false,
      opensAt: new Date('2026-11-27T22:00:00Z'),
    });
  });

  it('opens at 09:00 local on the morning after a daylight-saving change', () => {
    // Berlin falls back on Sunday 2026-10-25; Monday opens at 09:00 CET = 08:00 UTC.
    expect(workingWindow(new Date('2026-10-25T12:00:00Z'), weekdays9to18, 'Europe/Berlin')).toEqual({
      open: false,
      opensAt: new Date('2026-10-26T08:00:00Z'),
    });
    // The Friday before, still summer time: 09:00 CEST = 07:00 UTC.
    expect(workingWindow(new Date('2026-10-23T06:30:00Z'), weekdays9to18, 'Europe/Berlin')).toEqual({
      open: false,
      opensAt: new Date('2026-10-23T07:00:00Z'),
    });
  });
});

describe('poll_after_seconds', () => {
  const now = new Date('2026-11-18T10:00:00Z');
  it('is never above the account gap nor so long the browser stops reading as active', () => {
    expect(pollAfterSeconds({ minActionIntervalSeconds: 30, workSoonAt: null, now })).toBe(30);
    expect(pollAfterSeconds({ minActionIntervalSeconds: 600, workSoonAt: null, now })).toBe(45);
  });

  it('is at most 15 while work is about to run, and short when it is due', () => {
    expect(pollAfterSeconds({ minActionIntervalSeconds: 90, workSoonAt: new Date(now.getTime() + 40_000), now })).toBe(
      15,
    );
    expect(pollAfterSeconds({ minActionIntervalSeconds: 90, workSoonAt: new Date(now.getTime() + 8_000), now })).toBe(
      8,
    );
    expect(pollAfterSeconds({ minActionIntervalSeconds: 90, workSoonAt: now, now })).toBe(5);
    expect(
      pollAfterSeconds({ minActionIntervalSeconds: 90, workSoonAt: new Date(now.getTime() + 3_600_000), now }),
    ).toBe(45);
  });

  it('counts work a minute away as about to run, and work 61 s away not', () => {
    expect(pollAfterSeconds({ minActionIntervalSeconds: 90, workSoonAt: new Date(now.getTime() + 60_000), now })).toBe(
      15,
    );
    expect(pollAfterSeconds({ minActionIntervalSeconds: 90, workSoonAt: new Date(now.getTime() + 61_000), now })).toBe(
      45,
    );
    expect(pollAfterSeconds({ minActionIntervalSeconds: 90, workSoonAt: new Date(now.getTime() + 90_000), now })).toBe(
      45,
    );
  });
});
