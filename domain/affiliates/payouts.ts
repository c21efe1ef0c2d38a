/**
 * Affiliate payouts (decision 044; interface spec: Affiliate program, Affiliate payout status): the
 * payloads, the documented terms and the pure transition rule of a payout's status. No I/O here.
 *
 * Statuses (the interface spec's Affiliate payout status names them; the meanings are ours):
 * - `held`: made by the cycle for its period; its money has left the available balance (a `payout`
 *   ledger row in the same transaction); not yet accepted by the provider.
 * - `created`: the provider accepted it (batch and item ids known); its item is PENDING or ONHOLD.
 * - `paid`: the item is SUCCESS. Absorbing.
 * - `unclaimed`: the item is UNCLAIMED (the receiver has no account yet); PayPal returns it after 30 days.
 * - `returned`: the item is RETURNED; the money is back on the balance (`adjustment`, cause
 *   `payout-returned:<id>`) and the destination is held until the affiliate changes the payout email.
 *   Absorbing.
 * - `failed`: the item is FAILED, BLOCKED, REFUNDED or REVERSED, or the provider refused it (422);
 *   the money is back (`adjustment`, cause `payout-failed:<id>`) and the destination is held. Absorbing.
 *
 * Every move is a compare-and-set on the status, and its money moves in the same transaction.
 */
import { z } from 'zod';
import { EmailAddressSchema, TimestampSchema, UuidSchema } from '../shared/common.js';
import { NextPayoutBlockerSchema, NextPayoutStatusSchema } from './payout-gates.js';

export const PayoutStatusSchema = z.enum(['held', 'created', 'paid', 'unclaimed', 'returned', 'failed']);
export type PayoutStatus = z.infer<typeof PayoutStatusSchema>;

/** A destination hold from a return left standing this long forfeits the available balance (documented default). */
export const defaultForfeitAfterDays = 180;
/** Items per provider batch (PayPal takes up to 15,000; smaller batches keep each send and read short). */
export const payoutBatchSize = 500;

// ---- Requests ----

export const PayoutSettingsUpdateSchema = z
  .object({
    payout_email: EmailAddressSchema.nullable().describe(
      'Where payouts are sent (a PayPal account email); null removes it. Changing it lifts a destination hold',
    ),
  })
  .meta({ id: 'AffiliatePayoutSettingsUpdate' });

// ---- Responses ----

export const PayoutSchema = z
  .object({
    id: UuidSchema,
    period: z.string().describe('The UTC month of the payout cycle that made it, YYYY-MM; one payout per period'),
    amount_cents: z.int().describe('USD cents'),
    status: PayoutStatusSchema,
    paid_at: TimestampSchema.nullable(),
    created_at: TimestampSchema,
  })
  .meta({ id: 'AffiliatePayout' });

export const PayoutSettingsSchema = z
  .object({
    payout_email: z.string().nullable(),
    identity_verified: z.boolean(),
    destination_hold: z
      .boolean()
      .describe(
        'A payout came back (returned unclaimed or failed) or an operator held the destination; changing the payout email lifts it',
      ),
    destination_hold_reason: z.enum(['returned', 'failed', 'operator']).nullable(),
    under_review: z.boolean(),
    blocked: z.boolean(),
    unavailable: z.boolean(),
    program_paused: z.boolean(),
    minimum_cents: z.int().describe('The smallest available balance a cycle pays'),
    payout_day_of_month: z.int().describe('The cycle runs on this day of each month, 00:00 UTC'),
    forfeit_after_days: z
      .int()
      .describe(
        'A balance whose payout returned unclaimed is forfeited when its destination is still held this many days later',
      ),
    next_payout_status: NextPayoutStatusSchema,
    next_payout_blocker: NextPayoutBlockerSchema.nullable(),
    next_payout_cents: z.int(),
    next_payout_on: z.iso.date(),
  })
  .meta({ id: 'AffiliatePayoutSettings' });

// ---- The transition rule ----

/** What happened to a payout: the provider's item status, or the provider refusing the item (422). */
export type PayoutEvent = { kind: 'item'; providerStatus: string } | { kind: 'refused'; reason: string };

export interface PayoutMove {
  to: PayoutStatus;
  /** The payout's money goes back on the balance in the same transaction. */
  moneyBack: 'returned' | 'failed' | null;
  /** The destination is held (a return or a failure). */
  holdDestination: 'returned' | 'failed' | null;
}

/** The provider's item status as our payout status; null for one we do not know (nothing changes). */
export function payoutStatusOfItem(providerStatus: string): PayoutStatus | null {
  switch (providerStatus) {
    case 'SUCCESS':
      return 'paid';
    case 'PENDING':
    case 'ONHOLD':
      return 'created';
    case 'UNCLAIMED':
      return 'unclaimed';
    case 'RETURNED':
      return 'returned';
    case 'FAILED':
    case 'BLOCKED':
    case 'REFUNDED':
    case 'REVERSED':
      return 'failed';
    default:
      return null;
  }
}

const allowed: Record<PayoutStatus, readonly PayoutStatus[]> = {
  held: ['created', 'paid', 'unclaimed', 'returned', 'failed'],
  created: ['paid', 'unclaimed', 'returned', 'failed'],
  unclaimed: ['paid', 'returned', 'failed'],
  paid: [],
  returned: [],
  failed: [],
};

/** The move a payout in `from` makes on `event`, or null when it stays (same status, an absorbing one, or an unknown item status). */
export function decidePayoutTransition(from: PayoutStatus, event: PayoutEvent): PayoutMove | null {
  const to: PayoutStatus | null = event.kind === 'refused' ? 'failed' : payoutStatusOfItem(event.providerStatus);
  if (!to || to === from || !allowed[from].includes(to)) return null;
  const back = to === 'returned' ? 'returned' : to === 'failed' ? 'failed' : null;
  return { to, moneyBack: back, holdDestination: back };
}

export function isOpenPayout(status: PayoutStatus): boolean {
  return status === 'held' || status === 'created' || status === 'unclaimed';
}

/** When a destination hold from a return forfeits the available balance: its start plus the forfeiture period. */
export function forfeitsAt(holdSince: Date, forfeitAfterDays: number): Date {
  return new Date(holdSince.getTime() + forfeitAfterDays * 24 * 3600 * 1000);
}

/** The provider's sender batch id for a batch row: stable, so a resend is recognised as the same batch. */
export function senderBatchIdOf(period: string, batchId: string): string {
  return `affiliate-payouts-${period}-${batchId}`;
}
