/**
 * The performance window (the interface spec's Affiliate program): the window's sums against the
 * window before, lifetime sums, upcoming maturities, and the next payout's fields from the payout
 * gates (the same function the payout cycle applies, services/affiliates/payouts.ts).
 */
import type { AffiliatePayoutTerms } from '../../integrations/payouts/settings.js';
import type { Db } from '../../db/sql.js';
import { ApiError } from '../../domain/shared/errors.js';
import { affiliatePerformanceCore, requireAffiliate } from './affiliates.js';
import { payoutGateOf } from './payouts.js';

export async function affiliatePerformance(
  deps: { sql: Db; integrations: { affiliatePayouts: AffiliatePayoutTerms } },
  workspaceId: string,
  days: number,
  now: Date,
) {
  const affiliate = await requireAffiliate(deps.sql, workspaceId);
  const [core, gate] = await Promise.all([
    affiliatePerformanceCore(deps.sql, affiliate, days, now),
    payoutGateOf(deps.sql, affiliate.id, now, deps.integrations.affiliatePayouts),
  ]);
  if (!gate) throw new ApiError('not_found', 'This workspace is not enrolled in the affiliate program.');
  return {
    ...core,
    clears_minimum_on: gate.clears_minimum_on,
    next_payout_blocker: gate.next_payout_blocker,
    next_payout_cents: gate.next_payout_cents,
    next_payout_on: gate.next_payout_on,
    next_payout_status: gate.next_payout_status,
  };
}
