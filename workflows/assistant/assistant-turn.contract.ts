/**
 * The assistant turn's contract (workflows/assistant/assistant-turn.ts): its id, input, the one
 * Update people's decisions arrive by, and the query of its view.
 */
import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { ActorKind, ApprovalScope, ProposalStatus } from '../../domain/assistant/assistant.js';

/** One workflow per answer, named by the assistant message it writes. */
export const assistantTurnWorkflowId = (messageId: string) => `assistant-turn/${messageId}`;

export interface AssistantTurnInput {
  messageId: string;
  workspaceId: string;
  conversationId: string;
  /**
   * Cards raised outside the model, already written for this message (a connected AI app's call
   * that needs a person, decision 040): the turn asks no model and only waits for their decisions.
   */
  raisedCards?: string[];
}

/** Who decides, as the activity log records them. */
export interface Actor {
  kind: ActorKind;
  memberId: string | null;
  displayName: string | null;
}

export interface DecideCardsRequest {
  cardIds: string[];
  decision: 'approved' | 'rejected';
  scope: ApprovalScope;
  /** The decision's own key (the HTTP request's): the same request retried is the same decision. */
  key: string;
  actor: Actor;
}

/** Per card: whether this decision is the one that holds (false: someone decided it first). */
export interface CardDecided {
  cardId: string;
  won: boolean;
  status: ProposalStatus;
}

export interface AssistantTurnState {
  answering: boolean;
  cards: Record<string, ProposalStatus>;
  /** Cards applied whose work (a column run) is still going. */
  watching: string[];
}

export const decideCardsUpdate = defineUpdate<CardDecided[], [DecideCardsRequest]>('decideCards');
export const assistantTurnQuery = defineQuery<AssistantTurnState>('assistantTurn');

/** Most model steps one answer takes (a step is one model call, which may call tools). */
export const maxModelSteps = 6;
