/** The account wrapper (operationId readSenderPnetAccount; interface spec: pnet account): presence, status, usage and waits. */
import { z } from 'zod';
import { TimestampSchema, UuidSchema } from '../shared/common.js';
import { limitKinds, limitShape, LimitsSchema } from './limits.js';
import { RunModeSchema } from './sender-profiles.js';

export const PresenceSchema = z.enum(['active', 'idle', 'offline']).meta({ id: 'Presence' });
export const AccountStatusSchema = z.enum(['pending', 'connected', 'disconnected']).meta({
  id: 'PnetAccountStatus',
  description:
    '`pending` until a browser first checks in signed in as an identity; `connected` from then; `disconnected` after a person disconnects it (a new token), until a browser connects it again',
});
export const CheckpointStatusSchema = z.enum(['ok', 'checkpoint', 'restricted']).meta({ id: 'CheckpointStatus' });
export const WaitReasonSchema = z
  .enum([
    'ready',
    'not_connected',
    'paused',
    'outside_working_hours',
    'daily_cap',
    'weekly_cap',
    'gap',
    'checkpoint',
    'running',
    'replies_check_failing',
  ])
  .meta({ id: 'WaitReason' });

export const UsageSchema = z
  .object({
    kind: z.enum(limitKinds),
    used_today: z.int(),
    daily_limit: z.int().describe('The ceiling in force today (warm-up included)'),
    used_this_week: z.int(),
    weekly_limit: z.int(),
  })
  .meta({ id: 'PnetUsage' });
export type Usage = z.infer<typeof UsageSchema>;

export const WaitSchema = z
  .object({ next_at: TimestampSchema.nullable(), reason: WaitReasonSchema, resets_at: TimestampSchema.nullable() })
  .meta({ id: 'PnetWait' });

export const SessionSchema = z
  .object({
    id: UuidSchema,
    browser_label: z.string(),
    extension_version: z.string(),
    connected_at: TimestampSchema,
    last_seen_at: TimestampSchema,
    presence: PresenceSchema,
  })
  .meta({ id: 'PnetSession' });

export const PnetAccountSchema = z
  .object({
    id: UuidSchema,
    sender_profile_id: UuidSchema,
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
    display_name: z.string().nullable(),
    headline: z.string().nullable(),
    photo_url: z.string().nullable(),
    vanity_name: z.string().nullable(),
    member_urn: z.string().nullable(),
    last_seen_at: TimestampSchema.nullable(),
    online: z.boolean(),
    presence: PresenceSchema,
    status: AccountStatusSchema,
    checkpoint_status: CheckpointStatusSchema,
    run_mode: RunModeSchema,
    effective_run_mode: RunModeSchema,
    min_action_interval_seconds: z.int(),
    approvals_waiting: z.int(),
    queued_count: z.int(),
    connection_token: z.string(),
    usage: z.array(UsageSchema),
    usage_resets_at: TimestampSchema,
    wait: WaitSchema.nullable(),
    sessions: z.array(SessionSchema),
    replies_check: z.object({ failing: z.boolean(), last_read_at: TimestampSchema.nullable(), holding: z.boolean() }),
    connection_checks: z.object({
      awaiting: z.int(),
      last_checked_at: TimestampSchema.nullable(),
      next_check_at: TimestampSchema.nullable(),
      watched_since: TimestampSchema.nullable(),
      supported: z.boolean(),
      problem: z.string().nullable(),
      gaps: z.array(
        z.object({ started_at: TimestampSchema, ended_at: TimestampSchema.nullable(), problem: z.string() }),
      ),
    }),
  })
  .extend(limitShape)
  .extend({ limit_maximums: LimitsSchema })
  .meta({ id: 'PnetAccount' });
export type PnetAccount = z.infer<typeof PnetAccountSchema>;

/** What a tick of an account's clock found: the sender-account workflow sleeps until the earliest due time. */
export interface AccountClock {
  connected: boolean;
  /** The end of the checkpoint back-off in force, if any. */
  checkpointUntil: string | null;
  /** When the next housekeeping read falls due. */
  nextCheckAt: string | null;
  queuedStepIds: string[];
}

export const PnetAccountWrapperSchema = z
  .object({
    account: PnetAccountSchema.optional().describe(
      'The account, connected or not: before a browser connects its status is `pending` (`disconnected` after a disconnect) and its wait `not_connected`',
    ),
    connected: z.boolean(),
    connection_token: z.string().describe('Paste into the extension; the same token connects a second browser'),
  })
  .meta({ id: 'PnetAccountWrapper' });
