/**
 * The affiliate payout cycle (decision 044), started monthly by the Temporal Schedule
 * `affiliate-payout-cycle` (or by hand for a period). Every step is an idempotent activity over
 * Postgres and the provider, so a killed worker or a second run of the same period pays nobody
 * twice: first it reads open payouts back (a return puts money back, a success marks paid),
 * forfeits balances unclaimed past the period, makes the period's payouts a page of affiliates at a
 * time (UNIQUE (affiliate, period), payout and ledger row in one transaction), sends them in
 * batches under stable sender batch ids, then reads them back on a timer while any is still
 * pending.
 */
import { proxyActivities, sleep } from '@temporalio/workflow';
import type { AffiliatePayoutActivities } from '../../activities/affiliates/payouts.js';
import { workflowNow } from '../shared/clock.js';
import type { PayoutCycleInput, PayoutCycleResult } from './payout-cycle.contract.js';

const acts = proxyActivities<AffiliatePayoutActivities>({
  startToCloseTimeout: '5 minutes',
  // The activities beat every 5 s: an attempt whose worker died is retried within 20 s, not 5 minutes.
  heartbeatTimeout: '20 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', backoffCoefficient: 2 },
});

/** Affiliates per preparing activity: a page is a few seconds of transactions, and 1,000 affiliates are 5 activities. */
const pageSize = 200;
/** Waits between read-backs of pending items: 1, 5, 15 minutes, then hourly. */
const followDelaysMs = [60_000, 300_000, 900_000];
const hourMs = 3_600_000;

function periodOf(instant: Date): string {
  return `${instant.getUTCFullYear()}-${String(instant.getUTCMonth() + 1).padStart(2, '0')}`;
}

export async function affiliatePayoutCycleWorkflow(input: PayoutCycleInput = {}): Promise<PayoutCycleResult> {
  // A cycle run for a given time reads its whole clock from it (shifted by the time it has run), so
  // follow-ups, returns and forfeitures are stamped on the cycle's timeline.
  const startedAt = workflowNow().getTime();
  const cycleAt = input.cycleAt ?? new Date(startedAt).toISOString();
  const shift = Date.parse(cycleAt) - startedAt;
  const now = () => new Date(workflowNow().getTime() + shift).toISOString();
  const period = periodOf(new Date(cycleAt));
  const result: PayoutCycleResult = {
    period,
    refused: null,
    followed: 0,
    forfeited: 0,
    created: 0,
    sent: 0,
    failed: 0,
    stillPending: 0,
  };

  const missing = await acts.affiliatePayoutProviderMissing();
  if (missing.length > 0) {
    result.refused = `No payout provider: set ${missing.join(' and ')}. Nothing was paid.`;
    return result;
  }

  result.followed = (await acts.followAffiliatePayouts({ now: now() })).moved;
  result.forfeited = await acts.forfeitAffiliateBalances({ now: now() });

  let after: string | null = null;
  do {
    const page: { next: string | null; created: number } = await acts.prepareAffiliatePayouts({
      cycleAt,
      after,
      limit: pageSize,
    });
    result.created += page.created;
    after = page.next;
  } while (after !== null);

  for (;;) {
    const sent = await acts.sendAffiliatePayoutBatch({ period, now: now() });
    if (sent.done) break;
    result.sent += sent.sent;
    result.failed += sent.failed;
  }

  const followFor = input.followForMs ?? 3 * 24 * hourMs;
  let waited = 0;
  for (let i = 0; ; i++) {
    const followed = await acts.followAffiliatePayouts({ now: now() });
    result.stillPending = followed.stillOpen;
    if (followed.stillOpen === 0 || waited >= followFor) break;
    const delay = followDelaysMs[i] ?? hourMs;
    await sleep(delay);
    waited += delay;
  }
  return result;
}
