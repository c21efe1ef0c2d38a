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

/**
 * Whether a tick may queue the account's housekeeping reads (services/pnet/tick-sender-account.ts):
 * it is connected, and holds no checkpoint but one whose back-off has run out by `now` (the tick
 * ends that back-off).
 */
export function housekeepingMayRun(
  account: { status: string; checkpoint_status: string; checkpoint_until: Date | null },
  now: Date,
): boolean {
  const backOffOver = account.checkpoint_until !== null && account.checkpoint_until <= now;
  return (
    account.status === 'connected' &&
    (account.checkpoint_status === 'ok' || (account.checkpoint_status === 'checkpoint' && backOffOver))
  );
}

/**
 * One kind of housekeeping read at a tick, read every `every` seconds: a read is queued when none
 * waits and `every` has passed since the last was queued (at once when there was none). The next
 * falls due `every` from `now` when one is queued or waits, else when the last one's period ends.
 */
export function housekeepingTurn(
  last: { waiting: boolean; last_at: Date | null } | undefined,
  every: number,
  now: Date,
): { queue: boolean; nextAt: Date } {
  const dueAt = last?.last_at ? new Date(last.last_at.getTime() + every * 1000) : new Date(0);
  return {
    queue: !last?.waiting && dueAt <= now,
    nextAt: last?.waiting || dueAt <= now ? new Date(now.getTime() + every * 1000) : dueAt,
  };
}

/** The earliest of the times (the first of equal ones), or null for none. */
export function earliest(times: Date[]): Date | null {
  return times.reduce<Date | null>((a, b) => (a && a <= b ? a : b), null);
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
