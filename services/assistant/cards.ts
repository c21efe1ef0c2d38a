/**
 * Deciding the assistant's cards, one function per use case
 * (docs/decisions/034-assistant-turns-and-cards.md):
 *
 * - A person approves or dismisses one card (`approveOrDismissCard`: operationIds
 *   approveAssistantAction and dismissAssistantAction) or approves many (`approveCards`:
 *   approveAllAssistantActions). The decision goes to the card's turn as its `decideCards` Update
 *   (turn-client.ts), so the person waits for the turn's answer, and is answered the card as it
 *   stands after.
 * - The turn's activities then do what the decision means: `decideCard` (the compare-and-set, the
 *   log, the grant, the hold, the verb, the end), `checkCardRun` (the end of a column run the card
 *   started) and `expireCards` (what nobody decided in time).
 *
 * A card is applied once whatever retries, restarts or double clicks happen: the decision is a
 * compare-and-set that keeps the decision's key (the same decision retried passes again, any other
 * loses), the quote is held under the card's cause key, the verb is safe to repeat (verbs.ts), and
 * the end (charge up to the quote, return the rest, the outcome in the log) is one transaction
 * guarded on `applying`.
 */
import type { AppliedResult, ApprovalScope, Outcome, ProposalStatus } from '../../domain/assistant/assistant.js';
import { approvalBatches, cardCharge, grantOfApproval, scopeRefusal } from '../../domain/assistant/cards.js';
import { ApiError } from '../../domain/shared/errors.js';
import { recordActivity } from '../../store/assistant/activity.js';
import { memberDisplayName } from '../../store/assistant/conversations.js';
import {
  decideProposal,
  endProposal,
  expireProposals,
  findProposal,
  proposalById,
  proposalsByIds,
  setProposalHold,
  type ProposalRow,
} from '../../store/assistant/proposals.js';
import { insertGrant } from '../../store/assistant/settings.js';
import { holdCredits, settleHold } from '../../store/platform/credits.js';
import type { Actor, CardDecided } from '../../workflows/assistant/assistant-turn.contract.js';
import type { ServiceDeps } from '../deps.js';
import { decideCards } from './turn-client.js';
import { applyVerb, fundedRunOutcome, VerbRefused, withdrawCard, type VerbDeps } from './verbs.js';

// ---- A person's decisions, through the card's turn ----

/** Who decides, as the API knows them; their display name is read for the log. */
export type Caller = Omit<Actor, 'displayName'>;

const decidedConflict = (card: ProposalRow) =>
  new ApiError('conflict', `This card was already decided (it is ${card.status}).`);

async function actorOf(deps: Pick<ServiceDeps, 'sql'>, caller: Caller): Promise<Actor> {
  return {
    kind: caller.kind,
    memberId: caller.memberId,
    displayName: caller.memberId ? await memberDisplayName(deps.sql, caller.memberId) : null,
  };
}

/**
 * A person approves (in `scope`) or dismisses one card of the workspace, and is answered the card
 * as it stands once its turn has decided it: `applied` or `failed`, `applying` while work it
 * started goes on, or `dismissed`. A card not pending, or a decision that lost to another, is 409;
 * a standing grant of a card that can never have one is 422; another workspace's card is 404.
 */
export async function approveOrDismissCard(
  deps: Pick<ServiceDeps, 'sql' | 'temporal'>,
  req: {
    workspaceId: string;
    cardId: string;
    decision: 'approved' | 'rejected';
    scope: ApprovalScope;
    /** The request's idempotency key: the same request retried is the same decision. */
    key: string;
    caller: Caller;
  },
): Promise<ProposalRow> {
  const card = await findProposal(deps.sql, req.workspaceId, req.cardId);
  // Only a pending card of an answer has a turn to decide it.
  if (card.status !== 'pending' || !card.message_id) throw decidedConflict(card);
  if (req.decision === 'approved') {
    const refused = scopeRefusal(card, req.scope);
    if (refused) throw refused;
  }
  const [decided] = await decideCards(deps.temporal, card.message_id, {
    cardIds: [card.id],
    decision: req.decision,
    scope: req.scope,
    key: req.key,
    actor: await actorOf(deps, req.caller),
  });
  // Read after the Update: the turn has applied the card (or started its work) by now.
  const now = await findProposal(deps.sql, req.workspaceId, req.cardId);
  if (!decided?.won) throw decidedConflict(now);
  return now;
}

/**
 * Approve-all: every card named, each decided on its own (a failure never stops the rest), in one
 * `decideCards` Update per answer and scope. Answers every card in the order asked as it stands
 * after; a card already decided comes back unchanged. An id that is not a card of the workspace is
 * 404 before anything is decided.
 */
export async function approveCards(
  deps: Pick<ServiceDeps, 'sql' | 'temporal'>,
  req: { workspaceId: string; cardIds: string[]; scope: ApprovalScope; key: string; caller: Caller },
): Promise<ProposalRow[]> {
  const ids = req.cardIds.map((id) => id.toLowerCase());
  const found = await proposalsByIds(deps.sql, req.workspaceId, ids);
  const missing = ids.filter((id) => !found.has(id));
  if (missing.length > 0) throw new ApiError('not_found', `Card ${missing.join(', ')} not found.`);
  const batches = approvalBatches(ids, found, req.scope);
  const actor = await actorOf(deps, req.caller);
  // Each Update stands alone: one that fails (its turn ended) leaves its cards as they are, and the
  // answer below shows them so.
  await Promise.allSettled(
    batches.map(({ messageId, scope, cardIds }) =>
      decideCards(deps.temporal, messageId, { cardIds, decision: 'approved', scope, key: req.key, actor }),
    ),
  );
  const now = await proposalsByIds(deps.sql, req.workspaceId, ids);
  return ids.map((id) => now.get(id)!);
}

// ---- What a decision does, in the card's turn ----

export interface DecideCardRequest {
  cardId: string;
  decision: 'approved' | 'automatic' | 'rejected';
  scope: ApprovalScope;
  key: string;
  actor: Actor;
}

export interface CardDecision extends CardDecided {
  /** Applied, and its work (a column run) is still going: the turn watches it. */
  waiting: boolean;
}

/** The card's cause key in the credit ledger: one hold per card, found again by a retry. */
export const cardCauseKey = (cardId: string) => `assistant-card:${cardId}`;

/** applying -> applied | failed with its charge, once; the hold charged up to the quote and the rest returned. */
async function endCard(
  deps: Pick<ServiceDeps, 'sql'>,
  card: ProposalRow,
  end: {
    status: 'applied' | 'failed';
    result: AppliedResult | null;
    charged: number;
    error: string | null;
    outcome: Outcome;
  },
): Promise<ProposalStatus> {
  return deps.sql.begin(async (tx) => {
    const charge = cardCharge(card.price_credits, end.charged);
    if (card.hold_id) await settleHold(tx, card.hold_id, charge.settle, charge.charged);
    // Guarded on `applying`: a second end (a retry after the commit) changes nothing and logs nothing.
    const ended = await endProposal(tx, card.id, {
      status: end.status,
      appliedResult: end.result,
      error: end.error,
      chargedCredits: charge.chargedCredits,
    });
    if (ended) {
      await recordActivity(tx, {
        workspaceId: card.workspace_id,
        conversationId: card.conversation_id,
        proposalId: card.id,
        verb: card.verb,
        decision: card.decision ?? 'approved',
        outcome: end.outcome,
        actorKind: 'system',
        actorMemberId: null,
        actorDisplayName: null,
        note: end.error ?? end.result?.content ?? null,
        causeKey: `outcome:${card.id}`,
      });
    }
    return ended?.status ?? (await proposalById(tx, card.id))!.status;
  });
}

const failCard = (deps: Pick<ServiceDeps, 'sql'>, card: ProposalRow, error: string) =>
  endCard(deps, card, { status: 'failed', result: null, charged: 0, error, outcome: 'failed' });

/**
 * What approving (by a person, or automatically under a grant) or dismissing one card does, in
 * order. Safe to repeat with the same request: each step finds what an earlier attempt did.
 */
export async function decideCard(deps: VerbDeps, req: DecideCardRequest): Promise<CardDecision> {
  const { sql } = deps;
  const before = await proposalById(sql, req.cardId);
  if (!before) return { cardId: req.cardId, won: false, status: 'expired', waiting: false };

  // The decision: pending -> applying | dismissed, keeping the decision's key. The same decision
  // retried passes again (so a retried attempt carries on below); any other loses and changes nothing.
  const decided = await decideProposal(sql, req.cardId, {
    decision: req.decision,
    key: req.key,
    scope: req.scope,
    memberId: req.actor.memberId,
    displayName: req.actor.displayName,
  });
  if (!decided) return { cardId: req.cardId, won: false, status: before.status, waiting: false };

  // Who decided, in the activity log (once: its cause key).
  await recordActivity(sql, {
    workspaceId: decided.workspace_id,
    conversationId: decided.conversation_id,
    proposalId: decided.id,
    verb: decided.verb,
    decision: req.decision,
    outcome: req.decision === 'rejected' ? 'skipped' : null,
    actorKind: req.actor.kind,
    actorMemberId: req.actor.memberId,
    actorDisplayName: req.actor.displayName,
    causeKey: `decision:${decided.id}`,
  });

  // Dismissed: what the card prepared (an add_column's column) is taken back.
  if (req.decision === 'rejected') {
    await withdrawCard(deps, decided);
    return { cardId: req.cardId, won: true, status: decided.status, waiting: false };
  }
  // A retry of this decision after the card ended answers its end.
  if (decided.status !== 'applying') return { cardId: req.cardId, won: true, status: decided.status, waiting: false };

  // An approval in a wider scope than `once` also grants the verb (GET /assistant/grants/). It is
  // given before the apply, and stands whatever the apply does.
  const grant = grantOfApproval(decided, req.scope);
  if (grant) {
    await insertGrant(sql, {
      workspaceId: decided.workspace_id,
      verb: decided.verb,
      scope: grant,
      conversationId: decided.conversation_id,
      memberId: decided.member_id ?? req.actor.memberId,
      grantedBy: req.actor.memberId,
      proposalId: decided.id,
    });
  }

  // The quote is held before the verb runs, under the card's cause key (a retry finds the same
  // hold); too few credits fail the card before anything is done.
  let card = decided;
  if (card.price_credits && !card.hold_id) {
    try {
      const hold = await holdCredits(sql, {
        workspaceId: card.workspace_id,
        amount: card.price_credits,
        causeKey: cardCauseKey(card.id),
        ttlSeconds: 30 * 86_400,
      });
      await setProposalHold(sql, card.id, hold.id);
      card = { ...card, hold_id: hold.id };
    } catch (error) {
      if (error instanceof ApiError && error.code === 'insufficient_credits') {
        return { cardId: card.id, won: true, status: await failCard(deps, card, error.detail), waiting: false };
      }
      throw error;
    }
  }

  // The verb, safe to repeat. Work that goes on (a column run) leaves the card applying: the turn
  // watches it (checkCardRun). Otherwise the end: the charge and the outcome in one transaction.
  try {
    const applied = await applyVerb(deps, card, card.hold_id);
    if (applied.kind === 'waiting') return { cardId: card.id, won: true, status: 'applying', waiting: true };
    const status = await endCard(deps, card, {
      status: 'applied',
      result: applied.result,
      charged: applied.charged,
      error: null,
      outcome: applied.outcome,
    });
    return { cardId: card.id, won: true, status, waiting: false };
  } catch (error) {
    // A refusal (the verb's, or the API's 4xx) fails the card and returns its hold; anything else
    // (a 5xx, a lost connection) throws, and the activity is retried.
    if (error instanceof VerbRefused || (error instanceof ApiError && error.status < 500)) {
      const reason = error instanceof ApiError ? error.detail : error.message;
      return { cardId: card.id, won: true, status: await failCard(deps, card, reason), waiting: false };
    }
    throw error;
  }
}

/** A card whose column run is going: ended with the run's cost, once the run has ended. */
export async function checkCardRun(
  deps: Pick<ServiceDeps, 'sql'>,
  cardId: string,
): Promise<{ done: boolean; status: ProposalStatus }> {
  const card = await proposalById(deps.sql, cardId);
  if (!card) return { done: true, status: 'failed' };
  if (card.status !== 'applying') return { done: true, status: card.status };
  const outcome = await fundedRunOutcome(deps, card);
  if (!outcome) return { done: false, status: card.status };
  const status = await endCard(deps, card, { ...outcome, outcome: outcome.status === 'applied' ? 'done' : 'failed' });
  return { done: true, status };
}

/** pending -> expired for an answer's cards nobody decided in time; their prepared columns go, and the log says why. */
export async function expireCards(deps: Pick<ServiceDeps, 'sql'>, messageId: string): Promise<string[]> {
  const expired = await expireProposals(deps.sql, messageId);
  for (const card of expired) {
    await withdrawCard(deps, card);
    await recordActivity(deps.sql, {
      workspaceId: card.workspace_id,
      conversationId: card.conversation_id,
      proposalId: card.id,
      verb: card.verb,
      decision: 'not_recorded',
      outcome: 'skipped',
      actorKind: 'system',
      actorMemberId: null,
      actorDisplayName: null,
      note: 'Nobody decided before the card expired.',
      causeKey: `decision:${card.id}`,
    });
  }
  return expired.map((c) => c.id);
}
