/**
 * A credit hold's watchdog: whoever holds credits settles the hold in SQL and signals here; if
 * nobody does before the hold expires (the process that held them crashed, a browser never
 * reported), the workflow releases it, so credits are never kept for nothing.
 */
import { condition, proxyActivities, setHandler, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import { CreditHoldStatusKey } from '../shared/search-attributes.js';
import type { CreditActivities } from '../../activities/platform/credits.js';
import {
  creditHoldSettledSignal,
  creditHoldStateQuery,
  type CreditHoldInput,
  type CreditHoldView,
} from './credit-hold.contract.js';

const { releaseExpiredHold } = proxyActivities<CreditActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', backoffCoefficient: 2 },
});

export async function creditHoldWorkflow(input: CreditHoldInput): Promise<CreditHoldView> {
  const view: CreditHoldView = {
    holdId: input.holdId,
    status: 'held',
    expiresAt: input.expiresAt,
    releasedByWatchdog: false,
  };
  setHandler(creditHoldSettledSignal, ({ outcome }) => {
    view.status = outcome;
  });
  setHandler(creditHoldStateQuery, () => view);

  // Measured from the run's start as recorded in its history, so a replay waits the same.
  const remainingMs = Math.max(0, Date.parse(input.expiresAt) - workflowInfo().runStartTime.getTime());
  const settled = await condition(() => view.status !== 'held', remainingMs);
  if (!settled) {
    view.status = await releaseExpiredHold({ holdId: input.holdId });
    view.releasedByWatchdog = view.status === 'released';
  }
  // Only where the starter set it: a namespace without the attribute registered (the
  // time-skipping test server) would fail the workflow task on an unknown key.
  if (workflowInfo().typedSearchAttributes.get(CreditHoldStatusKey) !== undefined) {
    upsertSearchAttributes([{ key: CreditHoldStatusKey, value: view.status }]);
  }
  return view;
}
