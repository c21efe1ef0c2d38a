/**
 * The pure rules of deciding cards (domain/assistant/cards.ts): the scope an approval may give,
 * the grant it leaves, approve-all's batches (one `decideCards` Update per answer and scope), and
 * what a card's end charges.
 */
import { describe, expect, it } from 'vitest';
import type { ApprovalScope, ProposalStatus } from '../../domain/assistant/assistant.js';
import { approvalBatches, cardCharge, grantOfApproval, scopeRefusal } from '../../domain/assistant/cards.js';
import { ValidationRefusal } from '../../domain/shared/errors.js';

interface TestCard {
  id: string;
  message_id: string | null;
  status: ProposalStatus;
  sends: boolean;
  verb: string;
  destructive: boolean;
}

const card = (id: string, over: Partial<TestCard> = {}): TestCard => ({
  id,
  message_id: 'm1',
  status: 'pending',
  sends: false,
  verb: 'add_column',
  destructive: false,
  ...over,
});

describe('scopeRefusal: a standing grant only from a card that can have one', () => {
  it('lets `once` through for any card', () => {
    expect(scopeRefusal(card('a', { destructive: true }), 'once')).toBeUndefined();
  });

  it('lets a wider scope through for a grantable card', () => {
    expect(scopeRefusal(card('a'), 'project_all')).toBeUndefined();
  });

  it('refuses a wider scope for a destructive card, a send, or a verb that always asks, naming the verb', () => {
    for (const over of [{ destructive: true }, { sends: true }, { verb: 'push_to_destination' }]) {
      const refused = scopeRefusal(card('a', over), 'thread');
      expect(refused).toBeInstanceOf(ValidationRefusal);
      expect(refused!.status).toBe(422);
      expect(refused!.issues).toEqual([
        {
          loc: ['body', 'scope'],
          msg: `${over.verb ?? 'add_column'} cannot be granted: approve it once; it asks again every time`,
          type: 'value_error',
          input: 'thread',
        },
      ]);
    }
  });

  it('leaves a card no longer pending to the conflict it meets', () => {
    expect(scopeRefusal(card('a', { status: 'applied', destructive: true }), 'thread')).toBeUndefined();
  });
});

describe('grantOfApproval: the grant an approval leaves', () => {
  it('is none for `once`', () => {
    expect(grantOfApproval(card('a'), 'once')).toBeNull();
  });

  it('is the scope asked for a grantable card, read as it was when pending', () => {
    expect(grantOfApproval(card('a', { status: 'applying' }), 'project_me')).toBe('project_me');
  });

  it('is none for a card that can never be granted', () => {
    expect(grantOfApproval(card('a', { destructive: true }), 'thread')).toBeNull();
    expect(grantOfApproval(card('a', { sends: true }), 'thread')).toBeNull();
    expect(grantOfApproval(card('a', { verb: 'push_to_destination' }), 'thread')).toBeNull();
  });
});

describe('approvalBatches: one Update per answer and scope', () => {
  const batches = (ids: string[], cards: TestCard[], scope: ApprovalScope) =>
    approvalBatches(ids, new Map(cards.map((c) => [c.id, c])), scope);

  it('groups the pending cards by answer, in the order asked, each once', () => {
    const cards = [card('a'), card('b', { message_id: 'm2' }), card('c')];
    expect(batches(['c', 'b', 'a', 'c'], cards, 'once')).toEqual([
      { messageId: 'm1', scope: 'once', cardIds: ['c', 'a'] },
      { messageId: 'm2', scope: 'once', cardIds: ['b'] },
    ]);
  });

  it('approves a card that can never be granted `once` instead of refusing the lot', () => {
    const cards = [card('a'), card('b', { destructive: true }), card('c')];
    expect(batches(['a', 'b', 'c'], cards, 'thread')).toEqual([
      { messageId: 'm1', scope: 'thread', cardIds: ['a', 'c'] },
      { messageId: 'm1', scope: 'once', cardIds: ['b'] },
    ]);
  });

  it('leaves out cards already decided, raised outside an answer, or unknown', () => {
    const cards = [card('a', { status: 'applied' }), card('b', { message_id: null }), card('c')];
    expect(batches(['a', 'b', 'c', 'd'], cards, 'once')).toEqual([{ messageId: 'm1', scope: 'once', cardIds: ['c'] }]);
  });

  it('is empty when nothing is left to decide', () => {
    expect(batches(['a'], [card('a', { status: 'dismissed' })], 'once')).toEqual([]);
  });
});

describe('cardCharge: what the work cost, never more than the quote', () => {
  it.each([
    ['charges the cost under the quote', 10, 4, { charged: 4, settle: 'charged', chargedCredits: 4 }],
    ['charges at most the quote', 10, 25, { charged: 10, settle: 'charged', chargedCredits: 10 }],
    ['returns the whole hold when the work cost nothing', 10, 0, { charged: 0, settle: 'released', chargedCredits: 0 }],
    ['records no charge for a free card', null, 0, { charged: 0, settle: 'released', chargedCredits: null }],
    [
      'charges a free card nothing whatever the work says',
      null,
      7,
      { charged: 0, settle: 'released', chargedCredits: null },
    ],
  ] as const)('%s', (_name, price, cost, expected) => {
    expect(cardCharge(price, cost)).toEqual(expected);
  });
});
