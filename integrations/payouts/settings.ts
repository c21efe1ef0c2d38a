/**
 * Affiliate payouts' settings, read from the environment integrations/config.ts hands over (it
 * stays the only reader of process.env): PAYPAL_CLIENT_ID, PAYPAL_CLIENT_SECRET and PAYPAL_API_BASE
 * (live PayPal, https://api-m.paypal.com, when unset); without the id and secret no payout is sent
 * and the cycle says which variables are missing. AFFILIATE_PAYOUT_DAY (1 to 28, the cycle's day of
 * the month at 00:00 UTC; 1), AFFILIATE_PAYOUT_MINIMUM_CENTS (5000) and AFFILIATE_FORFEIT_DAYS (180).
 */
import {
  defaultPayoutDayOfMonth,
  defaultPayoutMinimumCents,
  payoutDayOfMonthBounds,
} from '../../domain/affiliates/payout-gates.js';
import { defaultForfeitAfterDays } from '../../domain/affiliates/payouts.js';
import { createPayPalPayouts, type PayPalConfig } from './paypal.js';
import type { PayoutProvider } from './provider.js';

export interface AffiliatePayoutTerms {
  dayOfMonth: number;
  minimumCents: number;
  forfeitAfterDays: number;
}

export interface AffiliatePayoutsConfig extends AffiliatePayoutTerms {
  paypal: PayPalConfig | { missing: string[] };
}

/** What the worker and the API use: the provider (or what it needs) and the terms (a test may change them). */
export interface AffiliatePayouts extends AffiliatePayoutTerms {
  provider: PayoutProvider | { missing: string[] };
}

export function affiliatePayoutsConfigFrom(env: Readonly<Record<string, string | undefined>>): AffiliatePayoutsConfig {
  const whole = (name: string, fallback: number, min: number, max: number) => {
    const raw = env[name]?.trim();
    if (!raw) return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max)
      throw new Error(`${name} must be a whole number from ${min} to ${max}, not "${raw}".`);
    return value;
  };
  const clientId = env.PAYPAL_CLIENT_ID?.trim();
  const clientSecret = env.PAYPAL_CLIENT_SECRET?.trim();
  const missing = [...(clientId ? [] : ['PAYPAL_CLIENT_ID']), ...(clientSecret ? [] : ['PAYPAL_CLIENT_SECRET'])];
  return {
    paypal:
      clientId && clientSecret
        ? { clientId, clientSecret, apiBase: env.PAYPAL_API_BASE?.trim() || 'https://api-m.paypal.com' }
        : { missing },
    dayOfMonth: whole(
      'AFFILIATE_PAYOUT_DAY',
      defaultPayoutDayOfMonth,
      payoutDayOfMonthBounds.min,
      payoutDayOfMonthBounds.max,
    ),
    minimumCents: whole('AFFILIATE_PAYOUT_MINIMUM_CENTS', defaultPayoutMinimumCents, 1, 100_000_000),
    forfeitAfterDays: whole('AFFILIATE_FORFEIT_DAYS', defaultForfeitAfterDays, 1, 3650),
  };
}

export function createAffiliatePayouts(config: AffiliatePayoutsConfig): AffiliatePayouts {
  const { paypal, ...terms } = config;
  return { ...terms, provider: 'missing' in paypal ? { missing: paypal.missing } : createPayPalPayouts(paypal) };
}
