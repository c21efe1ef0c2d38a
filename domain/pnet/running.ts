/** The rest of the extension protocol: leave to commit, attempts, running waits, config. */
import { z } from 'zod';
import { TimestampSchema, lineSchema, textSchema } from '../shared/common.js';

export const AgentCommitSchema = z
  .object({ claimed_at: TimestampSchema.describe('The claim the browser is running') })
  .meta({ id: 'AgentCommit', description: 'Ask leave to press the irreversible button of a step' });

export const AgentCommitGrantSchema = z.object({ commit_granted_at: TimestampSchema }).meta({ id: 'AgentCommitGrant' });

export const AttemptReasonSchema = z.enum(['cut_off', 'verified_absent', 'reopen_paused']).meta({
  id: 'AttemptReason',
  description: '`cut_off`: the run stopped without an error (tab closed, browser restarted)',
});

export const AgentAttemptSchema = z
  .object({
    claimed_at: TimestampSchema,
    reason: AttemptReasonSchema,
    detail: textSchema(0, 500).nullable().default(null),
  })
  .meta({ id: 'AgentAttempt' });

export const StepAttemptSchema = z
  .object({
    claimed_at: TimestampSchema,
    reason: AttemptReasonSchema,
    detail: z.string().nullable(),
    created_at: TimestampSchema,
  })
  .meta({ id: 'StepAttempt' });
export const StepAttemptListSchema = z.object({ attempts: z.array(StepAttemptSchema) }).meta({ id: 'StepAttemptList' });

/** 2.4 Running wait: the running step waits inside the page (the nested waits, outermost first). */
export const AgentRunningWaitSchema = z
  .object({
    claimed_at: TimestampSchema.nullable()
      .default(null)
      .describe('The claim the browser is running; when given it must be current'),
    site: textSchema(0, 200),
    awake_seconds: z.int().min(0),
    tab_discarded: z.boolean().nullable().default(null),
    tab_frozen: z.boolean().nullable().default(null),
    tab_status: lineSchema(0, 16).nullable().default(null),
  })
  .meta({ id: 'AgentRunningWait' });

export const RunningWaitAnswerSchema = z
  .object({ running_claim: z.enum(['renewed', 'lost']) })
  .meta({ id: 'AgentRunningWaitAnswer', description: '`lost`: stop the step before changing anything more' });

/** The selector and pacing config the extension runs with; `config_version` names it. */
export const AgentConfigSchema = z
  .object({
    config_version: z.int(),
    selectors: z.record(z.string(), z.string()),
    pacing: z.object({
      lease_seconds: z.int(),
      claim_lease_seconds: z.int(),
      max_poll_after_seconds: z
        .int()
        .describe('The longest a check-in answer asks a browser to wait (poll_after_seconds never exceeds it)'),
      typing_ms_per_char: z.object({ min: z.int(), max: z.int() }),
      page_settle_ms: z.object({ min: z.int(), max: z.int() }),
    }),
  })
  .meta({ id: 'AgentConfig' });
export type AgentConfig = z.infer<typeof AgentConfigSchema>;
