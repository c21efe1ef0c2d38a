/** Action kinds, the limit each counts against, and the limits of 2.10 (daily and weekly ceilings, warm-up). */
import { z } from 'zod';

export const ActionKindSchema = z
  .enum([
    'profile_view',
    'connection_request',
    'send_message',
    'inmail',
    'withdraw_connection_request',
    'follow_contact',
    'like_latest_post',
    'check_sent_invitations',
    'check_connections',
    'check_inbox',
    'read_conversation',
  ])
  .meta({ id: 'ActionKind' });
export type ActionKind = z.infer<typeof ActionKindSchema>;

/** Free housekeeping: reads of the account's own lists. A lapsed claim of one simply requeues. */
export const housekeepingKinds: ReadonlySet<ActionKind> = new Set([
  'check_sent_invitations',
  'check_connections',
  'check_inbox',
  'read_conversation',
]);

/**
 * Credits a step costs, held when it is queued and charged only when it succeeds: a failure, a
 * skip, a cancel or a rejection returns the hold. Reads of the account's own lists are free.
 */
export const stepPrices: Record<ActionKind, number> = {
  profile_view: 1,
  connection_request: 2,
  send_message: 2,
  inmail: 3,
  withdraw_connection_request: 1,
  follow_contact: 1,
  like_latest_post: 1,
  check_sent_invitations: 0,
  check_connections: 0,
  check_inbox: 0,
  read_conversation: 0,
};

/** Kinds that write to another member: a reply-check failure holds them back. */
export const messageKinds: ReadonlySet<ActionKind> = new Set(['send_message', 'inmail']);

/** Claims lapsing with the browser silent this many times end the step (interrupted_repeatedly). */
export const maxCutOffs = 3;

export const limitKinds = [
  'check_connections',
  'check_inbox',
  'check_sent_invitations',
  'connection_request',
  'follow',
  'like_post',
  'profile_view',
  'read_conversation',
  'send_message',
  'withdraw',
] as const;
export type LimitKind = (typeof limitKinds)[number];

/** The ceiling each action kind counts against (an InMail is a message). */
export const limitKindOf: Record<ActionKind, LimitKind> = {
  profile_view: 'profile_view',
  connection_request: 'connection_request',
  send_message: 'send_message',
  inmail: 'send_message',
  withdraw_connection_request: 'withdraw',
  follow_contact: 'follow',
  like_latest_post: 'like_post',
  check_sent_invitations: 'check_sent_invitations',
  check_connections: 'check_connections',
  check_inbox: 'check_inbox',
  read_conversation: 'read_conversation',
};

// ---------------------------------------------------------------------------------------------
// Limits (interface spec 2.10 Sender's channel account state): daily_limit_<kind>, weekly_limit_<kind>, weekly_connection_request_cap

export type LimitKey =
  | `daily_limit_${LimitKind}`
  | `weekly_limit_${Exclude<LimitKind, 'connection_request'>}`
  | 'weekly_connection_request_cap';

export const dailyKey = (kind: LimitKind): LimitKey => `daily_limit_${kind}`;
export const weeklyKey = (kind: LimitKind): LimitKey =>
  kind === 'connection_request' ? 'weekly_connection_request_cap' : `weekly_limit_${kind}`;

type Ceilings = Record<LimitKind, { daily: number; weekly: number }>;

/**
 * Defaults follow what the cautious tools ship (20 invitations a day and 100 a week, 20 messages,
 * 20 profile views); housekeeping reads are cheap but still paced.
 */
export const defaultCeilings: Ceilings = {
  check_connections: { daily: 12, weekly: 84 },
  check_inbox: { daily: 24, weekly: 168 },
  check_sent_invitations: { daily: 2, weekly: 14 },
  connection_request: { daily: 20, weekly: 100 },
  follow: { daily: 20, weekly: 100 },
  like_post: { daily: 20, weekly: 100 },
  profile_view: { daily: 20, weekly: 100 },
  read_conversation: { daily: 50, weekly: 350 },
  send_message: { daily: 20, weekly: 100 },
  withdraw: { daily: 10, weekly: 50 },
};

/** The most a person may set: past these an account risks restriction. */
export const maximumCeilings: Ceilings = {
  check_connections: { daily: 48, weekly: 336 },
  check_inbox: { daily: 96, weekly: 672 },
  check_sent_invitations: { daily: 12, weekly: 84 },
  connection_request: { daily: 40, weekly: 200 },
  follow: { daily: 100, weekly: 500 },
  like_post: { daily: 100, weekly: 500 },
  profile_view: { daily: 150, weekly: 750 },
  read_conversation: { daily: 200, weekly: 1400 },
  send_message: { daily: 100, weekly: 500 },
  withdraw: { daily: 50, weekly: 250 },
};

export type Limits = Record<LimitKey, number>;

export function limitsFromCeilings(ceilings: Ceilings): Limits {
  const limits = {} as Limits;
  for (const kind of limitKinds) {
    limits[dailyKey(kind)] = ceilings[kind].daily;
    limits[weeklyKey(kind)] = ceilings[kind].weekly;
  }
  return limits;
}

export const defaultLimits = limitsFromCeilings(defaultCeilings);
export const limitMaximums = limitsFromCeilings(maximumCeilings);

export const limitShape = Object.fromEntries(
  Object.entries(limitMaximums).map(([key, max]) => [key, z.int().min(0).max(max)]),
) as Record<LimitKey, z.ZodInt>;

export const LimitsSchema = z.object(limitShape).meta({ id: 'PnetLimits' });

/**
 * A new account ramps up: its ceilings are a share of the configured ones for the first weeks,
 * so a fresh account never jumps to full volume. Day 0 is the day it connected.
 */
export const warmUpRamp = [
  { untilDay: 7, share: 0.25 },
  { untilDay: 14, share: 0.5 },
  { untilDay: 21, share: 0.75 },
] as const;

export function warmUpShare(daysSinceConnected: number | null): number {
  if (daysSinceConnected === null) return warmUpRamp[0].share;
  return warmUpRamp.find((stage) => daysSinceConnected < stage.untilDay)?.share ?? 1;
}

/** The ceiling in force: the configured limit scaled by the warm-up share, at least 1 when set. */
export function effectiveLimit(configured: number, share: number): number {
  return configured === 0 ? 0 : Math.max(1, Math.floor(configured * share));
}
