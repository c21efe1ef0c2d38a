/** Starting and updating training-session workflows from the API. */
import { WithStartWorkflowOperation, type Client } from '@temporalio/client';
import type { UpdateDefinition } from '@temporalio/common';
import type { TrainingSession } from '../../domain/agents/training-session-schemas.js';
import { liveStatuses } from '../../domain/agents/training-sessions.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import type { Sql } from '../../db/sql.js';
import { findSession, type SessionRow } from '../../store/agents/training-sessions.js';
import { trainingSessionWorkflow } from '../../workflows/agents/training-session.js';
import {
  trainingSessionWorkflowId,
  type TrainingSessionInput,
} from '../../workflows/agents/training-session.contract.js';
import { SequenceIdKey, WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';

/** The session as a request may change it: the caller's, live, and at the revision they read (409 otherwise). */
export async function liveTrainingSession(
  sql: Sql,
  workspaceId: string,
  sequenceId: string,
  sessionId: string,
  expected?: number,
): Promise<SessionRow> {
  const row = await findSession(sql, workspaceId, sequenceId, sessionId);
  if (!row) throw notFound('Training session');
  if (!liveStatuses.includes(row.status))
    throw new ApiError('conflict', `The session is ${row.status}; it cannot change any more.`);
  if (expected !== undefined && expected !== row.revision)
    throw new ApiError(
      'conflict',
      `The session is at revision ${row.revision}, not ${expected}; read it again and retry.`,
    );
  return row;
}

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
