import { describe, expect, it } from 'vitest';
import {
  ActionKindSchema,
  LimitsSchema,
  defaultLimits,
  effectiveLimit,
  limitKindOf,
  limitKinds,
  limitMaximums,
  warmUpShare,
  type LimitKey,
} from '../../domain/pnet/limits.js';
import { PnetSettingsUpdateSchema } from '../../domain/pnet/sender-profiles.js';
import { presenceOf } from '../../store/pnet/accounts.js';
import { localWeekStart, nextLocalMidnight, formatLocalDate } from '../../domain/shared/zoned-time.js';

describe('pnet limits', () => {
  it('has a daily and a weekly key per ceiling kind, connection requests using the weekly cap name', () => {
    expect(Object.keys(defaultLimits)).toHaveLength(20);
    expect(defaultLimits).toHaveProperty('weekly_connection_request_cap', 100);
    expect(defaultLimits).not.toHaveProperty('weekly_limit_connection_request');
    expect(defaultLimits).toMatchObject({
      daily_limit_connection_request: 20,
      daily_limit_send_message: 20,
      daily_limit_profile_view: 20,
    });
    expect(Object.keys(limitMaximums).sort()).toEqual(Object.keys(defaultLimits).sort());
  });

  it('keeps every default within its maximum and maps every action kind to a ceiling', () => {
    for (const [key, value] of Object.entries(defaultLimits))
      expect(value).toBeLessThanOrEqual(limitMaximums[key as LimitKey]);
    for (const kind of ActionKindSchema.options) expect(limitKinds).toContain(limitKindOf[kind]);
    expect(LimitsSchema.safeParse(defaultLimits).success).toBe(true);
  });

  it('accepts a limit at its maximum and refuses one past it', () => {
    const max = limitMaximums.daily_limit_connection_request;
    expect(PnetSettingsUpdateSchema.safeParse({ limits: { daily_limit_connection_request: max } }).success).toBe(true);
    const past = PnetSettingsUpdateSchema.safeParse({ limits: { daily_limit_connection_request: max + 1 } });
    expect(past.success).toBe(false);
    expect(PnetSettingsUpdateSchema.safeParse({ limits: { daily_limit_unknown: 1 } }).success).toBe(false);
    expect(PnetSettingsUpdateSchema.safeParse({ min_action_interval_seconds: 30 }).success).toBe(true);
    expect(PnetSettingsUpdateSchema.safeParse({ min_action_interval_seconds: 29 }).success).toBe(false);
    expect(PnetSettingsUpdateSchema.safeParse({ timezone: 'Mars/Olympus' }).success).toBe(false);
    expect(PnetSettingsUpdateSchema.safeParse({ timezone: 'Europe/Berlin' }).success).toBe(true);
    expect(
      PnetSettingsUpdateSchema.safeParse({ working_hours: { start: '24:00', end: '09:00', days: [1] } }).success,
    ).toBe(false);
    expect(
      PnetSettingsUpdateSchema.parse({ working_hours: { start: '09:00', end: '18:00', days: [3, 1, 1] } }).working_hours
        ?.days,
    ).toEqual([1, 3]);
  });

  it('takes a time zone by any name the zone data knows, links included, and nothing else', () => {
    // Intl.supportedValuesOf lists only canonical names, which leaves out zones people use.
    for (const zone of [
      'Asia/Kolkata',
      'Europe/Kyiv',
      'Etc/UTC',
      'UTC',
      'US/Eastern',
      'America/Argentina/Buenos_Aires',
    ]) {
      expect(PnetSettingsUpdateSchema.safeParse({ timezone: zone }).success, zone).toBe(true);
    }
    for (const zone of ['Mars/Olympus', '+05:30', 'Europe/', '', 'x'.repeat(65)]) {
      expect(PnetSettingsUpdateSchema.safeParse({ timezone: zone }).success, zone).toBe(false);
    }
    // A link reckons its own local midnight: Kolkata is UTC+05:30 all year.
    expect(nextLocalMidnight(new Date('2026-06-01T12:00:00Z'), 'Asia/Kolkata').toISOString()).toBe(
      '2026-06-01T18:30:00.000Z',
    );
  });

  it('counts a repeated working day once, so eight entries of one day are one day', () => {
    const days = (d: number[]) =>
      PnetSettingsUpdateSchema.safeParse({ working_hours: { start: '09:00', end: '23:59', days: d } });
    expect(days([1, 1, 1, 1, 1, 1, 1, 1]).data?.working_hours?.days).toEqual([1]);
    expect(days([7, 6, 5, 4, 3, 2, 1]).data?.working_hours?.days).toEqual([1, 2, 3, 4, 5, 6, 7]);
    for (const bad of [[], [0], [8]]) expect(days(bad).success, JSON.stringify(bad)).toBe(false);
  });

  it('reads a browser as active for a minute after it checks in, idle to ten minutes, then offline', () => {
    const now = new Date('2026-11-22T12:00:00Z');
    const seenAgo = (ms: number) => presenceOf(new Date(now.getTime() - ms), now);
    expect([60_000, 60_001, 600_000, 600_001].map(seenAgo)).toEqual(['active', 'idle', 'idle', 'offline']);
  });

  it('ramps a new account up over three weeks', () => {
    expect([0, 6, 7, 13, 14, 20, 21, 90].map((day) => warmUpShare(day))).toEqual([
      0.25, 0.25, 0.5, 0.5, 0.75, 0.75, 1, 1,
    ]);
    expect(effectiveLimit(20, 0.25)).toBe(5);
    expect(effectiveLimit(2, 0.25)).toBe(1);
    expect(effectiveLimit(0, 1)).toBe(0);
  });
});

describe('zoned time', () => {
  it('finds the next local midnight across a daylight-saving change', () => {
    // Berlin springs forward on 2026-03-29: that day has 23 hours.
    const beforeChange = new Date('2026-03-28T12:00:00Z');
    expect(nextLocalMidnight(beforeChange, 'Europe/Berlin').toISOString()).toBe('2026-03-28T23:00:00.000Z');
    const onChangeDay = new Date('2026-03-29T12:00:00Z');
    expect(nextLocalMidnight(onChangeDay, 'Europe/Berlin').toISOString()).toBe('2026-03-29T22:00:00.000Z');
    // New York falls back on 2026-11-01: that day has 25 hours.
    expect(nextLocalMidnight(new Date('2026-11-01T03:30:00Z'), 'America/New_York').toISOString()).toBe(
      '2026-11-01T04:00:00.000Z',
    );
    expect(nextLocalMidnight(new Date('2026-11-01T12:00:00Z'), 'America/New_York').toISOString()).toBe(
      '2026-11-02T05:00:00.000Z',
    );
  });

  it('starts the local week on Monday in the sender time zone', () => {
    // Sunday 23:30 in Tokyo is already Monday there.
    expect(formatLocalDate(localWeekStart(new Date('2026-11-22T15:30:00Z'), 'Asia/Tokyo'))).toBe('2026-11-23');
    expect(formatLocalDate(localWeekStart(new Date('2026-11-22T15:30:00Z'), 'UTC'))).toBe('2026-11-16');
  });
});
