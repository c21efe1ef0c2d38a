/**
 * The onboarding checklist: the steps a new workspace takes, each done or not with when, derived
 * from the workspace's real state (store/onboarding/facts.ts), never from stored flags.
 */
import { z } from 'zod';
import { TimestampSchema } from '../shared/common.js';

export const onboardingSteps = [
  { key: 'sender_connected', label: 'Connect a sender (a pnet account or a mailbox)' },
  { key: 'mailbox_connected', label: 'Connect a mailbox' },
  { key: 'first_table', label: 'Create your first table' },
  { key: 'first_sequence', label: 'Create your first sequence' },
  { key: 'business_context', label: 'Add business context (a document about what you sell)' },
  { key: 'api_key', label: 'Mint an API key of your own' },
  { key: 'teammate_invited', label: 'Invite a teammate' },
] as const;

export type OnboardingStepKey = (typeof onboardingSteps)[number]['key'];
export const OnboardingStepKeySchema = z.enum(
  onboardingSteps.map((s) => s.key) as [OnboardingStepKey, ...OnboardingStepKey[]],
);

/** When each step first became true in the workspace's current state; null when it is not (yet). */
export type OnboardingFacts = Record<OnboardingStepKey, Date | null>;

export const OnboardingStepSchema = z.object({
  key: OnboardingStepKeySchema,
  label: z.string(),
  done: z.boolean(),
  done_at: TimestampSchema.nullable(),
});

export const OnboardingChecklistSchema = z
  .object({
    steps: z.array(OnboardingStepSchema),
    completed: z.int().min(0).describe('Steps done'),
    total: z.int().min(1),
    complete: z.boolean().describe('Every step is done'),
    dismissed: z.boolean().describe('The member asking dismissed the checklist (per member; restore brings it back)'),
    dismissed_at: TimestampSchema.nullable(),
  })
  .describe("The workspace's onboarding checklist as the member asking sees it");
export type OnboardingChecklist = z.infer<typeof OnboardingChecklistSchema>;

/** The checklist of these facts, in the steps' order, for a member who dismissed it at `dismissedAt` (or not). */
export function onboardingChecklist(facts: OnboardingFacts, dismissedAt: Date | null): OnboardingChecklist {
  const steps = onboardingSteps.map(({ key, label }) => {
    const at = facts[key];
    return { key, label, done: at !== null, done_at: at ? at.toISOString() : null };
  });
  const completed = steps.filter((s) => s.done).length;
  return {
    steps,
    completed,
    total: steps.length,
    complete: completed === steps.length,
    dismissed: dismissedAt !== null,
    dismissed_at: dismissedAt ? dismissedAt.toISOString() : null,
  };
}
