/**
 * What the plans, packs and programs are worth (decision 037). Amounts of money are integer cents
 * with a currency; credits are integers. The payment provider is told these amounts at checkout, so
 * the catalogue is the one place a price lives.
 */
import { z } from 'zod';
import type { Plan } from '../shared/common.js';

export const billingCurrency = 'usd';

export interface PlanTerms {
  /** Price of one month, in cents (0 for free). */
  monthly_price_cents: number;
  /** Credits granted at the start of each monthly period. */
  monthly_credits: number;
}

export const planTerms: Readonly<Record<Plan, PlanTerms>> = {
  free: { monthly_price_cents: 0, monthly_credits: 100 },
  paid: { monthly_price_cents: 4900, monthly_credits: 2000 },
};

export const CreditPackIdSchema = z
  .enum(['pack_1000', 'pack_5000', 'pack_20000'])
  .describe('A credit pack of the catalogue (`GET /billing/`)');
export type CreditPackId = z.infer<typeof CreditPackIdSchema>;

export const creditPacks: Readonly<Record<CreditPackId, { credits: number; price_cents: number }>> = {
  pack_1000: { credits: 1000, price_cents: 1000 },
  pack_5000: { credits: 5000, price_cents: 4500 },
  pack_20000: { credits: 20000, price_cents: 16000 },
};

/** Referral program: credits each side receives, once, when the referred workspace first pays. */
export const referralRewardCredits = { referrer: 500, referred: 500 } as const;

/** Design-partner program: the benefit while accepted, granted each period beside the plan's credits. */
export const designPartnerMonthlyCredits = 1000;

/** A failed renewal keeps the paid plan this long before the downgrade. */
export const paymentGraceDays = 7;

/** Credits granted per monthly period: the plan's, plus the design partner's while accepted. */
export function periodCredits(plan: Plan, designPartner: boolean): { plan: number; design_partner: number } {
  return { plan: planTerms[plan].monthly_credits, design_partner: designPartner ? designPartnerMonthlyCredits : 0 };
}
