/** Starting and updating training-session workflows from the API. */
import { WithStartWorkflowOperation, type Client } from '@temporalio/client';
import type { UpdateDefinition } from '@temporalio/common';
import type { TrainingSession } from '../../domain/agents/training-session-schemas.js';
import { trainingSessionWorkflow } from '../../workflows/agents/training-session.js';
import {
  trainingSessionWorkflowId,
  type TrainingSessionInput,
} from '../../workflows/agents/training-session.contract.js';
import { SequenceIdKey, WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';

export interface SessionRef {
  id: string;
  workspace_id: string;
  sequence_id: string;
}

function startOptions(taskQueue: string, session: SessionRef) {
  const input: TrainingSessionInput = {
    sessionId: session.id,
    workspaceId: session.workspace_id,
    sequenceId: session.sequence_id,
  };
  return {
    taskQueue,
    workflowId: trainingSessionWorkflowId(session.id),
    args: [input] as [TrainingSessionInput],
    workflowIdConflictPolicy: 'USE_EXISTING' as const,
    typedSearchAttributes: [
      { key: WorkspaceIdKey, value: session.workspace_id },
      { key: SequenceIdKey, value: session.sequence_id },
    ],
  };
}

/** Starts the session's workflow; one already running is left as it is. */
export async function startTrainingSession(client: Client, taskQueue: string, session: SessionRef): Promise<void> {
  await client.workflow.start(trainingSessionWorkflow, startOptions(taskQueue, session));
}

/**
 * Update-with-start: the session's workflow runs from the start, and if that start was lost the
 * first person-side action starts it (it resumes from Postgres). The update id comes from the
 * request, so a retried HTTP request is answered once by Temporal.
 */
export function updateTrainingSession<Args extends unknown[]>(
  client: Client,
  taskQueue: string,
  session: SessionRef,
  update: UpdateDefinition<TrainingSession, Args>,
  updateId: string,
  args: Args,
): Promise<TrainingSession> {
  const startWorkflowOperation = new WithStartWorkflowOperation(
    trainingSessionWorkflow,
    startOptions(taskQueue, session),
  );
  return client.workflow.executeUpdateWithStart(update, { startWorkflowOperation, updateId, args });
}
