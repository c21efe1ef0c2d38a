/**
 * One workspace's billing clock (decision 037): at each grant period's start it grants the period's
 * credits, at a failed payment's grace end or a cancelled subscription's period end it downgrades,
 * and in between it sleeps on a timer until the next of those, or until a signal says the account
 * changed. What is due is decided in SQL from Postgres with this workflow's own clock (`now` is
 * passed in, so time skipping and replays agree); each grant is a unique cause in the ledger, so a
 * period is granted once whatever restarts, retries or signals happen.
 */
import { condition, continueAsNew, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import { msUntil, workflowNow } from '../shared/clock.js';
import type { BillingActivities } from '../../activities/billing/billing.js';
import {
  billingChangedSignal,
  workspaceBillingStateQuery,
  type WorkspaceBillingInput,
  type WorkspaceBillingView,
} from './workspace-billing.contract.js';

const { settleBilling } = proxyActivities<BillingActivities>({
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', backoffCoefficient: 2 },
});

/** Settlements per run before continuing as new: a run's history stays small (about 10 events each). */
const settlementsPerRun = 24;

export async function workspaceBillingWorkflow(input: WorkspaceBillingInput): Promise<void> {
  const view: WorkspaceBillingView = {
    workspaceId: input.workspaceId,
    plan: null,
    periodStart: null,
    nextWakeAt: null,
    grantedThisRun: 0,
    downgrades: 0,
  };
  let changed = false;
  setHandler(billingChangedSignal, () => {
    changed = true;
  });
  setHandler(workspaceBillingStateQuery, () => view);

  for (let i = 0; i < settlementsPerRun; i += 1) {
    changed = false;
    const settled = await settleBilling({ workspaceId: input.workspaceId, now: workflowNow().toISOString() });
    if (settled.closed) return;
    Object.assign(view, { plan: settled.plan, periodStart: settled.periodStart, nextWakeAt: settled.nextWakeAt });
    view.grantedThisRun += settled.granted;
    if (settled.downgraded) view.downgrades += 1;
    const waitMs = Math.max(1_000, msUntil(settled.nextWakeAt!));
    await condition(() => changed, waitMs);
    if (workflowInfo().continueAsNewSuggested) break;
  }
  await continueAsNew<typeof workspaceBillingWorkflow>(input);
}
