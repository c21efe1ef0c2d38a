/**
 * Commissions maturing (decision 047): `commission-maturation/<task queue>/<shard>` owns the
 * commissions of the affiliates hashed to its shard, and loops. A local activity, at the workflow's
 * `now` (`workflowNow`, so a time-skipping test and a replay agree), marks every held commission of
 * the shard that is due available in one set-based compare-and-set (held -> available, releasing
 * their held ledger rows in the same transaction), records the shard's next held `available_at` as
 * its wake and answers it. The workflow sleeps until then or until a signal says something may be
 * due sooner; it ends when nothing is held, and continues as new after `loopsPerRun` looks or when
 * Temporal suggests it. The work batches itself: whatever fell due while a look ran is matured by
 * the next one. Refunds and disputes are written by the billing event's transaction: a clawed-back
 * commission is simply no longer held, so they need no signal. A worker killed at any point leaves
 * the same guarded statements to run again on the next worker.
 */
import { condition, continueAsNew, proxyLocalActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import { msUntil, workflowNow } from '../shared/clock.js';
import type { CommissionMaturationActivities } from '../../activities/affiliates/maturation.js';
import {
  commissionMaturationStateQuery,
  maturationWakeSignal,
  type CommissionMaturationInput,
  type CommissionMaturationState,
} from './commission-maturation.contract.js';

/**
 * A look is a few SQL statements: as a local activity it runs inside the workflow task the timer's
 * firing started, one task per wake instead of a task, an activity task and another task. A failed
 * attempt waits for its retry on a workflow timer (every backoff is over `localRetryThreshold`),
 * so the retry is the next task's, on whichever worker is alive, not held in a dying worker.
 */
const { matureDueCommissions } = proxyLocalActivities<CommissionMaturationActivities>({
  startToCloseTimeout: '10 seconds',
  localRetryThreshold: '500 milliseconds',
  // At most 5 s between attempts: attempts cut off by killed workers count too, and a look due now
  // should not wait half a minute behind them (the maturation target is 5 s).
  retry: { initialInterval: '1 second', maximumInterval: '5 seconds', backoffCoefficient: 2 },
});

export async function commissionMaturationWorkflow(
  input: CommissionMaturationInput,
): Promise<CommissionMaturationState> {
  const loopsPerRun = input.loopsPerRun ?? 50;
  const state: CommissionMaturationState = { matured: input.maturedBefore ?? 0, nextAt: null };
  let woken = false;
  setHandler(maturationWakeSignal, () => {
    woken = true;
  });
  setHandler(commissionMaturationStateQuery, () => state);
  for (let loop = 1; ; loop += 1) {
    woken = false;
    state.nextAt = null;
    const look = await matureDueCommissions({ shard: input.shard, now: workflowNow().toISOString() });
    state.matured += look.matured;
    if (look.nextAt === null) {
      // Nothing held: end, unless a signal arrived meanwhile (a commission made since the look).
      if (!woken) return state;
      continue;
    }
    state.nextAt = look.nextAt;
    await condition(() => woken, Math.max(1, msUntil(look.nextAt)));
    if (loop >= loopsPerRun || workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof commissionMaturationWorkflow>({ ...input, maturedBefore: state.matured });
    }
  }
}
