/**
 * The payout gates (decision 044; interface spec: Affiliate program, Next payout status): ONE pure
 * function that both the performance read (`next_payout_status`, `next_payout_blocker`,
 * `next_payout_cents`, `next_payout_on`, `clears_minimum_on`) and the payout cycle (whether to pay
 * this affiliate now) call, so what an affiliate is told is what the cycle does.
 *
 * Statuses, first that applies wins: `paused` (the program is paused), `unavailable` (this
 * account's payouts are unavailable), `under_review`, `blocked`, `below_minimum` (the balance the
 * next cycle would pay is under the minimum), `scheduled`. Blockers are the affiliate's own to
 * fix and are reported beside any status, first that applies: `identity_not_verified`,
 * `no_payout_email`, `destination_hold`. The cycle pays only a `scheduled` affiliate with no
 * blocker (`payable`), and never twice for one period.
 *
 * The cycle runs on a day of the month (UTC). A period is the UTC month of that run (`YYYY-MM`).
 */
import { z } from 'zod';
import { formatLocalDate, localDate } from '../shared/zoned-time.js';

export const NextPayoutStatusSchema = z.enum([
  'paused',
  'unavailable',
  'under_review',
  'blocked',
  'below_minimum',
  'scheduled',
]);
export type NextPayoutStatus = z.infer<typeof NextPayoutStatusSchema>;

export const NextPayoutBlockerSchema = z.enum(['identity_not_verified', 'no_payout_email', 'destination_hold']);
export type NextPayoutBlocker = z.infer<typeof NextPayoutBlockerSchema>;

/** The documented defaults: $50 minimum, the cycle on the 1st of each month at 00:00 UTC. */
export const defaultPayoutMinimumCents = 5000;
export const defaultPayoutDayOfMonth = 1;
/** The cycle's day is 1 to 28 so every month has it. */
export const payoutDayOfMonthBounds = { min: 1, max: 28 } as const;

export interface PayoutSchedule {
  /** The day of the month (1 to 28, UTC) the cycle runs. */
  dayOfMonth: number;
  minimumCents: number;
}

export interface PayoutGateInput {
  now: Date;
  schedule: PayoutSchedule;
  /** The program-wide pause. */
  programPaused: boolean;
  /** This affiliate's settings (no settings row yet: all false and no email). */
  unavailable: boolean;
  underReview: boolean;
  blocked: boolean;
  identityVerified: boolean;
  payoutEmail: string | null;
  destinationHold: boolean;
  /** Available now, in cents (A's `affiliateBalances`); may be negative after a clawback. */
  availableCents: number;
  /** Commissions still held, each with when it matures (any order). */
  maturities: ReadonlyArray<{ availableAt: Date; amountCents: number }>;
  /** The cycle's run time when the cycle asks (its period is that UTC month); omitted, the next scheduled run after `now`. */
  cycleAt?: Date;
  /** Periods (`YYYY-MM`) this affiliate already has a payout for (any status); the cycle pays a period once. */
  paidPeriods: ReadonlySet<string> | readonly string[];
  /** Days are written in this IANA zone (the affiliate's); the cycle itself runs on UTC days. */
  timeZone?: string;
}

export interface PayoutGateDecision {
  next_payout_status: NextPayoutStatus;
  next_payout_blocker: NextPayoutBlocker | null;
  /** What the next cycle would pay: the available balance plus what matures before it (never below 0). */
  next_payout_cents: number;
  /** The next cycle's day (UTC instant written as a day in `timeZone`). */
  next_payout_on: string;
  /** The day the available balance first reaches the minimum: today when it does already, null when known maturities never get it there. */
  clears_minimum_on: string | null;
  /** The period the next cycle pays for (`YYYY-MM`). */
  period: string;
  /** When the next cycle runs. */
  payout_at: Date;
  /** The cycle pays now: asked by the cycle (`cycleAt`), status `scheduled`, no blocker, and no payout for the period yet. */
  payable: boolean;
}

export function payoutPeriodOf(instant: Date): string {
  return `${instant.getUTCFullYear()}-${String(instant.getUTCMonth() + 1).padStart(2, '0')}`;
}

/** The cycle's instant in the month of (year, month0): the day at 00:00 UTC. */
function cycleInstant(year: number, month0: number, dayOfMonth: number): Date {
  return new Date(Date.UTC(year, month0, dayOfMonth));
}

/**
 * The next cycle's instant after `now`: this month's run when it is still ahead, else next
 * month's. (A read on the cycle's day after the run shows next month's.)
 */
export function nextPayoutAt(now: Date, dayOfMonth: number): Date {
  const thisMonth = cycleInstant(now.getUTCFullYear(), now.getUTCMonth(), dayOfMonth);
  return now.getTime() < thisMonth.getTime()
    ? thisMonth
    : cycleInstant(now.getUTCFullYear(), now.getUTCMonth() + 1, dayOfMonth);
}

export function decidePayoutGate(input: PayoutGateInput): PayoutGateDecision {
  const zone = input.timeZone ?? 'UTC';
  const day = (d: Date) => formatLocalDate(localDate(d, zone));
  const paid =
    input.paidPeriods instanceof Set
      ? (input.paidPeriods as ReadonlySet<string>)
      : new Set(input.paidPeriods as readonly string[]);
  const minimum = input.schedule.minimumCents;
  const due = input.cycleAt !== undefined;
  const payoutAt = input.cycleAt ?? nextPayoutAt(input.now, input.schedule.dayOfMonth);
  const period = payoutPeriodOf(payoutAt);

  const maturities = [...input.maturities]
    .filter((m) => m.amountCents !== 0)
    .sort((a, b) => a.availableAt.getTime() - b.availableAt.getTime());
  let atPayout = input.availableCents;
  for (const m of maturities) if (m.availableAt.getTime() <= payoutAt.getTime()) atPayout += m.amountCents;
  const nextCents = Math.max(0, due ? input.availableCents : atPayout);

  let clearsOn: string | null = null;
  if (input.availableCents >= minimum) clearsOn = day(input.now);
  else {
    let running = input.availableCents;
    for (const m of maturities) {
      if (m.availableAt.getTime() <= input.now.getTime()) continue;
      running += m.amountCents;
      if (running >= minimum) {
        clearsOn = day(m.availableAt);
        break;
      }
    }
  }

  const status: NextPayoutStatus = input.programPaused
    ? 'paused'
    : input.unavailable
      ? 'unavailable'
      : input.underReview
        ? 'under_review'
        : input.blocked
          ? 'blocked'
          : nextCents < minimum || nextCents <= 0
            ? 'below_minimum'
            : 'scheduled';
  const blocker: NextPayoutBlocker | null = !input.identityVerified
    ? 'identity_not_verified'
    : !input.payoutEmail
      ? 'no_payout_email'
      : input.destinationHold
        ? 'destination_hold'
        : null;

  return {
    next_payout_status: status,
    next_payout_blocker: blocker,
    next_payout_cents: nextCents,
    next_payout_on: day(payoutAt),
    clears_minimum_on: clearsOn,
    period,
    payout_at: payoutAt,
    payable: due && status === 'scheduled' && blocker === null && !paid.has(period),
  };
}
