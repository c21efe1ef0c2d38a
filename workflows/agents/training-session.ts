/**
 * A training session (id `training-session/<session_id>`, its contract in training-session.contract.ts;
 * transitions in domain/agents/training-sessions.ts).
 * The workflow writes the sample contacts one at a time, and a note's rewrite runs as soon as the
 * write under way lands, before the next first write (`note_waiting` meanwhile). Everything a
 * person does arrives as an Update: the validator refuses cheaply from the workflow's view (409),
 * the handler runs the guarded activity (a compare-and-set on the revision) and answers the
 * session, so the HTTP answer is the stored state. Once ready it drafts the prompt update; the
 * run ends when the session is completed or abandoned.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  allHandlersFinished,
  condition,
  proxyActivities,
  setHandler,
  upsertMemo,
} from '@temporalio/workflow';
import type { UpdateDefinition } from '@temporalio/common';
import type { TrainingActivities } from '../../activities/agents/training-sessions.js';
import type { TrainingSession, TrainingStatus, TrainingVerdict } from '../../domain/agents/training-session-schemas.js';
import {
  abandonSessionUpdate,
  applyProposalUpdate,
  closeSessionUpdate,
  discardChangesUpdate,
  giveVerdictUpdate,
  trainingStateQuery,
  type RevisionRequest,
  type TrainingSessionInput,
  type TrainingView,
  type TrainingWorkflowState,
} from './training-session.contract.js';

const ended = (status: TrainingStatus | undefined) => status === 'completed' || status === 'abandoned';

const acts = proxyActivities<TrainingActivities>({
  startToCloseTimeout: '1 minute',
  retry: {
    initialInterval: '1 second',
    maximumInterval: '30 seconds',
    nonRetryableErrorTypes: ['conflict', 'not_found'],
  },
});
// A write asks the model once per slot and reads pages; its attempts are counted by the activity,
// which keeps the last failure on the message instead of failing.
const writes = proxyActivities<TrainingActivities>({
  startToCloseTimeout: '5 minutes',
  retry: {
    initialInterval: '2 seconds',
    backoffCoefficient: 2,
    maximumAttempts: 3,
    nonRetryableErrorTypes: ['conflict', 'not_found', 'insufficient_credits'],
  },
});

function conflict(message: string): never {
  throw ApplicationFailure.nonRetryable(message, 'conflict');
}

function failureMessage(error: unknown): string {
  if (error instanceof ActivityFailure && error.cause) return error.cause.message;
  return error instanceof Error ? error.message : String(error);
}

export async function trainingSessionWorkflow(input: TrainingSessionInput): Promise<TrainingWorkflowState> {
  const state: TrainingWorkflowState = { view: null, writing: null, queue: [] };
  const take = (answer: { view: TrainingView }) => {
    // Answers can arrive out of order (a handler and the main loop); the newest revision wins.
    if (state.view && answer.view.revision < state.view.revision) return;
    const changed = state.view?.status !== answer.view.status;
    state.view = answer.view;
    if (changed) upsertMemo({ status: answer.view.status });
  };
  /**
   * Cheap refusals from the workflow's view. The revision is not compared here: a write under way
   * moves it in Postgres before the workflow hears back, so only the activity's compare-and-set
   * (and the route, which reads Postgres) judge `expected_revision`.
   */
  const check = (allowed: TrainingStatus[], action: string) => {
    const view = state.view;
    if (view && !allowed.includes(view.status)) conflict(`The session is ${view.status}; it cannot ${action}.`);
  };
  const loaded = () => condition(() => state.view !== null);

  setHandler(trainingStateQuery, () => state);
  setHandler(
    giveVerdictUpdate,
    async (request) => {
      await loaded();
      const answer = await acts.recordVerdict({
        sessionId: input.sessionId,
        request,
        writingOther: state.writing !== null && state.writing !== request.record_id,
      });
      take(answer);
      if (request.verdict === 'note' && !state.queue.includes(request.record_id)) state.queue.push(request.record_id);
      return answer.session;
    },
    {
      validator: (request: TrainingVerdict) => {
        check(['running', 'reviewing'], 'take a verdict');
        const contact = state.view?.contacts[request.record_id];
        if (state.view && contact === undefined)
          throw ApplicationFailure.nonRetryable('That contact is not part of this training session.', 'not_found');
        // Its state is judged by the activity: the view may trail a write that just landed.
      },
    },
  );
  /**
   * The Updates a person's revision pins (operationIds discardTrainingChanges, applyTrainingProposal,
   * abandonTrainingProposal, closeTrainingSession) share one shape: refused from the view while the
   * status does not allow them, else the guarded activity, its view taken, the stored session
   * answered. Each keeps its own Update name (training-session.contract.ts), the one the API calls.
   */
  const onRevision = <R extends Partial<RevisionRequest>>(
    update: UpdateDefinition<TrainingSession, [R]>,
    run: (request: { sessionId: string } & R) => Promise<{ session: TrainingSession; view: TrainingView }>,
    allowed: TrainingStatus[],
    action: string,
  ) =>
    setHandler(
      update,
      async (request) => {
        await loaded();
        // The workflow's session id over anything the request carries; the revision as given (close may have none).
        const answer = await run({ ...request, sessionId: input.sessionId });
        take(answer);
        return answer.session;
      },
      { validator: (_request: R) => check(allowed, action) },
    );
  onRevision(
    discardChangesUpdate,
    acts.discardTrainingChanges,
    ['running', 'reviewing', 'proposed'],
    'discard changes',
  );
  onRevision(applyProposalUpdate, acts.applyTrainingProposal, ['proposed'], 'apply a proposal');
  onRevision(abandonSessionUpdate, acts.abandonTrainingSession, ['proposed'], 'abandon a proposal');
  onRevision(
    closeSessionUpdate,
    acts.closeTrainingSession,
    ['running', 'reviewing', 'proposing', 'proposed'],
    'be closed',
  );

  const write = async (recordId: string) => {
    state.writing = recordId;
    try {
      take(await writes.writeTrainingContact({ sessionId: input.sessionId, recordId }));
    } catch (error) {
      // Out of credits or the session gone: the contact stays as it was; the error is shown on the session.
      take(await acts.recordTrainingError({ sessionId: input.sessionId, recordId, error: failureMessage(error) }));
    } finally {
      state.writing = null;
    }
  };
  const drain = async () => {
    while (state.queue.length > 0 && !ended(state.view?.status)) await write(state.queue.shift()!);
  };

  const begun = await acts.beginTrainingSession({ sessionId: input.sessionId });
  take(begun);
  for (const id of begun.toRewrite) if (!state.queue.includes(id)) state.queue.push(id);
  for (const id of begun.toWrite) {
    if (ended(state.view?.status)) break;
    await drain();
    await write(id);
  }
  if (state.view?.status === 'running') take(await acts.finishInitialWrites({ sessionId: input.sessionId }));

  while (!ended(state.view?.status)) {
    const proposing = () => state.view!.readyToPropose || state.view!.status === 'proposing';
    await condition(() => state.queue.length > 0 || proposing() || ended(state.view?.status));
    if (state.queue.length > 0) await drain();
    else if (proposing()) take(await acts.proposeTrainingUpdate({ sessionId: input.sessionId }));
  }
  await condition(allHandlersFinished);
  return state;
}
