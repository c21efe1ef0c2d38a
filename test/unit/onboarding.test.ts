import { describe, expect, it } from 'vitest';
import { onboardingChecklist, onboardingSteps, type OnboardingFacts } from '../../domain/onboarding/checklist.js';

const none: OnboardingFacts = Object.fromEntries(onboardingSteps.map((s) => [s.key, null])) as OnboardingFacts;

describe('onboarding checklist', () => {
  it('lists every step in order, none done, for a new workspace', () => {
    const list = onboardingChecklist(none, null);
    expect(list.steps.map((s) => s.key)).toEqual([
      'sender_connected',
      'mailbox_connected',
      'first_table',
      'first_sequence',
      'business_context',
      'api_key',
      'teammate_invited',
    ]);
    expect(list).toMatchObject({ completed: 0, total: 7, complete: false, dismissed: false, dismissed_at: null });
    expect(list.steps.every((s) => !s.done && s.done_at === null && s.label.length > 0)).toBe(true);
  });

  it('marks the steps of the facts done with when, and says when all are', () => {
    const at = new Date('2026-11-24T10:00:00.000Z');
    const some = onboardingChecklist({ ...none, first_table: at }, null);
    expect(some.steps.find((s) => s.key === 'first_table')).toMatchObject({
      done: true,
      done_at: '2026-11-24T10:00:00.000Z',
    });
    expect(some.completed).toBe(1);
    const all = onboardingChecklist(Object.fromEntries(onboardingSteps.map((s) => [s.key, at])) as OnboardingFacts, at);
    expect(all).toMatchObject({
      completed: 7,
      complete: true,
      dismissed: true,
      dismissed_at: '2026-11-24T10:00:00.000Z',
    });
  });
});
