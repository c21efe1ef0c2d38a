/**
 * Deciding a card and applying it, once per card whatever retries, restarts or double clicks
 * happen: the decision is a compare-and-set that keeps the decision's key (the same decision
 * retried passes again, any other loses), the quote is held under the card's cause key, the verb
 * is safe to repeat, and the end (charge up to the quote, return the rest, the outcome in the
 * log) is one transaction guarded on `applying`.
 */
import { Context } from '@temporalio/activity';
import type { Sql } from '../../db/sql.js';
import {
  isGrantable,
  type AppliedResult,
  type Outcome,
  type ProposalStatus,
} from '../../domain/assistant/assistant.js';
import { ApiError } from '../../domain/shared/errors.js';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import {
  applyVerb,
  fundedRunOutcome,
  VerbRefused,
  withdrawCard,
  type VerbDeps,
} from '../../services/assistant/verbs.js';
import { recordActivity } from '../../store/assistant/activity.js';
import {
  decideProposal,
  endProposal,
  expireProposals,
  proposalById,
  setProposalHold,
  type ProposalRow,
} from '../../store/assistant/proposals.js';
import { insertGrant } from '../../store/assistant/settings.js';
import { holdCredits, settleHold } from '../../store/platform/credits.js';
import type { Actor, CardDecided } from '../../workflows/assistant/assistant-turn.contract.js';
import type { ApprovalScope } from '../../domain/assistant/assistant.js';
import type { EndpointCaller } from '../../integrations/web/web-endpoint.js';
import type { OperationDoor } from '../../domain/assistant/tool-cards.js';

export interface CardActivityDeps {
  sql: Sql;
  enrichmentProviders: EnrichmentProviders;
  operations: () => OperationDoor | null;
  endpoints: () => EndpointCaller;
}

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

/** The card's cause key in the credit ledger. */
export const cardCauseKey = (cardId: string) => `assistant-card:${cardId}`;

export function createCardActivities(deps: CardActivityDeps) {
  const { sql } = deps;
  const verbDeps = (): VerbDeps => {
    const context = Context.current();
    return {
      sql,
      providers: deps.enrichmentProviders,
      temporal: { client: context.client, taskQueue: context.info.taskQueue },
      operations: deps.operations,
      endpoints: deps.endpoints,
    };
  };

  /** applying -> applied | failed with its charge, once; the hold charged up to the quote and the rest returned. */
  async function endCard(
    card: ProposalRow,
    end: {
      status: 'applied' | 'failed';
      result: AppliedResult | null;
      charged: number;
      error: string | null;
      outcome: Outcome;
    },
  ) {
    return sql.begin(async (tx) => {
      const charged = Math.min(end.charged, card.price_credits ?? 0);
      if (card.hold_id) await settleHold(tx, card.hold_id, charged > 0 ? 'charged' : 'released', charged);
      const ended = await endProposal(tx, card.id, {
        status: end.status,
        appliedResult: end.result,
        error: end.error,
        chargedCredits: card.price_credits ? charged : null,
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

  const failed = (card: ProposalRow, error: string) =>
    endCard(card, { status: 'failed', result: null, charged: 0, error, outcome: 'failed' });

  return {
    async decideCard(req: DecideCardRequest): Promise<CardDecision> {
      const before = await proposalById(sql, req.cardId);
      if (!before) return { cardId: req.cardId, won: false, status: 'expired', waiting: false };
      const decided = await decideProposal(sql, req.cardId, {
        decision: req.decision,
        key: req.key,
        scope: req.scope,
        memberId: req.actor.memberId,
        displayName: req.actor.displayName,
      });
      if (!decided) return { cardId: req.cardId, won: false, status: before.status, waiting: false };
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
      if (req.decision === 'rejected') {
        await withdrawCard(verbDeps(), decided);
        return { cardId: req.cardId, won: true, status: decided.status, waiting: false };
      }
      if (decided.status !== 'applying')
        return { cardId: req.cardId, won: true, status: decided.status, waiting: false };
      if (req.scope !== 'once' && isGrantable({ ...decided, status: 'pending' })) {
        await insertGrant(sql, {
          workspaceId: decided.workspace_id,
          verb: decided.verb,
          scope: req.scope,
          conversationId: decided.conversation_id,
          memberId: decided.member_id ?? req.actor.memberId,
          grantedBy: req.actor.memberId,
          proposalId: decided.id,
        });
      }

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
            return { cardId: card.id, won: true, status: await failed(card, error.detail), waiting: false };
          }
          throw error;
        }
      }
      try {
        const applied = await applyVerb(verbDeps(), card, card.hold_id);
        if (applied.kind === 'waiting') return { cardId: card.id, won: true, status: 'applying', waiting: true };
        const status = await endCard(card, {
          status: 'applied',
          result: applied.result,
          charged: applied.charged,
          error: null,
          outcome: applied.outcome,
        });
        return { cardId: card.id, won: true, status, waiting: false };
      } catch (error) {
        if (error instanceof VerbRefused || (error instanceof ApiError && error.status < 500)) {
          const reason = error instanceof ApiError ? error.detail : error.message;
          return { cardId: card.id, won: true, status: await failed(card, reason), waiting: false };
        }
        throw error;
      }
    },

    /** A card whose column run is going: ended once the run has. */
    async checkCardRun({ cardId }: { cardId: string }): Promise<{ done: boolean; status: ProposalStatus }> {
      const card = await proposalById(sql, cardId);
      if (!card) return { done: true, status: 'failed' };
      if (card.status !== 'applying') return { done: true, status: card.status };
      const outcome = await fundedRunOutcome(verbDeps(), card);
      if (!outcome) return { done: false, status: card.status };
      const status = await endCard(card, { ...outcome, outcome: outcome.status === 'applied' ? 'done' : 'failed' });
      return { done: true, status };
    },

    /** pending -> expired for an answer's cards nobody decided in time; their prepared columns go. */
    async expireCards({ messageId }: { messageId: string }): Promise<string[]> {
      const expired = await expireProposals(sql, messageId);
      for (const card of expired) {
        await withdrawCard(verbDeps(), card);
        await recordActivity(sql, {
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
    },
  };
}

export type CardActivities = ReturnType<typeof createCardActivities>;
