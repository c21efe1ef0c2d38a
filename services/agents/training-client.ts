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
  abandonSessionUpdate,
  applyProposalUpdate,
  closeSessionUpdate,
  discardChangesUpdate,
  trainingSessionWorkflowId,
  type RevisionRequest,
  type TrainingSessionInput,
} from '../../workflows/agents/training-session.contract.js';
import { SequenceIdKey, WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';
import type { ServiceDeps, TemporalHandle } from '../deps.js';

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
export async function startTrainingSession(temporal: TemporalHandle, session: SessionRef): Promise<void> {
  await temporal.client.workflow.start(trainingSessionWorkflow, startOptions(temporal.taskQueue, session));
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

/**
 * The changes that carry nothing but the caller's revision, each by the path segment of its route
 * (api/routes/agents/training-sessions.ts), which also prefixes its update id.
 */
const revisionUpdates: Record<
  'discard-changes' | 'apply' | 'abandon' | 'close',
  UpdateDefinition<TrainingSession, [Partial<RevisionRequest>]>
> = {
  'discard-changes': discardChangesUpdate,
  apply: applyProposalUpdate,
  abandon: abandonSessionUpdate,
  close: closeSessionUpdate,
};
export type RevisionChange = keyof typeof revisionUpdates;

/**
 * One of those changes to the caller's live session. Only `close` may come without
 * `expected_revision` (its route's body schema; the others require it): its update id then takes
 * the revision read here, and its Update no revision to compare.
 */
export async function reviseTrainingSession(
  deps: Pick<ServiceDeps, 'sql' | 'temporal'>,
  change: RevisionChange,
  session: { workspaceId: string; sequenceId: string; sessionId: string },
  expectedRevision: number | undefined,
): Promise<TrainingSession> {
  const row = await liveTrainingSession(
    deps.sql,
    session.workspaceId,
    session.sequenceId,
    session.sessionId,
    expectedRevision,
  );
  return updateTrainingSession(
    deps.temporal.client,
    deps.temporal.taskQueue,
    row,
    revisionUpdates[change],
    `${change}/${expectedRevision ?? row.revision}`,
    [expectedRevision !== undefined ? { expectedRevision } : {}],
  );
}
