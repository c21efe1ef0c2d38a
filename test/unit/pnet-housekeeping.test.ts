/** The pure rules of a sender account's tick (domain/pnet/accounts.ts, run by services/pnet/tick-sender-account.ts). */
import { describe, expect, it } from 'vitest';
import { earliest, housekeepingMayRun, housekeepingTurn } from '../../domain/pnet/accounts.js';

const now = new Date('2025-03-10T12:00:00Z');
const at = (seconds: number) => new Date(now.getTime() + seconds * 1000);

describe('housekeepingMayRun', () => {
  const ok = { status: 'connected', checkpoint_status: 'ok', checkpoint_until: null };

  it('runs on a connected account with no checkpoint, never on one not connected', () => {
    expect(housekeepingMayRun(ok, now)).toBe(true);
    expect(housekeepingMayRun({ ...ok, status: 'pending' }, now)).toBe(false);
    expect(housekeepingMayRun({ ...ok, status: 'disconnected' }, now)).toBe(false);
  });

  it('waits out a checkpoint back-off, and runs at the tick that ends it', () => {
    const held = { ...ok, checkpoint_status: 'checkpoint' };
    expect(housekeepingMayRun({ ...held, checkpoint_until: at(1) }, now)).toBe(false);
    expect(housekeepingMayRun({ ...held, checkpoint_until: now }, now)).toBe(true);
    expect(housekeepingMayRun({ ...held, checkpoint_until: at(-60) }, now)).toBe(true);
    expect(housekeepingMayRun({ ...held, checkpoint_until: null }, now)).toBe(false);
  });

  it('never runs on a restricted account', () => {
    expect(housekeepingMayRun({ ...ok, checkpoint_status: 'restricted', checkpoint_until: at(-60) }, now)).toBe(false);
  });
});

describe('housekeepingTurn', () => {
  it('queues a first read at once, the next one due a period from now', () => {
    expect(housekeepingTurn(undefined, 1800, now)).toEqual({ queue: true, nextAt: at(1800) });
    expect(housekeepingTurn({ waiting: false, last_at: null }, 1800, now)).toEqual({ queue: true, nextAt: at(1800) });
  });

  it('queues a read once its period since the last one has passed', () => {
    expect(housekeepingTurn({ waiting: false, last_at: at(-1800) }, 1800, now)).toEqual({
      queue: true,
      nextAt: at(1800),
    });
  });

  it('queues nothing before the period ends, and is due when it ends', () => {
    expect(housekeepingTurn({ waiting: false, last_at: at(-600) }, 1800, now)).toEqual({
      queue: false,
      nextAt: at(1200),
    });
  });

  it('queues nothing while a read of the kind waits, and looks again a period from now', () => {
    expect(housekeepingTurn({ waiting: true, last_at: at(-7200) }, 1800, now)).toEqual({
      queue: false,
      nextAt: at(1800),
    });
    expect(housekeepingTurn({ waiting: true, last_at: at(-60) }, 1800, now)).toEqual({
      queue: false,
      nextAt: at(1800),
    });
  });
});

describe('earliest', () => {
  it('answers the earliest time, or null for none', () => {
    expect(earliest([])).toBeNull();
    expect(earliest([at(300), at(60), at(900)])).toEqual(at(60));
  });

  it('keeps the first of equal times', () => {
    const first = at(60);
    const second = at(60);
    expect(earliest([at(300), first, second])).toBe(first);
  });
});
