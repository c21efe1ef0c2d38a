/** Starting and waking workspace billing workflows. */
import type { Client } from '@temporalio/client';
import type { Sql } from '../../db/sql.js';
import { markBillingWorkflowStarted, workspacesWithoutBillingWorkflow } from '../../store/billing/accounts.js';
import { workspaceBillingWorkflow } from '../../workflows/billing/workspace-billing.js';
import {
  billingChangedSignal,
  workspaceBillingWorkflowId,
  type WorkspaceBillingInput,
} from '../../workflows/billing/workspace-billing.contract.js';
import { repeatEvery } from '../repeat.js';

const options = (taskQueue: string, workspaceId: string) => ({
  taskQueue,
  workflowId: workspaceBillingWorkflowId(workspaceId),
  args: [{ workspaceId }] as [WorkspaceBillingInput],
});

/** Signal-with-start: the workflow settles now, and is started if it never was. */
export async function wakeWorkspaceBilling(
  client: Client,
  taskQueue: string,
  sql: Sql,
  workspaceId: string,
): Promise<void> {
  await client.workflow.signalWithStart(workspaceBillingWorkflow, {
    ...options(taskQueue, workspaceId),
    signal: billingChangedSignal,
  });
  await markBillingWorkflowStarted(sql, workspaceId);
}

/**
 * Starts the billing workflow of every workspace that has none yet (new workspaces, made by the
 * admin command line or the API). Idempotent: one already running is left as it is. Answers how many.
 */
export async function startMissingBillingWorkflows(
  client: Client,
  taskQueue: string,
  sql: Sql,
  batch = 200,
): Promise<number> {
  let started = 0;
  for (;;) {
    const ids = await workspacesWithoutBillingWorkflow(sql, batch);
    for (const workspaceId of ids) {
      await client.workflow.start(workspaceBillingWorkflow, {
        ...options(taskQueue, workspaceId),
        workflowIdConflictPolicy: 'USE_EXISTING',
      });
      await markBillingWorkflowStarted(sql, workspaceId);
      started += 1;
    }
    if (ids.length < batch) return started;
  }
}

/**
 * Keeps every workspace's billing workflow started: once now, then every `everyMs` (workspaces made
 * by the admin command line while the service runs). Answers the function that stops it.
 */
export function keepBillingWorkflowsStarted(input: {
  client: Client;
  taskQueue: string;
  sql: Sql;
  onError: (error: unknown) => void;
  everyMs?: number;
}): () => Promise<void> {
  return repeatEvery(
    () => startMissingBillingWorkflows(input.client, input.taskQueue, input.sql),
    input.everyMs ?? 60_000,
    input.onError,
  );
}
