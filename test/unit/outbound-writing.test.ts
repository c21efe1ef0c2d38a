/**
 * The outbound agent's writing decisions (domain/agents/outbound-writing.ts), without a server: the
 * slot a step is written with, the model judge over the deterministic checks, a price in credits,
 * and a stored message as the step's answer.
 */
import { describe, expect, it } from 'vitest';
import type { JudgeVerdict } from '../../domain/agents/outbound-agents.js';
import {
  creditsOf,
  slotToWrite,
  stepMessageResult,
  withModelJudge,
  type StoredWrite,
} from '../../domain/agents/outbound-writing.js';

const passing: JudgeVerdict = {
  grounded: true,
  language_ok: true,
  on_topic: true,
  safe: true,
  quality_score: 90,
  reasons: [],
};

describe('the slot a step is written with', () => {
  const agent = {
    instructions: 'Be brief.',
    slots: [{ slot_key: 'opener', kind: 'email' as const, prompt: 'Open warmly.' }],
  };

  it("is the agent's prompt for the slot, of the step's kind", () => {
    expect(slotToWrite(agent, 'opener', 'pnet_message')).toEqual({
      slot: { slot_key: 'opener', kind: 'pnet_message', prompt: 'Open warmly.' },
      findings: [],
    });
  });

  it('falls back to the general instructions (or a default) with a warning', () => {
    const { slot, findings } = slotToWrite(agent, 'follow_up', 'email');
    expect(slot).toEqual({ slot_key: 'follow_up', kind: 'email', prompt: 'Be brief.' });
    expect(findings).toEqual([
      {
        code: 'no_slot_prompt',
        excerpt: 'follow_up',
        message: 'The agent has no prompt for this slot; its general instructions were used.',
        severity: 'warning',
      },
    ]);
    expect(slotToWrite({ instructions: '', slots: [] }, 'x', 'email').slot.prompt).toBe(
      'Introduce the sender briefly and ask for a short call.',
    );
  });
});

describe('the model judge', () => {
  it('says so when it gave no usable verdict, and leaves the deterministic one', () => {
    expect(withModelJudge(passing, null)).toEqual({
      verdict: passing,
      finding: {
        code: 'model_judge',
        excerpt: '',
        message: 'The model judge gave no usable verdict; only the deterministic checks were applied.',
        severity: 'info',
      },
    });
  });

  it('fails a check either fails, and warns with its reasons when it failed one', () => {
    const model = { ...passing, safe: false, quality_score: 40, reasons: ['Pushy.', 'Too long.'] };
    const judged = withModelJudge(passing, model);
    expect(judged.verdict).toMatchObject({
      safe: false,
      quality_score: 40,
      reasons: ['Model judge: Pushy.', 'Model judge: Too long.'],
    });
    expect(judged.finding).toEqual({
      code: 'model_judge',
      excerpt: '',
      message: 'Pushy. Too long.',
      severity: 'warning',
    });
    // Reasons without a failed check, or a failed check without reasons: no finding.
    expect(withModelJudge(passing, { ...passing, reasons: ['Fine.'] }).finding).toBeNull();
    expect(withModelJudge(passing, { ...passing, safe: false }).finding).toBeNull();
  });
});

describe('a price in credits', () => {
  it('counts a started credit whole', () => {
    expect([0, 1, 10, 11, 20].map(creditsOf)).toEqual([0, 1, 1, 2, 2]);
  });
});

describe("a stored message as the step's answer", () => {
  const stored = (over: Partial<StoredWrite> = {}): StoredWrite => ({
    id: 'm1',
    status: 'ready',
    subject: 'Hello',
    body: 'Hi',
    insufficient_data: false,
    judge_verdict: passing,
    ...over,
  });

  it('needs no review when ready', () => {
    expect(stepMessageResult(stored())).toEqual({
      messageId: 'm1',
      subject: 'Hello',
      body: 'Hi',
      needsReview: false,
      reason: null,
    });
  });

  it('says why a person must look first: too little data, a failed check, else low confidence', () => {
    const review = (over: Partial<StoredWrite>) =>
      stepMessageResult(stored({ status: 'needs_review', ...over })).reason;
    expect(review({ insufficient_data: true, judge_verdict: { ...passing, safe: false } })).toBe('insufficient_data');
    expect(review({ judge_verdict: { ...passing, grounded: false } })).toBe('judge_failed');
    expect(review({ judge_verdict: {} })).toBe('judge_failed');
    expect(review({})).toBe('low_confidence');
  });
});
