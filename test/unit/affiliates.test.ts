/** The affiliate program's pure rules (domain/affiliates/affiliates.ts), each bound at and past it. */
import { describe, expect, it } from 'vitest';
import {
  commissionCents,
  decideDispute,
  decideMaturation,
  earnsCommission,
  EnrollRequestSchema,
  generatedCode,
  isBot,
  maturitiesByDay,
  PageQuerySchema,
  PerformanceQuerySchema,
  ratio,
  refundClawbackTarget,
  refundInsideWindow,
  trend,
  VanityCodeSchema,
  withinCookieWindow,
} from '../../domain/affiliates/affiliates.js';

const day = 86_400_000;

describe('affiliate rules', () => {
  it('pays 20% of an invoice, rounded down to the cent', () => {
    expect(commissionCents(4900)).toBe(980);
    expect(commissionCents(4)).toBe(0);
    expect(commissionCents(5)).toBe(1);
    expect(commissionCents(999)).toBe(199);
  });

  it('earns from the conversion to 12 calendar months after it, the end excluded', () => {
    const converted = new Date('2026-01-31T10:00:00Z');
    expect(earnsCommission(converted, converted)).toBe(true);
    expect(earnsCommission(converted, new Date(converted.getTime() - 1))).toBe(false);
    expect(earnsCommission(converted, new Date('2027-01-31T09:59:59.999Z'))).toBe(true);
    expect(earnsCommission(converted, new Date('2027-01-31T10:00:00Z'))).toBe(false);
  });

  it('attributes a click within the cookie window, its end included', () => {
    const clicked = new Date('2026-05-01T00:00:00Z');
    expect(withinCookieWindow(clicked, new Date(clicked.getTime() + 30 * day))).toBe(true);
    expect(withinCookieWindow(clicked, new Date(clicked.getTime() + 30 * day + 1))).toBe(false);
    expect(withinCookieWindow(clicked, new Date(clicked.getTime() - 1))).toBe(false);
    expect(withinCookieWindow(clicked, new Date(clicked.getTime() + 7 * day), 7)).toBe(true);
  });

  it('claws back only refunds made before available_at', () => {
    const availableAt = new Date('2026-06-01T00:00:00Z');
    expect(refundInsideWindow(new Date(availableAt.getTime() - 1), availableAt)).toBe(true);
    expect(refundInsideWindow(availableAt, availableAt)).toBe(false);
  });

  it('takes back the refunded share, rounded up, never more than what a dispute left, and never less than before', () => {
    const c = { amountCents: 980, invoiceCents: 4900, refundClawedCents: 0, disputeClawedCents: 0 };
    expect(refundClawbackTarget(c, 1225)).toBe(245);
    expect(refundClawbackTarget(c, 1)).toBe(1);
    expect(refundClawbackTarget(c, 4900)).toBe(980);
    expect(refundClawbackTarget(c, 99999)).toBe(980);
    expect(refundClawbackTarget({ ...c, refundClawedCents: 300 }, 1225)).toBe(300);
    expect(refundClawbackTarget({ ...c, disputeClawedCents: 980 }, 4900)).toBe(0);
  });

  it('claws back an opened dispute once, reverses a won one, and never reopens a closed one', () => {
    const c = {
      amountCents: 1000,
      invoiceCents: 5000,
      refundClawedCents: 200,
      disputeClawedCents: 0,
      disputeStatus: null,
    };
    expect(decideDispute(c, 'open')).toEqual({ kind: 'clawback_dispute', cents: 800 });
    expect(decideDispute({ ...c, disputeStatus: 'open', disputeClawedCents: 800 }, 'open')).toEqual({ kind: 'none' });
    expect(decideDispute({ ...c, disputeStatus: 'open', disputeClawedCents: 800 }, 'won')).toEqual({
      kind: 'dispute_reversal',
      cents: 800,
    });
    expect(decideDispute({ ...c, disputeStatus: 'open', disputeClawedCents: 800 }, 'lost')).toEqual({ kind: 'none' });
    expect(decideDispute(c, 'lost')).toEqual({ kind: 'clawback_dispute', cents: 800 });
    expect(decideDispute(c, 'won')).toEqual({ kind: 'none' });
    expect(decideDispute({ ...c, disputeStatus: 'won' }, 'open')).toEqual({ kind: 'none' });
    expect(decideDispute({ ...c, refundClawedCents: 1000 }, 'open')).toEqual({ kind: 'none' });
  });

  it('matures a held commission at available_at and not a millisecond before', () => {
    const availableAt = new Date('2026-06-01T00:00:00Z');
    expect(decideMaturation({ status: 'held', availableAt }, new Date(availableAt.getTime() - 1))).toBe('wait');
    expect(decideMaturation({ status: 'held', availableAt }, availableAt)).toBe('mature');
    expect(decideMaturation({ status: 'clawed_back', availableAt }, availableAt)).toBe('done');
  });

  it('writes trends with value, previous and change, and rates capped at 1', () => {
    expect(trend(12, 8)).toEqual({ value: 12, previous: 8, change: 4, change_ratio: 0.5 });
    expect(trend(3, 0)).toEqual({ value: 3, previous: 0, change: 3, change_ratio: null });
    expect(ratio(1, 0)).toBeNull();
    expect(ratio(3, 2)).toBe(1);
  });

  it('adds maturities by day, soonest first, with the running available total', () => {
    expect(
      maturitiesByDay(100, [
        { day: '2026-06-03', amountCents: 50 },
        { day: '2026-06-01', amountCents: 20 },
        { day: '2026-06-03', amountCents: -10 },
      ]),
    ).toEqual([
      { day: '2026-06-01', amount_cents: 20, running_available_cents: 120 },
      { day: '2026-06-03', amount_cents: 40, running_available_cents: 160 },
    ]);
  });

  it('bounds the requests', () => {
    expect(EnrollRequestSchema.safeParse({ display_name: 'a' }).success).toBe(true);
    expect(EnrollRequestSchema.safeParse({ display_name: 'a'.repeat(255) }).success).toBe(true);
    expect(EnrollRequestSchema.safeParse({ display_name: '' }).success).toBe(false);
    expect(EnrollRequestSchema.safeParse({ display_name: 'a'.repeat(256) }).success).toBe(false);
    expect(VanityCodeSchema.safeParse('abc').success).toBe(true);
    expect(VanityCodeSchema.safeParse('ab').success).toBe(false);
    expect(VanityCodeSchema.safeParse('a'.repeat(32)).success).toBe(true);
    expect(VanityCodeSchema.safeParse('a'.repeat(33)).success).toBe(false);
    expect(PageQuerySchema.safeParse({ limit: '200' }).success).toBe(true);
    expect(PageQuerySchema.safeParse({ limit: '201' }).success).toBe(false);
    expect(PerformanceQuerySchema.safeParse({ days: '365' }).success).toBe(true);
    expect(PerformanceQuerySchema.safeParse({ days: '366' }).success).toBe(false);
    expect(PerformanceQuerySchema.safeParse({ days: '0' }).success).toBe(false);
  });

  it('generates 8-character codes without look-alikes, and knows bots by their user agent', () => {
    const code = generatedCode(new Uint8Array([0, 1, 2, 3, 250, 251, 252, 253]));
    expect(code).toMatch(/^[a-hjkmnp-z2-9]{8}$/);
    expect(isBot('Googlebot/2.1')).toBe(true);
    expect(isBot(undefined)).toBe(true);
    expect(isBot('curl/8.5.0')).toBe(true);
    expect(isBot('Mozilla/5.0 (Macintosh) Safari/605.1.15')).toBe(false);
  });
});
