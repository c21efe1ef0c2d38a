/**
 * The affiliate program (decision 043; interface spec: Affiliate program): the payloads, the
 * documented terms and the pure rules of attribution, commission, clawback and maturation. No I/O.
 *
 * Terms (decision 043): a commission is 20% (rounded down to the cent) of each paid invoice of a
 * referred workspace for 12 months after its conversion (its first payment); it is held for the
 * holding period (AFFILIATE_HOLDING_DAYS, default 30) and becomes available at `available_at`.
 * A refund inside the holding period claws back the refunded share; a dispute claws back what is
 * left at any time, and a won dispute gives exactly that back. A signup is attributed when the
 * workspace is created with a code (or a click id) within 30 days of the click.
 */
import { z } from 'zod';
import { NameSchema, queryInteger, textSchema, TimestampSchema, UuidSchema } from '../shared/common.js';
import { TimeZoneSchema } from '../pnet/sender-profiles.js';
import { NextPayoutBlockerSchema, NextPayoutStatusSchema } from './payout-gates.js';

export const commissionPercent = 20;
export const commissionMonths = 12;
export const cookieWindowDays = 30;
export const defaultHoldingDays = 30;
/** Clicks one address may send to the public click route per minute before a 429. */
export const clickRateLimitPerMinute = 120;
export const performanceDaysBounds = { min: 1, max: 365, default: 30 } as const;
export const statsDaysBounds = { min: 1, max: 366, default: 30 } as const;
export const pageBounds = { min: 1, max: 200, default: 50 } as const;

export const AffiliateLedgerKindSchema = z.enum([
  'commission',
  'clawback_refund',
  'clawback_dispute',
  'dispute_reversal',
  'payout',
  'adjustment',
  'forfeiture',
]);
export type AffiliateLedgerKind = z.infer<typeof AffiliateLedgerKindSchema>;
export const FeedKindSchema = z.enum(['signup', 'conversion', 'commission', 'clawback', 'payout', 'forfeiture']);
export type FeedKind = z.infer<typeof FeedKindSchema>;
export const CommissionStatusSchema = z.enum(['held', 'available', 'clawed_back']);
export type CommissionStatus = z.infer<typeof CommissionStatusSchema>;

const DaySchema = z.iso.date();

// ---- Requests ----

export const EnrollRequestSchema = z
  .object({
    display_name: NameSchema.describe('How the affiliate is named (1 to 255 characters)'),
    time_zone: TimeZoneSchema.optional().describe(
      'Days of the stats and the performance window are counted in this IANA zone; UTC when omitted',
    ),
  })
  .meta({ id: 'AffiliateEnrollRequest' });

/** A vanity code: 3 to 32 letters, digits, `-` or `_`, starting with a letter or digit; unique across the service whatever the case. */
export const VanityCodeSchema = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_-]{2,31}$/,
    'must be 3 to 32 letters, digits, "-" or "_", starting with a letter or digit',
  );
export const CreateCodeRequestSchema = z.object({ code: VanityCodeSchema }).meta({ id: 'AffiliateCodeCreateRequest' });

export const PageQuerySchema = z.object({
  limit: queryInteger(z.int().min(pageBounds.min).max(pageBounds.max).default(pageBounds.default)).describe(
    'Rows per page, 1 to 200',
  ),
  offset: queryInteger(z.int().min(0).max(1_000_000).default(0)).describe('Rows to skip, 0 to 1,000,000'),
});
export const StatsQuerySchema = z.object({
  days: queryInteger(
    z.int().min(statsDaysBounds.min).max(statsDaysBounds.max).default(statsDaysBounds.default),
  ).describe('Days to answer, ending today in the affiliate’s zone (1 to 366)'),
});
export const PerformanceQuerySchema = z.object({
  days: queryInteger(
    z.int().min(performanceDaysBounds.min).max(performanceDaysBounds.max).default(performanceDaysBounds.default),
  ).describe(
    'The window: the last N days ending today in the affiliate’s zone (1 to 365), compared with the N days before it',
  ),
});
export const ClickParamsSchema = z.object({ code: textSchema(1, 64) });
export const ClickQuerySchema = z.object({
  visitor: textSchema(1, 200)
    .optional()
    .describe('A visitor id the landing page already has; otherwise the visitor is its address and user agent'),
});

// ---- Responses ----

export const AffiliateCodeSchema = z
  .object({ code: z.string(), is_vanity: z.boolean(), created_at: TimestampSchema })
  .meta({ id: 'AffiliateCode' });

export const AffiliateSchema = z
  .object({
    id: UuidSchema,
    display_name: z.string(),
    time_zone: z.string(),
    created_at: TimestampSchema,
    codes: z.array(AffiliateCodeSchema),
    available_cents: z.int().describe('Matured and payable, in USD cents (may be negative after a clawback)'),
    held_cents: z.int().describe('Commissions still in their holding period, in USD cents'),
    commission_percent: z.int(),
    commission_months: z.int(),
    holding_days: z.number().describe('AFFILIATE_HOLDING_DAYS (fractions allowed)'),
    cookie_window_days: z.number().describe('AFFILIATE_COOKIE_DAYS'),
  })
  .meta({ id: 'Affiliate' });

export const DailyStatSchema = z
  .object({ day: DaySchema, clicks: z.int(), signups: z.int(), conversions: z.int(), earned_cents: z.int() })
  .meta({ id: 'AffiliateDailyStat' });

export const FeedItemSchema = z
  .object({
    kind: FeedKindSchema,
    occurred_at: TimestampSchema,
    amount_cents: z.int().nullable().describe('Signed cents for money rows; null for signup and conversion rows'),
  })
  .meta({ id: 'AffiliateFeedItem' });

export const LedgerEntrySchema = z
  .object({
    id: UuidSchema,
    kind: AffiliateLedgerKindSchema,
    amount_cents: z.int(),
    currency: z.string(),
    description: z.string(),
    occurred_at: TimestampSchema,
    available_at: TimestampSchema.nullable().describe('When a commission matures; null for rows that count at once'),
  })
  .meta({ id: 'AffiliateLedgerEntry' });

export const MaturitySchema = z
  .object({ day: DaySchema, amount_cents: z.int(), running_available_cents: z.int() })
  .meta({ id: 'AffiliateMaturity' });

export const TrendSchema = z
  .object({
    value: z.int().describe('The window’s value'),
    previous: z.int().describe('The value of the window of the same length just before it'),
    change: z.int().describe('value − previous'),
    change_ratio: z.number().nullable().describe('change ÷ previous; null when previous is 0'),
  })
  .meta({ id: 'AffiliateTrend' });
export type Trend = z.infer<typeof TrendSchema>;

export const PerformanceSchema = z
  .object({
    active_count: z.int().describe('Referred workspaces with a commission earned in the window'),
    average_commission_cents: z
      .int()
      .nullable()
      .describe('Earned in the window ÷ commissions in the window; null without any'),
    clears_minimum_on: DaySchema.nullable(),
    clicks: TrendSchema,
    conversions: TrendSchema,
    earned_cents: TrendSchema,
    signups: TrendSchema,
    conversion_rate: z
      .number()
      .min(0)
      .max(1)
      .nullable()
      .describe('Conversions ÷ signups in the window (capped at 1); null without signups'),
    days: z.int(),
    epc_cents: z
      .int()
      .nullable()
      .describe('Earnings per counted click in the window (cents, rounded down); null without clicks'),
    held_cents: z.int(),
    last_commission_at: TimestampSchema.nullable(),
    last_conversion_at: TimestampSchema.nullable(),
    last_signup_at: TimestampSchema.nullable(),
    lifetime_clawed_back_cents: z.int().describe('Clawbacks net of reversals, as a positive amount'),
    lifetime_gross_cents: z.int().describe('Every commission ever credited'),
    lifetime_net_cents: z.int().describe('Gross minus clawed back'),
    never_paid_count: z.int().describe('Referred workspaces that signed up and never paid'),
    next_payout_blocker: NextPayoutBlockerSchema.nullable(),
    next_payout_cents: z.int(),
    next_payout_on: DaySchema,
    next_payout_status: NextPayoutStatusSchema,
    signup_rate: z
      .number()
      .min(0)
      .max(1)
      .nullable()
      .describe('Signups ÷ counted clicks in the window (capped at 1); null without clicks'),
    upcoming_maturities: z.array(MaturitySchema),
    window_closed_count: z
      .int()
      .describe(`Converted workspaces whose ${commissionMonths} commission months have ended`),
  })
  .meta({ id: 'AffiliatePerformance' });

export const pageOf = <T extends z.ZodType>(name: string, item: T) =>
  z.object({
    [name]: z.array(item),
    next_offset: z.int().nullable().describe('The offset of the next page; null on the last'),
  });

// ---- Rules ----

/** The commission on a paid invoice: the documented percent, rounded down to the cent. */
export function commissionCents(invoiceCents: number): number {
  return Math.floor((invoiceCents * commissionPercent) / 100);
}

/** The end of a converted workspace's commission months (calendar months after the conversion, UTC). */
export function commissionWindowEnd(convertedAt: Date): Date {
  const end = new Date(convertedAt);
  end.setUTCMonth(end.getUTCMonth() + commissionMonths);
  return end;
}

/** Whether a payment at `paidAt` earns a commission: from the conversion (inclusive) to the window's end (exclusive). */
export function earnsCommission(convertedAt: Date, paidAt: Date): boolean {
  return paidAt.getTime() >= convertedAt.getTime() && paidAt.getTime() < commissionWindowEnd(convertedAt).getTime();
}

export function availableAtFor(earnedAt: Date, holdingMs: number): Date {
  return new Date(earnedAt.getTime() + holdingMs);
}

/** Whether a click at `clickedAt` still attributes a signup at `signupAt` (the cookie window, inclusive at its end). */
export function withinCookieWindow(clickedAt: Date, signupAt: Date, windowDays = cookieWindowDays): boolean {
  const age = signupAt.getTime() - clickedAt.getTime();
  return age >= 0 && age <= windowDays * 86_400_000;
}

export interface CommissionMoney {
  amountCents: number;
  invoiceCents: number;
  refundClawedCents: number;
  disputeClawedCents: number;
}

/**
 * What a refund inside the holding period takes back in total: the commission's share of the
 * refunded cents (rounded up, never more than the commission less what a dispute already took).
 * The caller claws back the difference from what refunds took before.
 */
export function refundClawbackTarget(c: CommissionMoney, refundedCents: number): number {
  const share = Math.ceil((c.amountCents * Math.min(refundedCents, c.invoiceCents)) / c.invoiceCents);
  return Math.max(c.refundClawedCents, Math.min(share, c.amountCents - c.disputeClawedCents));
}

/** A refund claws back only inside the holding period: it happened before the commission's available_at. */
export function refundInsideWindow(refundAt: Date, availableAt: Date): boolean {
  return refundAt.getTime() < availableAt.getTime();
}

export type DisputeMove =
  { kind: 'clawback_dispute'; cents: number } | { kind: 'dispute_reversal'; cents: number } | { kind: 'none' };

/**
 * A dispute's effect on a commission: opened, it claws back what refunds left; won, it gives back
 * what it took; lost, the clawback stands. A dispute closed is never reopened (billing's rule).
 */
export function decideDispute(
  c: CommissionMoney & { disputeStatus: 'open' | 'won' | 'lost' | null },
  next: 'open' | 'won' | 'lost',
): DisputeMove {
  if (c.disputeStatus === 'won' || c.disputeStatus === 'lost') return { kind: 'none' };
  if (next === 'open' || next === 'lost') {
    if (c.disputeStatus === 'open') return { kind: 'none' };
    const cents = c.amountCents - c.refundClawedCents;
    return cents > 0 ? { kind: 'clawback_dispute', cents } : { kind: 'none' };
  }
  // won: only what an opened dispute took comes back (a dispute reported won without an opening took nothing).
  return c.disputeClawedCents > 0 ? { kind: 'dispute_reversal', cents: c.disputeClawedCents } : { kind: 'none' };
}

/** Whether the maturation may mark a commission available now. */
export function decideMaturation(
  c: { status: CommissionStatus; availableAt: Date },
  now: Date,
): 'mature' | 'wait' | 'done' {
  if (c.status !== 'held') return 'done';
  return now.getTime() >= c.availableAt.getTime() ? 'mature' : 'wait';
}

export function trend(value: number, previous: number): Trend {
  const change = value - previous;
  return { value, previous, change, change_ratio: previous === 0 ? null : change / previous };
}

export function ratio(numerator: number, denominator: number): number | null {
  return denominator === 0 ? null : Math.min(1, numerator / denominator);
}

/**
 * Upcoming maturities by day (soonest first) with the running available total: the available
 * balance now plus everything maturing up to and including that day.
 */
export function maturitiesByDay(availableCents: number, rows: ReadonlyArray<{ day: string; amountCents: number }>) {
  const byDay = new Map<string, number>();
  for (const r of [...rows].sort((a, b) => a.day.localeCompare(b.day)))
    byDay.set(r.day, (byDay.get(r.day) ?? 0) + r.amountCents);
  let running = availableCents;
  return [...byDay].map(([day, amount_cents]) => ({
    day,
    amount_cents,
    running_available_cents: (running += amount_cents),
  }));
}

/** A generated code: 8 characters of an alphabet without look-alikes, from random bytes. */
export function generatedCode(random: Uint8Array): string {
  const alphabet = 'abcdefghjkmnpqrstuvwxyz23456789';
  return Array.from(random.slice(0, 8), (b) => alphabet[b % alphabet.length]).join('');
}

/** User agents counted as bots: their clicks are redirected and never counted. */
export function isBot(userAgent: string | undefined): boolean {
  if (!userAgent) return true;
  return /bot|crawl|spider|slurp|preview|fetch|monitor|curl|wget|python-requests|headless|facebookexternalhit|embedly|lighthouse/i.test(
    userAgent,
  );
}
