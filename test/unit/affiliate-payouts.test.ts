/** The payout status transitions (decision 044; the interface spec's Affiliate payout status) as a table. */
import { describe, expect, it } from 'vitest';
import {
  decidePayoutTransition,
  forfeitsAt,
  payoutStatusOfItem,
  PayoutSettingsUpdateSchema,
  type PayoutStatus,
} from '../../domain/affiliates/payouts.js';

describe('decidePayoutTransition', () => {
  const rows: Array<[PayoutStatus, string, PayoutStatus | null, 'returned' | 'failed' | null]> = [
    ['held', 'PENDING', 'created', null],
    ['held', 'ONHOLD', 'created', null],
    ['held', 'SUCCESS', 'paid', null],
    ['held', 'UNCLAIMED', 'unclaimed', null],
    ['held', 'FAILED', 'failed', 'failed'],
    ['created', 'PENDING', null, null],
    ['created', 'SUCCESS', 'paid', null],
    ['created', 'UNCLAIMED', 'unclaimed', null],
    ['created', 'RETURNED', 'returned', 'returned'],
    ['created', 'BLOCKED', 'failed', 'failed'],
    ['created', 'REFUNDED', 'failed', 'failed'],
    ['created', 'REVERSED', 'failed', 'failed'],
    ['unclaimed', 'UNCLAIMED', null, null],
    ['unclaimed', 'SUCCESS', 'paid', null],
    ['unclaimed', 'RETURNED', 'returned', 'returned'],
    ['unclaimed', 'PENDING', null, null],
    ['paid', 'RETURNED', null, null],
    ['paid', 'REVERSED', null, null],
    ['returned', 'SUCCESS', null, null],
    ['failed', 'SUCCESS', null, null],
    ['created', 'SOMETHING_NEW', null, null],
  ];
  it.each(rows)('%s + %s → %s (money back: %s)', (from, item, to, back) => {
    const move = decidePayoutTransition(from, { kind: 'item', providerStatus: item });
    expect(move?.to ?? null).toBe(to);
    expect(move?.moneyBack ?? null).toBe(back);
    expect(move?.holdDestination ?? null).toBe(back);
  });

  it('a refusal fails an open payout with its money back, and changes nothing settled', () => {
    for (const from of ['held', 'created', 'unclaimed'] as const)
      expect(decidePayoutTransition(from, { kind: 'refused', reason: 'x' })).toEqual({
        to: 'failed',
        moneyBack: 'failed',
        holdDestination: 'failed',
      });
    for (const from of ['paid', 'returned', 'failed'] as const)
      expect(decidePayoutTransition(from, { kind: 'refused', reason: 'x' })).toBeNull();
  });

  it('maps every PayPal item status', () => {
    expect(
      ['SUCCESS', 'FAILED', 'PENDING', 'UNCLAIMED', 'RETURNED', 'ONHOLD', 'BLOCKED', 'REFUNDED', 'REVERSED'].map(
        payoutStatusOfItem,
      ),
    ).toEqual(['paid', 'failed', 'created', 'unclaimed', 'returned', 'created', 'failed', 'failed', 'failed']);
  });

  it('forfeits the forfeiture period after the hold started', () => {
    expect(forfeitsAt(new Date('2027-01-01T00:00:00Z'), 180).toISOString()).toBe('2027-06-30T00:00:00.000Z');
  });

  it('takes a payout email up to 254 characters, or null', () => {
    expect(PayoutSettingsUpdateSchema.safeParse({ payout_email: `${'a'.repeat(242)}@example.com` }).success).toBe(true);
    expect(PayoutSettingsUpdateSchema.safeParse({ payout_email: `${'a'.repeat(243)}@example.com` }).success).toBe(
      false,
    );
    expect(PayoutSettingsUpdateSchema.safeParse({ payout_email: null }).success).toBe(true);
    expect(PayoutSettingsUpdateSchema.safeParse({ payout_email: 'nope' }).success).toBe(false);
    expect(PayoutSettingsUpdateSchema.safeParse({}).success).toBe(false);
  });
});
