/**
 * The assistant's pure rules: when a card runs without asking (a table of every combination the
 * rule names), which cards a grant covers, what may be granted, and the price labels a card shows.
 */
import { describe, expect, it } from 'vitest';
import {
  grantCovers,
  isGrantable,
  priceLabels,
  runsWithoutAsking,
  titleFrom,
  type AutoRunQuestion,
} from '../../domain/assistant/assistant.js';

const base: AutoRunQuestion = {
  verb: 'add_column',
  priceCredits: 5,
  destructive: false,
  sends: false,
  conversationId: 'c1',
  memberId: 'm1',
  settings: { approval_threshold_credits: 10, default_granted_verbs: [] },
  grants: [{ verb: 'add_column', scope: 'thread', conversation_id: 'c1', member_id: null }],
};

describe('runsWithoutAsking: granted in a covering scope AND under the threshold AND not destructive AND not a send', () => {
  const table: [string, Partial<AutoRunQuestion>, boolean][] = [
    ['granted for this thread, under the threshold', {}, true],
    ['free and granted', { priceCredits: null }, true],
    ['at the threshold asks', { priceCredits: 10 }, false],
    ['above the threshold asks', { priceCredits: 11 }, false],
    [
      'threshold 0 makes even a free card ask',
      { priceCredits: null, settings: { approval_threshold_credits: 0, default_granted_verbs: [] } },
      false,
    ],
    ['destructive asks', { destructive: true }, false],
    ['a send asks', { sends: true }, false],
    [
      'push_to_destination asks even when granted by default',
      {
        verb: 'push_to_destination',
        settings: { approval_threshold_credits: 10, default_granted_verbs: ['push_to_destination'] as never },
        grants: [],
      },
      false,
    ],
    ['another verb is not granted', { verb: 'run_column' }, false],
    ['a thread grant of another conversation does not cover', { conversationId: 'c2' }, false],
    ['no grant at all asks', { grants: [] }, false],
    [
      'a workspace default grant covers every conversation',
      {
        grants: [],
        conversationId: 'c9',
        settings: { approval_threshold_credits: 10, default_granted_verbs: ['add_column'] },
      },
      true,
    ],
    [
      'project_me covers the member in any conversation',
      {
        conversationId: 'c9',
        grants: [{ verb: 'add_column', scope: 'project_me', conversation_id: null, member_id: 'm1' }],
      },
      true,
    ],
    [
      'project_me does not cover another member',
      { memberId: 'm2', grants: [{ verb: 'add_column', scope: 'project_me', conversation_id: null, member_id: 'm1' }] },
      false,
    ],
    [
      'project_all covers everyone',
      {
        memberId: 'm2',
        conversationId: 'c9',
        grants: [{ verb: 'add_column', scope: 'project_all', conversation_id: null, member_id: null }],
      },
      true,
    ],
    [
      'project_all still asks above the threshold',
      {
        priceCredits: 50,
        grants: [{ verb: 'add_column', scope: 'project_all', conversation_id: null, member_id: null }],
      },
      false,
    ],
    [
      'project_all still asks for a destructive card',
      {
        destructive: true,
        grants: [{ verb: 'add_column', scope: 'project_all', conversation_id: null, member_id: null }],
      },
      false,
    ],
  ];
  it.each(table)('%s', (_, change, expected) => {
    expect(runsWithoutAsking({ ...base, ...change })).toBe(expected);
  });
});

describe('grants', () => {
  it('a thread grant needs the conversation, project_me the member', () => {
    expect(
      grantCovers(
        { verb: 'add_column', scope: 'thread', conversation_id: 'c1', member_id: null },
        { verb: 'add_column', conversationId: null, memberId: 'm1' },
      ),
    ).toBe(false);
    expect(
      grantCovers(
        { verb: 'add_column', scope: 'project_me', conversation_id: null, member_id: 'm1' },
        { verb: 'add_column', conversationId: 'c1', memberId: null },
      ),
    ).toBe(false);
  });

  it('only a pending card of a verb that is not a send, and not destructive, is grantable', () => {
    const card = { status: 'pending' as const, sends: false, verb: 'add_column', destructive: false };
    expect(isGrantable(card)).toBe(true);
    expect(isGrantable({ ...card, status: 'applied' })).toBe(false);
    expect(isGrantable({ ...card, sends: true })).toBe(false);
    expect(isGrantable({ ...card, verb: 'push_to_destination' })).toBe(false);
    expect(isGrantable({ ...card, destructive: true })).toBe(false);
  });
});

describe('labels', () => {
  it('a free card says so; a priced one quotes the most it may spend, per day when it keeps spending', () => {
    expect(priceLabels({ credits: null, per: 'call', expected: null, aside: '' })).toEqual({
      price_label: 'Free',
      approve_label: 'Approve',
      price_aside: 'Costs no credits',
    });
    expect(priceLabels({ credits: 1, per: 'call', expected: 1, aside: 'x' })).toEqual({
      price_label: 'Up to 1 credit',
      approve_label: 'Approve · up to 1 credit',
      price_aside: 'x',
    });
    expect(priceLabels({ credits: 30, per: 'day', expected: 30, aside: 'y' }).price_label).toBe(
      'Up to 30 credits a day',
    );
  });

  it('titles a conversation from its first question, one line of at most 80 characters', () => {
    expect(titleFrom('  Find  heads\nof sales ')).toBe('Find heads of sales');
    expect(titleFrom('x'.repeat(200))).toHaveLength(80);
  });
});
