/**
 * One browser step's life, from the Tasks page or the queue to a terminal status. Person-side
 * transitions arrive as Updates: the validator refuses cheaply from the workflow's own view (the
 * API answers 409), the handler runs the guarded SQL activity and returns the record, so the HTTP
 * answer is the workflow's answer. Claims, leases and results join this workflow next.
 */
import {
  ApplicationFailure,
  allHandlersFinished,
  condition,
  defineQuery,
  defineUpdate,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { PnetStepActivities, StepTransitionResult } from '../activities/pnet-steps.js';
import type { ActionKind, StoredStepStatus } from '../domain/pnet.js';
import { StepStatusKey } from './search-attributes.js';

export interface BrowserStepInput {
  stepId: string;
  workspaceId: string;
  accountId: string;
  kind: ActionKind;
  /** The status the row had when the workflow started (a retried start reads it again). */
  status: StoredStepStatus;
}

export interface BrowserStepView {
  stepId: string;
  status: StoredStepStatus;
}

export const approveStepUpdate = defineUpdate<StepTransitionResult>('approveStep');
export const rejectStepUpdate = defineUpdate<StepTransitionResult, [{ reason: string | null }]>('rejectStep');
export const cancelStepUpdate = defineUpdate<StepTransitionResult>('cancelStep');
export const browserStepStateQuery = defineQuery<BrowserStepView>('browserStepState');
export const browserStepWorkflowId = (stepId: string) => `browser-step/${stepId}`;

const terminal: ReadonlySet<StoredStepStatus> = new Set(['succeeded', 'failed', 'rejected', 'skipped', 'cancelled']);

const steps = proxyActivities<PnetStepActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', nonRetryableErrorTypes: ['conflict', 'not_found'] },
});

function refuse(view: BrowserStepView, allowed: StoredStepStatus[], action: string): void {
  if (!allowed.includes(view.status)) {
    const shown = view.status === 'awaiting_approval' ? 'awaiting approval' : view.status;
    throw ApplicationFailure.nonRetryable(`The step is ${shown}; it cannot be ${action}.`, 'conflict');
  }
}

export async function browserStepWorkflow(input: BrowserStepInput): Promise<BrowserStepView> {
  const view: BrowserStepView = { stepId: input.stepId, status: input.status };
  const tracked = workflowInfo().typedSearchAttributes.get(StepStatusKey) !== undefined;
  const settle = (result: StepTransitionResult, status: StoredStepStatus) => {
    view.status = status;
    if (tracked) upsertSearchAttributes([{ key: StepStatusKey, value: status }]);
    return result;
  };

  setHandler(browserStepStateQuery, () => view);
  setHandler(
    approveStepUpdate,
    async () => settle(await steps.approveStep({ stepId: input.stepId }), 'queued'),
    { validator: () => refuse(view, ['awaiting_approval'], 'approved') },
  );
  setHandler(
    rejectStepUpdate,
    async ({ reason }) => settle(await steps.rejectStep({ stepId: input.stepId, reason }), 'rejected'),
    { validator: (_input: { reason: string | null }) => refuse(view, ['awaiting_approval'], 'rejected') },
  );
  setHandler(
    cancelStepUpdate,
    async () => settle(await steps.cancelStep({ stepId: input.stepId }), 'cancelled'),
    { validator: () => refuse(view, ['awaiting_approval', 'queued', 'resuming'], 'cancelled') },
  );

  await condition(() => terminal.has(view.status));
  // Let an update that just settled the step deliver its answer before the run closes.
  await condition(allHandlersFinished);
  return view;
}
