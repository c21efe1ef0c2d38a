/** Starting and updating a step's workflow from the API, shared by the person and extension routes. */
import { WithStartWorkflowOperation, type Client } from '@temporalio/client';
import type { UpdateDefinition } from '@temporalio/common';
import type { StepRow, StepTransitionResult } from '../activities/pnet-steps.js';
import { browserStepWorkflow, browserStepWorkflowId, type BrowserStepInput } from '../workflows/browser-step.js';
import { accountChangedSignal, senderAccountWorkflow, senderAccountWorkflowId } from '../workflows/sender-account.js';
import { ContactIdKey, SequenceIdKey, SenderAccountIdKey, StepKindKey, StepStatusKey, WorkspaceIdKey } from '../workflows/search-attributes.js';

export function startOptions(taskQueue: string, row: StepRow) {
  const input: BrowserStepInput = {
    stepId: row.id,
    workspaceId: row.workspace_id,
    accountId: row.account_id,
    kind: row.kind,
    status: row.status,
    ...(row.run_before ? { runBefore: row.run_before.toISOString() } : {}),
  };
  return {
    taskQueue,
    workflowId: browserStepWorkflowId(row.id),
    args: [input] as [BrowserStepInput],
    workflowIdConflictPolicy: 'USE_EXISTING' as const,
    typedSearchAttributes: [
      { key: WorkspaceIdKey, value: row.workspace_id },
      { key: SenderAccountIdKey, value: row.account_id },
      { key: StepKindKey, value: row.kind },
      { key: StepStatusKey, value: row.status },
      ...(row.sequence_id ? [{ key: SequenceIdKey, value: row.sequence_id }] : []),
      ...(row.contact_key ? [{ key: ContactIdKey, value: row.contact_key }] : []),
    ],
  };
}

/**
 * Update-with-start: the step's workflow normally runs since the step was queued, and if that
 * start was lost (Temporal unreachable at the time) the first person-side action starts it.
 */
export function updateStep<Args extends unknown[]>(
  client: Client,
  taskQueue: string,
  row: StepRow,
  update: UpdateDefinition<StepTransitionResult, Args>,
  updateId: string,
  args: Args,
): Promise<StepTransitionResult> {
  const startWorkflowOperation = new WithStartWorkflowOperation(browserStepWorkflow, startOptions(taskQueue, row));
  return client.workflow.executeUpdateWithStart(update, { startWorkflowOperation, updateId, args });
}


/** Starts a step's workflow; one already running is left as it is. */
export async function startStepWorkflow(client: Client, taskQueue: string, row: StepRow): Promise<void> {
  await client.workflow.start(browserStepWorkflow, startOptions(taskQueue, row));
}

/**
 * Wakes the account's own workflow (starting it if it is not running): its settings changed, a
 * checkpoint was reported, or it was just created.
 */
export async function signalSenderAccount(client: Client, taskQueue: string, account: { id: string; workspace_id: string }): Promise<void> {
  await client.workflow.signalWithStart(senderAccountWorkflow, {
    taskQueue,
    workflowId: senderAccountWorkflowId(account.id),
    args: [{ accountId: account.id, workspaceId: account.workspace_id }],
    signal: accountChangedSignal,
    typedSearchAttributes: [
      { key: WorkspaceIdKey, value: account.workspace_id },
      { key: SenderAccountIdKey, value: account.id },
    ],
  });
}
