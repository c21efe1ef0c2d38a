/**
 * One commission's holding period (issue 20, decision 043): `commission/<id>` sleeps on a durable
 * timer until `available_at` and then marks the commission available (held -> available by
 * compare-and-set, in the transaction that releases its held ledger rows). Refunds and disputes are
 * written by the billing event's own transaction; their signal only makes the workflow look again,
 * so a fully clawed-back commission ends at once, and a lost signal changes nothing but when the
 * workflow finds out. The time is the workflow's (`workflowNow`), so a time-skipping test and a
 * replay agree; a worker killed at any point resumes the same sleep or retries the same guarded write.
 */
import { condition, continueAsNew, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import { msUntil, workflowNow } from '../shared/clock.js';
import type { CommissionActivities } from '../../activities/affiliates/commission.js';
import { commissionChangedSignal, commissionStateQuery, type CommissionInput, type CommissionState } from './commission.contract.js';

const { lookAtCommission } = proxyActivities<CommissionActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', backoffCoefficient: 2 },
});

export async function commissionWorkflow(input: CommissionInput): Promise<CommissionState['status']> {
  let state: CommissionState | null = null;
  let changed = false;
  setHandler(commissionChangedSignal, () => {
    changed = true;
  });
  setHandler(commissionStateQuery, () => state);
  for (;;) {
    changed = false;
    state = await lookAtCommission({ commissionId: input.commissionId, now: workflowNow().toISOString() });
    if (state.status !== 'held') return state.status;
    // Due already (a clock ahead of the workflow's): look again a second later.
    await condition(() => changed, Math.max(1_000, msUntil(state.availableAt!)));
    if (workflowInfo().continueAsNewSuggested) await continueAsNew<typeof commissionWorkflow>(input);
  }
}
