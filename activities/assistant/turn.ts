/**
 * The activities of an assistant turn, each a door to its use case: a model step and the answer's
 * end (services/assistant/answer.ts), and the card a tool call raises
 * (services/assistant/propose-card.ts). Their names and arguments are what the turn's workflow calls.
 */
import { Context } from '@temporalio/activity';
import * as answer from '../../services/assistant/answer.js';
import type { AssistantTurnDeps, StepAttempt, TurnMessage } from '../../services/assistant/answer.js';
import { proposeCard, type ProposeCardRequest } from '../../services/assistant/propose-card.js';
import type { VerbDeps } from '../../services/assistant/verbs.js';
import { withActivityFailures } from '../shared/failures.js';

export type { AssistantTurnDeps, TurnMessage } from '../../services/assistant/answer.js';
export type { ProposeCardRequest, ProposedCard } from '../../services/assistant/propose-card.js';

/** The running activity's attempt, heartbeat and cancellation. */
function stepAttempt(): StepAttempt {
  const context = Context.current();
  return {
    attempt: context.info.attempt,
    heartbeat: () => context.heartbeat(),
    signal: context.cancellationSignal,
  };
}

/** A verb's deps in this worker: its integrations, and the Temporal client and task queue of the running activity. */
function verbDeps(deps: AssistantTurnDeps): VerbDeps {
  const context = Context.current();
  return {
    sql: deps.sql,
    providers: deps.enrichmentProviders,
    temporal: { client: context.client, taskQueue: context.info.taskQueue },
    operations: deps.operations,
    endpoints: deps.endpoints,
  };
}

export function createAssistantTurnActivities(deps: AssistantTurnDeps) {
  return withActivityFailures({
    /** One model call: its parts are written as they stream; the whole step is recorded with its last parts. */
    answerStep: async (input: { messageId: string; step: number; transcript: TurnMessage[] }) =>
      answer.answerStep(deps, stepAttempt(), input),
    /** The card a tool call raises (or the one it raised before), or the reason it raises none. */
    proposeCard: async (req: ProposeCardRequest) => proposeCard(verbDeps(deps), req),
    /** Ends the answer once: its text, and the last part (`finish`, or `error` with why). */
    finishAnswer: async (input: { messageId: string; error?: string }) => answer.finishAnswer(deps, input),
  });
}

export type AssistantTurnActivities = ReturnType<typeof createAssistantTurnActivities>;
