/**
 * What a training session's writes and prompt update decide (domain/agents/training-session-drafts.ts),
 * without a server: the writes a run owes, rewrite or fresh write, the writer's context, how each
 * slot's outcome is stored and recorded, and which of the model's proposed changes count.
 */
import { describe, expect, it } from 'vitest';
import type { AgentSlot, WriteContext } from '../../domain/agents/outbound-agents.js';
import type { Written } from '../../domain/agents/outbound-writing.js';
import {
  contactInputOf,
  draftedMessage,
  isRewrite,
  needsResearch,
  proposalFromModel,
  proposalStep,
  sendOf,
  slotsWithProposal,
  trainingHoldKey,
  trainingWriteContext,
  writeRound,
  writeStep,
  writesOwed,
} from '../../domain/agents/training-session-drafts.js';
import type { Proposal, TrainingContact } from '../../domain/agents/training-session-schemas.js';
import { newDoc, type SessionDoc } from '../../domain/agents/training-sessions.js';

const ids = ['00000000-0000-4000-8000-00000000000a', '00000000-0000-4000-8000-00000000000b'] as const;
const doc = (): SessionDoc =>
  newDoc(
    ids.map((record_id, i) => ({
      record_id,
      person: { name: `Person ${i + 1}`, email: `p${i + 1}@example.com` },
      label: `Person ${i + 1}`,
      fields: [{ name: 'title', value: 'CTO' }],
      profile_mismatch: false,
    })),
    2,
  );
const contact = (over: Partial<TrainingContact> = {}): TrainingContact => ({ ...doc().contacts[0]!, ...over });
/** A contact with a written thread (only its length is read here). */
const withThread = (over: Partial<TrainingContact> = {}) =>
  contact({ messages: [{ id: 'm1' } as TrainingContact['messages'][number]], ...over });

const slots: AgentSlot[] = [
  { slot_key: 'opener', kind: 'email', prompt: 'Write a short first email.' },
  { slot_key: 'follow_up', kind: 'email', prompt: 'Follow up once.' },
];
const written = (over: Partial<Written> = {}): Written => ({
  draft: {
    angle: 'role',
    subject: 'Hello',
    body: 'Hi Ann',
    reasoning: 'Role first.',
    facts_used: ['CTO'],
    confidence_score: 80,
  },
  verdict: { grounded: true, language_ok: true, on_topic: true, safe: true, quality_score: 90, reasons: [] },
  findings: [],
  assessment: {
    confidence: 'high',
    confidence_score: 85,
    confident: true,
    insufficient_data: false,
    review_reason: null,
  },
  modelKey: 'model-1',
  priceTenths: 20,
  ...over,
});
const local: Proposal = {
  summary: 'Adds 1 lesson.',
  changes: [{ slot_key: 'opener', current: 'Write a short first email.', proposed: 'x', rationale: 'y' }],
  made_at: 7,
  record_id: '00000000-0000-4000-8000-00000000001c',
  round_ids: [ids[0]],
};

describe('the writes a run owes', () => {
  it('lists contacts still to write and rewrites still owed, in the session order', () => {
    const d = doc();
    expect(writesOwed(d)).toEqual({ toWrite: [...ids], toRewrite: [] });
    d.contacts[0]!.state = 'rewriting';
    d.contacts[1]!.state = 'writing';
    expect(writesOwed(d)).toEqual({ toWrite: [ids[1]], toRewrite: [ids[0]] });
    d.contacts[0]!.state = 'awaiting_verdict';
    d.contacts[1]!.state = 'rewrite_queued';
    expect(writesOwed(d)).toEqual({ toWrite: [], toRewrite: [ids[1]] });
  });

  it('rewrites only a written thread, and researches unless a rewrite has a brief', () => {
    expect(isRewrite(withThread({ state: 'rewriting' }))).toBe(true);
    // A first write that failed is written afresh, whatever its note.
    expect(isRewrite(contact({ state: 'rewriting' }))).toBe(false);
    expect(isRewrite(withThread({ state: 'writing' }))).toBe(false);
    expect(needsResearch(contact(), false)).toBe(true);
    expect(needsResearch(contact(), true)).toBe(true);
    const briefed = contact({ context: { research_brief: [{ fact: 'CTO' }], sources: [] } });
    expect(needsResearch(briefed, true)).toBe(false);
    expect(needsResearch(briefed, false)).toBe(true);
  });
});

describe("the writer's context", () => {
  it('gives the person and fields, the round, and on a rewrite the pending notes after the lessons', () => {
    const c = withThread({
      round: 1,
      notes: [
        { note: 'Old.', state: 'learned' },
        { note: 'Shorter.', state: 'pending' },
      ],
    });
    expect(contactInputOf(c)).toEqual({ name: 'Person 1', email: 'p1@example.com', fields: { title: 'CTO' } });
    const thread: WriteContext['thread'] = [];
    const first = trainingWriteContext(
      { name: 'Agent', instructions: 'Be kind.' },
      slots[0]!,
      c,
      [],
      ['L1'],
      thread,
      false,
    );
    expect(first).toMatchObject({ agentName: 'Agent', instructions: 'Be kind.', lessons: ['L1'], round: 1 });
    // The caller's thread itself: the slots written later in the same write are seen by the next.
    expect(first.thread).toBe(thread);
    const again = trainingWriteContext({ name: 'Agent', instructions: '' }, slots[0]!, c, [], ['L1'], thread, true);
    expect(again.lessons).toEqual(['L1', 'Shorter.']);
    expect(again.round).toBe(2);
    expect(writeRound(c, true)).toBe(2);
    expect(trainingHoldKey('s', 'r', 2, 'opener', 3)).toBe('training:s:r:2:opener:3');
  });
});

describe("each slot's outcome", () => {
  it('may go alone only when nothing asks for review; its first doubt is a finding above info', () => {
    expect(sendOf(written(), null)).toEqual({ alone: true, reason: null, doubt: null });
    const doubtful = written({
      assessment: { ...written().assessment, review_reason: 'low_confidence' },
      findings: [
        { code: 'a', excerpt: '', message: 'Just info.', severity: 'info' },
        { code: 'b', excerpt: '', message: 'Too long.', severity: 'warning' },
      ],
    });
    expect(sendOf(doubtful, null)).toEqual({ alone: false, reason: 'low_confidence', doubt: 'Too long.' });
    expect(sendOf(null, 'The model failed.')).toEqual({ alone: false, reason: 'error', doubt: 'The model failed.' });
  });

  it('is stored with its message, or empty with its error', () => {
    expect(draftedMessage('id-1', { slot: slots[0]!, written: written(), error: null })).toEqual({
      id: 'id-1',
      slot_key: 'opener',
      kind: 'email',
      subject: 'Hello',
      body: 'Hi Ann',
      error: null,
      send: { alone: true, reason: null, doubt: null },
      reasoning: 'Role first.',
      facts_used: ['CTO'],
      model_key: 'model-1',
    });
    expect(draftedMessage('id-2', { slot: slots[1]!, written: null, error: 'Out of shape.' })).toMatchObject({
      subject: null,
      body: '',
      error: 'Out of shape.',
      reasoning: '',
      facts_used: [],
      model_key: '',
    });
  });

  it('records the write as a step: failed only when every slot failed', () => {
    const c = withThread({ label: 'Ann', notes: [{ note: 'Shorter.', state: 'pending' }] });
    expect(writeStep(c, false, [{ error: null }, { error: 'x' }], { key: 'model-1' }, 12)).toEqual({
      action: 'write_messages',
      detail: 'Ann',
      duration_ms: 12,
      observation: '1 of 2 messages written by model-1.',
      outcome: 'completed',
      thought: 'First draft from the research brief.',
    });
    expect(writeStep(c, true, [{ error: 'x' }], null, 5)).toMatchObject({
      action: 'rewrite_messages',
      observation: '0 of 1 messages written by the local template writer.',
      outcome: 'failed',
      thought: 'Rewriting from the note: Shorter.',
    });
    expect(writeStep(c, false, [], null, 0).outcome).toBe('completed');
  });
});

describe('the prompt update', () => {
  const answer = (changes: unknown[], summary = 'Name the company.') => JSON.stringify({ summary, changes });

  it("takes the model's changes to slots the agent has, on top of the local draft", () => {
    const proposal = proposalFromModel(
      answer([
        { slot_key: 'opener', proposed: 'Name their company.', rationale: 'Asked for.' },
        { slot_key: 'no_such_slot', proposed: 'x' },
        { slot_key: 'follow_up', proposed: 'Follow up once.' },
      ]),
      slots,
      local,
    );
    expect(proposal).toEqual({
      ...local,
      summary: 'Name the company.',
      changes: [
        {
          slot_key: 'opener',
          current: 'Write a short first email.',
          proposed: 'Name their company.',
          rationale: 'Asked for.',
        },
      ],
    });
  });

  it('is none (the local draft is used) when the answer is not JSON, out of shape, or changes nothing', () => {
    expect(proposalFromModel('not json', slots, local)).toBeNull();
    expect(proposalFromModel(JSON.stringify({ changes: [] }), slots, local)).toBeNull();
    expect(
      proposalFromModel(answer([{ slot_key: 'opener', proposed: 'Write a short first email.' }]), slots, local),
    ).toBeNull();
  });

  it('records who drafted it', () => {
    const progress = { fixed: 0, in_a_row: 2, reviewed: 3, ready_after: 2, ready: true, lessons: ['Shorter.'] };
    expect(proposalStep(local, progress, null, 9)).toEqual({
      action: 'propose_update',
      detail: '1 slot change',
      duration_ms: 9,
      observation: 'Adds 1 lesson.',
      outcome: 'completed',
      thought:
        'Ready after 2 Looks good in a row; 1 lesson(s) to carry into the prompts, drafted by adding them to each slot prompt.',
    });
    expect(proposalStep({ ...local, changes: [] }, progress, 'model-1', 9)).toMatchObject({
      detail: '0 slot changes',
      thought: 'Ready after 2 Looks good in a row; 1 lesson(s) to carry into the prompts, drafted by model-1.',
    });
  });

  it("applies on top of the agent's slots as they are now", () => {
    const now = [{ ...slots[0]!, prompt: 'Edited since.' }, slots[1]!];
    expect(slotsWithProposal(now, [{ slot_key: 'opener', current: 'old', proposed: 'New.', rationale: '' }])).toEqual([
      { ...slots[0]!, prompt: 'New.' },
      slots[1],
    ]);
    expect(slotsWithProposal(now, [])).toEqual(now);
  });
});
