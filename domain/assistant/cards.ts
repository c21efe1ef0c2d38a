/**
 * The pure rules of deciding cards (docs/decisions/034-assistant-turns-and-cards.md): which scopes
 * a person's approval may give, how approve-all groups its cards into the turns' `decideCards`
 * Updates, the grant an approval leaves, and what a card's end charges. The use cases that apply
 * them are in services/assistant/cards.ts.
 */
import { ValidationRefusal } from '../shared/errors.js';
import { isGrantable, type ApprovalScope, type GrantScope, type ProposalStatus } from './assistant.js';

/** What the grant rule reads of a card. */
export interface GrantableCard {
  status: ProposalStatus;
  sends: boolean;
  verb: string;
  destructive: boolean;
}

/**
 * A standing grant asked of a card that can never have one (a send, a destructive card): the 422
 * naming the verb; undefined when the scope may be given.
 */
export function scopeRefusal(card: GrantableCard, scope: ApprovalScope): ValidationRefusal | undefined {
  if (scope === 'once' || card.status !== 'pending' || isGrantable(card)) return undefined;
  return new ValidationRefusal([
    {
      loc: ['body', 'scope'],
      msg: `${card.verb} cannot be granted: approve it once; it asks again every time`,
      type: 'value_error',
      input: scope,
    },
  ]);
}

/** The grant an approval leaves: its scope when wider than `once` and the card could be granted while it was pending. */
export function grantOfApproval(card: Omit<GrantableCard, 'status'>, scope: ApprovalScope): GrantScope | null {
  // The approval has already moved the card on (pending -> applying); the rule reads it as it was decided.
  return scope !== 'once' && isGrantable({ ...card, status: 'pending' }) ? scope : null;
}

/** One `decideCards` Update of approve-all: cards of one answer approved in one scope. */
export interface ApprovalBatch {
  messageId: string;
  scope: ApprovalScope;
  cardIds: string[];
}

/**
 * Approve-all's Updates: each pending card named (once, in the order asked) in its answer's batch
 * for its scope. A card that can never be granted is approved `once` instead of refusing the lot;
 * a card already decided, or raised outside an answer, is left as it is.
 */
export function approvalBatches(
  ids: readonly string[],
  cards: ReadonlyMap<string, GrantableCard & { id: string; message_id: string | null }>,
  scope: ApprovalScope,
): ApprovalBatch[] {
  const byAnswer = new Map<string, Map<ApprovalScope, string[]>>();
  for (const id of new Set(ids)) {
    const card = cards.get(id);
    if (!card || card.status !== 'pending' || !card.message_id) continue;
    const cardScope = scope === 'once' || isGrantable(card) ? scope : 'once';
    const scopes = byAnswer.get(card.message_id) ?? new Map<ApprovalScope, string[]>();
    byAnswer.set(card.message_id, scopes);
    scopes.set(cardScope, [...(scopes.get(cardScope) ?? []), card.id]);
  }
  return [...byAnswer].flatMap(([messageId, scopes]) =>
    [...scopes].map(([batchScope, cardIds]) => ({ messageId, scope: batchScope, cardIds })),
  );
}

/** What a card's end does with its hold: charge what the work cost, never more than the quote, and return the rest. */
export function cardCharge(
  priceCredits: number | null,
  cost: number,
): { charged: number; settle: 'charged' | 'released'; chargedCredits: number | null } {
  const charged = Math.min(cost, priceCredits ?? 0);
  return {
    charged,
    settle: charged > 0 ? 'charged' : 'released',
    // A free card records no charge at all (null), a priced one what it was charged (0 included).
    chargedCredits: priceCredits ? charged : null,
  };
}
