import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { CreditHoldStatusKey, WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';
import { creditHoldWorkflow } from '../../workflows/platform/credit-hold.js';
import { creditHoldWorkflowId } from '../../workflows/platform/credit-hold.contract.js';
import type { CreditHold } from '../../store/platform/credits.js';
import type { TemporalHandle } from '../../services/deps.js';

/**
 * Starts the watchdog of a hold. Idempotent: a retried caller finds it already started. Call it
 * after the hold's transaction commits; a crash in between leaves a hold the caller's own retry
 * (same cause key, same hold) watches.
 */
export async function watchCreditHold(temporal: TemporalHandle, hold: CreditHold): Promise<void> {
  try {
    await temporal.client.workflow.start(creditHoldWorkflow, {
      taskQueue: temporal.taskQueue,
      workflowId: creditHoldWorkflowId(hold.id),
      args: [{ holdId: hold.id, workspaceId: hold.workspace_id, expiresAt: hold.expires_at.toISOString() }],
      typedSearchAttributes: [
        { key: WorkspaceIdKey, value: hold.workspace_id },
        { key: CreditHoldStatusKey, value: 'held' },
      ],
    });
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  }
}
