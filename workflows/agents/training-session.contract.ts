/**
 * The training-session workflow's contract (workflows/agents/training-session.ts): its id, input,
 * state, and the Updates (one per thing a person does) and query the API addresses it with.
 */
import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { TrainingSession, TrainingVerdict } from '../../domain/agents/training-session-schemas.js';
import type { TrainingView } from '../../domain/agents/training-sessions.js';

export type { TrainingView };

export const trainingSessionWorkflowId = (sessionId: string) => `training-session/${sessionId}`;

export interface TrainingSessionInput {
  sessionId: string;
  workspaceId: string;
  sequenceId: string;
}

export interface TrainingWorkflowState {
  view: TrainingView | null;
  /** The contact being written now. */
  writing: string | null;
  /** Contacts whose note waits for its rewrite, in order. */
  queue: string[];
}

/** The revision the caller last read (`expected_revision`); the activity's compare-and-set judges it. */
export interface RevisionRequest {
  expectedRevision: TrainingSession['revision'];
}

export const giveVerdictUpdate = defineUpdate<TrainingSession, [TrainingVerdict]>('giveVerdict');
export const discardChangesUpdate = defineUpdate<TrainingSession, [RevisionRequest]>('discardChanges');
export const applyProposalUpdate = defineUpdate<TrainingSession, [RevisionRequest]>('applyProposal');
export const abandonSessionUpdate = defineUpdate<TrainingSession, [RevisionRequest]>('abandonSession');
/** Closing takes the revision when the caller gave one. */
export const closeSessionUpdate = defineUpdate<TrainingSession, [Partial<RevisionRequest>]>('closeSession');
export const trainingStateQuery = defineQuery<TrainingWorkflowState>('trainingState');
