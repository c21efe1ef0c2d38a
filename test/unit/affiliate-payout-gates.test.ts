/**
 * The payout gates as a table (decision 044; the interface spec's Next payout status): one pure
 * function for the performance read and the payout cycle.
 */
import { describe, expect, it } from 'vitest';
import {
  decidePayoutGate,
  nextPayoutAt,
  payoutPeriodOf,
  type PayoutGateInput,
} from '../../domain/affiliates/payout-gates.js';

const now = new Date('2026-11-24T12:00:00Z');
const base: PayoutGateInput = {
  now,
  schedule: { dayOfMonth: 1, minimumCents: 5000 },
  programPaused: false,
  unavailable: false,
  underReview: false,
  blocked: false,
  identityVerified: true,
  payoutEmail: 'aff@example.com',
  destinationHold: false,
  availableCents: 7500,
  maturities: [],
  paidPeriods: [],
};

describe('decidePayoutGate: status and blocker, first that applies wins', () => {
  const rows: Array<[string, Partial<PayoutGateInput>, string, string | null]> = [
    ['all clear', {}, 'scheduled', null],
    [
      'program paused beats everything',
      { programPaused: true, unavailable: true, underReview: true, blocked: true, availableCents: 0 },
      'paused',
      null,
    ],
    [
      'unavailable beats review, block and minimum',
      { unavailable: true, underReview: true, blocked: true, availableCents: 0 },
      'unavailable',
      null,
    ],
    ['under review beats blocked', { underReview: true, blocked: true }, 'under_review', null],
    ['blocked', { blocked: true }, 'blocked', null],
    ['one cent under the minimum', { availableCents: 4999 }, 'below_minimum', null],
    ['exactly the minimum', { availableCents: 5000 }, 'scheduled', null],
    ['a negative balance after a clawback', { availableCents: -300 }, 'below_minimum', null],
    [
      'identity not verified is a blocker, not a status',
      { identityVerified: false },
      'scheduled',
      'identity_not_verified',
    ],
    [
      'identity first among blockers',
      { identityVerified: false, payoutEmail: null, destinationHold: true },
      'scheduled',
      'identity_not_verified',
    ],
    ['no payout email', { payoutEmail: null, destinationHold: true }, 'scheduled', 'no_payout_email'],
    ['an empty payout email counts as none', { payoutEmail: '' }, 'scheduled', 'no_payout_email'],
    ['destination hold', { destinationHold: true }, 'scheduled', 'destination_hold'],
    ['a blocker shows beside another status', { blocked: true, payoutEmail: null }, 'blocked', 'no_payout_email'],
  ];
  it.each(rows)('%s', (_name, change, status, blocker) => {
    const d = decidePayoutGate({ ...base, ...change });
    expect(d.next_payout_status).toBe(status);
    expect(d.next_payout_blocker).toBe(blocker);
    // A read never pays: only the cycle (cycleAt) does.
    expect(d.payable).toBe(false);
  });
});

describe('decidePayoutGate: what the cycle pays', () => {
  const cycleAt = new Date('2026-12-01T00:00:00Z');
  const rows: Array<[string, Partial<PayoutGateInput>, boolean]> = [
    ['scheduled and clear', {}, true],
    ['at the minimum', { availableCents: 5000 }, true],
    ['under the minimum', { availableCents: 4999 }, false],
    ['paused', { programPaused: true }, false],
    ['unavailable', { unavailable: true }, false],
    ['under review', { underReview: true }, false],
    ['blocked', { blocked: true }, false],
    ['identity not verified', { identityVerified: false }, false],
    ['no payout email', { payoutEmail: null }, false],
    ['destination hold', { destinationHold: true }, false],
    ['the period already has a payout', { paidPeriods: ['2026-12'] }, false],
    ['last period paid does not stop this one', { paidPeriods: new Set(['2026-11']) }, true],
  ];
  it.each(rows)('%s', (_name, change, payable) => {
    const d = decidePayoutGate({ ...base, now: cycleAt, cycleAt, ...change });
    expect(d.payable).toBe(payable);
    expect(d.period).toBe('2026-12');
    expect(d.next_payout_on).toBe('2026-12-01');
  });

  it('pays the available balance, not what matures after the run', () => {
    const d = decidePayoutGate({
      ...base,
      now: cycleAt,
      cycleAt,
      maturities: [{ availableAt: new Date('2026-12-02T00:00:00Z'), amountCents: 9000 }],
    });
    expect(d.next_payout_cents).toBe(7500);
  });
});

describe('decidePayoutGate: the next payout day, its amount and when the minimum clears', () => {
  it('the next cycle is the 1st of next month, and counts what matures before it', () => {
    const d = decidePayoutGate({
      ...base,
      availableCents: 1000,
      maturities: [
        { availableAt: new Date('2026-12-10T00:00:00Z'), amountCents: 2000 },
        { availableAt: new Date('2026-11-28T00:00:00Z'), amountCents: 3000 },
      ],
    });
    expect(d.next_payout_on).toBe('2026-12-01');
    expect(d.next_payout_cents).toBe(4000);
    expect(d.next_payout_status).toBe('below_minimum');
    // 1000 + 3000 (Nov 28) = 4000 < 5000; + 2000 (Dec 10) = 6000: clears on Dec 10.
    expect(d.clears_minimum_on).toBe('2026-12-10');
  });

  it('a maturity lifting the balance before the run makes it scheduled', () => {
    const d = decidePayoutGate({
      ...base,
      availableCents: 1000,
      maturities: [{ availableAt: new Date('2026-11-30T23:59:59Z'), amountCents: 4000 }],
    });
    expect(d.next_payout_status).toBe('scheduled');
    expect(d.next_payout_cents).toBe(5000);
    expect(d.clears_minimum_on).toBe('2026-11-30');
  });

  it('clears today when it already does; null when known maturities never get there', () => {
    expect(decidePayoutGate(base).clears_minimum_on).toBe('2026-11-24');
    expect(
      decidePayoutGate({
        ...base,
        availableCents: 100,
        maturities: [{ availableAt: new Date('2026-12-05T00:00:00Z'), amountCents: 200 }],
      }).clears_minimum_on,
    ).toBeNull();
  });

  it('never promises a negative amount', () => {
    expect(decidePayoutGate({ ...base, availableCents: -900 }).next_payout_cents).toBe(0);
  });

  it('days are written in the affiliate time zone', () => {
    const d = decidePayoutGate({ ...base, timeZone: 'America/Los_Angeles' });
    // 2026-12-01T00:00Z is the evening of Nov 30 in Los Angeles.
    expect(d.next_payout_on).toBe('2026-11-30');
    expect(d.period).toBe('2026-12');
  });

  it('on the cycle day after the run, and on other day-of-month settings', () => {
    expect(nextPayoutAt(new Date('2026-12-01T00:00:00Z'), 1).toISOString()).toBe('2027-01-01T00:00:00.000Z');
    expect(nextPayoutAt(new Date('2026-11-30T23:59:59Z'), 1).toISOString()).toBe('2026-12-01T00:00:00.000Z');
    expect(nextPayoutAt(new Date('2026-11-14T10:00:00Z'), 15).toISOString()).toBe('2026-11-15T00:00:00.000Z');
    expect(nextPayoutAt(new Date('2026-12-20T10:00:00Z'), 28).toISOString()).toBe('2026-12-28T00:00:00.000Z');
    expect(nextPayoutAt(new Date('2026-12-29T10:00:00Z'), 28).toISOString()).toBe('2027-01-28T00:00:00.000Z');
    expect(payoutPeriodOf(new Date('2027-01-28T00:00:00Z'))).toBe('2027-01');
  });
});
