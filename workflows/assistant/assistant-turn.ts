/**
 * An assistant turn (id `assistant-turn/<message_id>`, contract in assistant-turn.contract.ts): one
 * answer as one durable process. It asks the model step by step (each step streamed into Postgres
 * and recorded whole, so a worker killed mid-answer resumes without asking again for the steps it
 * has), raises a card per tool call (found again on a retry, never twice), applies at once the
 * cards a standing grant covers, then stays for people's decisions (the `decideCards` Update) and
 * for the column runs applied cards started, until every card is decided and done or its time is
 * up. One workflow per turn rather than per conversation: a turn's history is small and ends,
 * and two answers of one conversation never queue behind each other (decision 034).
 */
import {
  ActivityFailure,
  ApplicationFailure,
  allHandlersFinished,
  condition,
  proxyActivities,
  setHandler,
  sleep,
  uuid4,
} from '@temporalio/workflow';
import type { AssistantTurnActivities, TurnMessage } from '../../activities/assistant/turn.js';
import type { CardActivities } from '../../activities/assistant/cards.js';
import { proposalLifetimeSeconds, type ProposalStatus } from '../../domain/assistant/assistant.js';
import {
  assistantTurnQuery,
  decideCardsUpdate,
  maxModelSteps,
  type AssistantTurnInput,
  type AssistantTurnState,
  type CardDecided,
  type DecideCardsRequest,
} from './assistant-turn.contract.js';

const model = proxyActivities<AssistantTurnActivities>({
  startToCloseTimeout: '3 minutes',
  heartbeatTimeout: '1 minute',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumAttempts: 4,
    nonRetryableErrorTypes: ['unavailable', 'not_found', 'bad_gateway'],
  },
});
const cards = proxyActivities<CardActivities & Pick<AssistantTurnActivities, 'proposeCard' | 'finishAnswer'>>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '500 milliseconds', maximumInterval: '30 seconds', nonRetryableErrorTypes: ['not_found'] },
});

/** How often the turn looks at an applied card's column run: from a few seconds, backing off to five minutes. */
const runCheckFirstMs = 2_000;
const runCheckMaxMs = 300_000;

function failureMessage(error: unknown): string {
  if (error instanceof ActivityFailure && error.cause) return error.cause.message;
  return error instanceof Error ? error.message : String(error);
}

export async function assistantTurnWorkflow(input: AssistantTurnInput): Promise<AssistantTurnState> {
  const statuses = new Map<string, ProposalStatus>();
  const watching = new Set<string>();
  let answering = true;
  let deciding = 0;
  const state = (): AssistantTurnState => ({ answering, cards: Object.fromEntries(statuses), watching: [...watching] });
  setHandler(assistantTurnQuery, state);

  const take = (d: { cardId: string; status: ProposalStatus; waiting: boolean }) => {
    statuses.set(d.cardId, d.status);
    if (d.waiting) watching.add(d.cardId);
  };

  setHandler(
    decideCardsUpdate,
    async (request): Promise<CardDecided[]> => {
      deciding += 1;
      try {
        const decided = await Promise.all(
          request.cardIds.map((cardId) =>
            cards.decideCard({
              cardId,
              decision: request.decision,
              scope: request.scope,
              key: `${request.key}:${cardId}`,
              actor: request.actor,
            }),
          ),
        );
        for (const d of decided) take(d);
        return decided.map(({ cardId, won, status }) => ({ cardId, won, status }));
      } finally {
        deciding -= 1;
      }
    },
    {
      validator: (request: DecideCardsRequest) => {
        for (const id of request.cardIds) {
          if (!statuses.has(id))
            throw ApplicationFailure.nonRetryable(`Card ${id} is not one of this answer's.`, 'not_found');
        }
      },
    },
  );

  // The answer: model steps, each tool call a card, until the model answers without calling a tool.
  // Cards raised outside the model (a connected app's call) need no answer: only their decisions.
  const transcript: TurnMessage[] = [];
  if (input.raisedCards) {
    for (const id of input.raisedCards) statuses.set(id, 'pending');
    await cards.finishAnswer({ messageId: input.messageId });
  } else
    try {
      for (let step = 0; step < maxModelSteps; step += 1) {
        const result = await model.answerStep({ messageId: input.messageId, step, transcript });
        if (result.toolCalls.length === 0) break;
        transcript.push({ role: 'assistant', content: result.text, toolCalls: result.toolCalls });
        const batchId = result.toolCalls.length > 1 ? uuid4() : null;
        for (const call of result.toolCalls) {
          const proposed = await cards.proposeCard({ messageId: input.messageId, call, batchId });
          if (proposed.cardId) {
            if (!statuses.has(proposed.cardId)) statuses.set(proposed.cardId, 'pending');
            if (proposed.autoRun && statuses.get(proposed.cardId) === 'pending') {
              take(
                await cards.decideCard({
                  cardId: proposed.cardId,
                  decision: 'automatic',
                  scope: 'once',
                  key: `automatic:${proposed.cardId}`,
                  actor: { kind: 'system', memberId: null, displayName: null },
                }),
              );
            }
          }
          transcript.push({ role: 'tool', toolCallId: call.id, content: proposed.toolResult });
        }
      }
      await cards.finishAnswer({ messageId: input.messageId });
    } catch (error) {
      await cards.finishAnswer({ messageId: input.messageId, error: failureMessage(error) });
    }
  answering = false;

  // People's decisions, and the runs applied cards started, for the cards' lifetime (a timer).
  let timeUp = false;
  void sleep(proposalLifetimeSeconds * 1000).then(() => (timeUp = true));
  let expired = false;
  const undecided = () => [...statuses.values()].some((s) => s === 'pending');
  let checkMs = runCheckFirstMs;
  for (;;) {
    if (!undecided() && watching.size === 0 && deciding === 0) break;
    if (watching.size > 0) {
      await sleep(checkMs);
      checkMs = Math.min(checkMs * 2, runCheckMaxMs);
      for (const cardId of [...watching]) {
        const checked = await cards.checkCardRun({ cardId });
        if (checked.done) {
          watching.delete(cardId);
          statuses.set(cardId, checked.status);
        }
      }
      continue;
    }
    if (expired) break; // nothing more can decide the cards
    if (timeUp) {
      expired = true;
      for (const id of await cards.expireCards({ messageId: input.messageId })) statuses.set(id, 'expired');
      await condition(() => deciding === 0);
      continue;
    }
    checkMs = runCheckFirstMs;
    await condition(() => timeUp || watching.size > 0 || (!undecided() && deciding === 0));
  }
  await condition(allHandlersFinished);
  return state();
}
