/**
 * The training-session workflow's activities (workflows/agents/training-session.ts): thin doors
 * handing each call to its use case in services/agents/training-sessions.ts, where a session's
 * changes are decided (domain/agents/training-sessions.ts) and written under the compare-and-set
 * on its revision.
 */
import { Context } from '@temporalio/activity';
import type { Sql } from '../../db/sql.js';
import type { TrainingVerdict } from '../../domain/agents/training-session-schemas.js';
import type { ChatModel } from '../../integrations/chat-model.js';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import {
  abandonTrainingSession,
  applyTrainingProposal,
  beginTrainingSession,
  closeTrainingSession,
  discardTrainingChanges,
  finishInitialWrites,
  proposeTrainingUpdate,
  recordTrainingError,
  recordVerdict,
  writeTrainingContact,
  type ContactWriteInput,
  type RevisionInput,
  type SessionInput,
} from '../../services/agents/training-sessions.js';
import { withActivityFailures } from '../shared/failures.js';

export interface TrainingActivityDeps {
  sql: Sql;
  chatModel: ChatModel | null;
  enrichmentProviders?: EnrichmentProviders;
}

export function createTrainingActivities(deps: TrainingActivityDeps) {
  return withActivityFailures({
    /** Where the run stands (after a restart too): contacts still to write, rewrites still owed. */
    beginTrainingSession: (input: SessionInput) => beginTrainingSession(deps, input),
    /** Writes (or, after a note, rewrites) every slot's message for one sample contact; the attempt keys its credit holds. */
    writeTrainingContact: async (input: ContactWriteInput) =>
      writeTrainingContact(deps, input, Context.current().info.attempt),
    /** A write that could not run at all (no credits, agent gone): the session shows why, the contact waits for a person. */
    recordTrainingError: (input: { sessionId: string; recordId: string; error: string }) =>
      recordTrainingError(deps, input),
    finishInitialWrites: (input: SessionInput) => finishInitialWrites(deps, input),
    recordVerdict: (input: { sessionId: string; request: TrainingVerdict; writingOther: boolean }) =>
      recordVerdict(deps, input),
    discardTrainingChanges: (input: RevisionInput) => discardTrainingChanges(deps, input),
    /** reviewing -> proposing -> proposed: the prompt update drafted from the active lessons. */
    proposeTrainingUpdate: (input: SessionInput) => proposeTrainingUpdate(deps, input),
    /** proposed -> completed: the proposal becomes a new agent version, in the same transaction. */
    applyTrainingProposal: (input: RevisionInput) => applyTrainingProposal(deps, input),
    abandonTrainingSession: (input: RevisionInput) => abandonTrainingSession(deps, input),
    closeTrainingSession: (input: { sessionId: string; expectedRevision?: number }) =>
      closeTrainingSession(deps, input),
  });
}
export type TrainingActivities = ReturnType<typeof createTrainingActivities>;
