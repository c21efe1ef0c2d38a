/** Starting and updating a step's workflow from the API, shared by the person and extension routes. */
import { WithStartWorkflowOperation, WorkflowNotFoundError, type Client } from '@temporalio/client';
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
    current: true,
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
 * An Update of the step's workflow, which normally runs since the step was queued. If that start
 * was lost (Temporal unreachable at the time) or the workflow has closed, the Update goes again
 * with a start (update-with-start): the first action on the step starts it. A plain Update costs
 * the server less than update-with-start, which checks and carries a whole start request every time.
 */
export async function updateStep<Args extends unknown[]>(
  client: Client,
  taskQueue: string,
  row: StepRow,
  update: UpdateDefinition<StepTransitionResult, Args>,
  updateId: string,
  args: Args,
): Promise<StepTransitionResult> {
  try {
    // The handle's overloads split Updates with and without arguments; both go through here.
    const anyArgs = update as unknown as UpdateDefinition<StepTransitionResult, [unknown]>;
    return await client.workflow.getHandle(browserStepWorkflowId(row.id)).executeUpdate(anyArgs, { updateId, args: args as unknown as [unknown] });
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) throw error;
  }
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
