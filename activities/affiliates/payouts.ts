/**
 * Activities of the affiliate payout cycle (workflows/affiliates/payout-cycle.ts): thin calls into
 * services/affiliates/payouts.ts. Each one that talks to Postgres or the provider heartbeats, so an
 * attempt lost with its worker is retried after the cycle's heartbeat timeout, not its start-to-close.
 */
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import {
  followOpenPayouts,
  forfeitUnclaimedBalances,
  preparePayoutsPage,
  sendNextPayoutBatch,
  type PreparePage,
  type SendResult,
} from '../../services/affiliates/payouts.js';
import { whileBeating } from '../shared/heartbeat.js';

export function createAffiliatePayoutActivities({ sql, integrations }: { sql: Sql; integrations: Integrations }) {
  const payouts = () => integrations.affiliatePayouts;
  const provider = () => {
    const p = payouts().provider;
    if ('missing' in p) throw new Error(`No payout provider: set ${p.missing.join(' and ')}.`);
    return p;
  };
  return {
    /** The variables the provider still needs; empty when it is configured. */
    async affiliatePayoutProviderMissing(): Promise<string[]> {
      const p = payouts().provider;
      return 'missing' in p ? p.missing : [];
    },
    followAffiliatePayouts({ now }: { now: string }): Promise<{ batches: number; moved: number; stillOpen: number }> {
      return whileBeating(() => followOpenPayouts(sql, provider(), new Date(now)));
    },
    forfeitAffiliateBalances({ now }: { now: string }): Promise<number> {
      return whileBeating(() => forfeitUnclaimedBalances(sql, new Date(now), payouts().forfeitAfterDays));
    },
    prepareAffiliatePayouts({
      cycleAt,
      after,
      limit,
    }: {
      cycleAt: string;
      after: string | null;
      limit: number;
    }): Promise<PreparePage> {
      return whileBeating(() =>
        preparePayoutsPage(sql, { cycleAt: new Date(cycleAt), after, limit, terms: payouts() }),
      );
    },
    sendAffiliatePayoutBatch({ period, now }: { period: string; now: string }): Promise<SendResult> {
      return whileBeating(() => sendNextPayoutBatch(sql, provider(), { period, now: new Date(now) }));
    },
  };
}
export type AffiliatePayoutActivities = ReturnType<typeof createAffiliatePayoutActivities>;
