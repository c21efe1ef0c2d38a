/**
 * The professional-network (`pnet`) channel's contract: sender profiles, the channel account and
 * its limits (2.10), browser action steps (2.2) and their statuses (3.1). Shared by the API, the
 * workflows and the tests.
 */
import { z } from 'zod';
import { NameSchema, TimestampSchema, UuidSchema, textSchema } from '../shared/common.js';
import { pnetInboxOutcomeFields } from '../inbox/inbox.js';
import { ianaTimeZoneNames } from '../shared/time-zone-names.js';

// ---------------------------------------------------------------------------------------------
// Action kinds and the limit each one counts against

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
// Limits (2.10): daily_limit_<kind>, weekly_limit_<kind>, weekly_connection_request_cap

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

const limitShape = Object.fromEntries(
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

// ---------------------------------------------------------------------------------------------
// Sender profiles and the account's settings

export const RunModeSchema = z.enum(['manual', 'automatic']).meta({ id: 'RunMode' });
export type RunMode = z.infer<typeof RunModeSchema>;

/**
 * Every zone name this runtime reckons with: ICU's canonical names, and the IANA names it takes
 * as links (Asia/Kolkata, Europe/Kyiv, Etc/UTC), each kept as given since Intl reads them all.
 * An enum, so the OpenAPI document lists exactly what is accepted; a name this runtime's ICU
 * does not know is left out rather than accepted and failing at the first local-time sum.
 */
export const timeZones = (() => {
  const canonical = new Set(['UTC', ...Intl.supportedValuesOf('timeZone')]);
  const links = ianaTimeZoneNames.filter((name) => {
    if (canonical.has(name)) return false;
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: name });
      return true;
    } catch {
      return false;
    }
  });
  return [...canonical, ...links].sort() as [string, ...string[]];
})();

export const TimeZoneSchema = z
  .enum(timeZones)
  .meta({ id: 'TimeZone', description: 'IANA time zone of the sender (a link such as Asia/Kolkata is fine); daily usage resets at 00:00 there' });

const ClockTimeSchema = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be HH:MM (24-hour)');

const workingHoursDescription =
  "When metered steps may run, in the sender's time zone. An end at or before the start runs past midnight; equal start and end is the whole day.";

export const WorkingHoursSchema = z
  .object({
    start: ClockTimeSchema,
    end: ClockTimeSchema,
    days: z.array(z.int().min(1).max(7)).min(1).max(7).describe('ISO weekdays the window starts on, 1 = Monday'),
  })
  .meta({ id: 'WorkingHours', description: workingHoursDescription });

/**
 * As a request: a repeated day means nothing more, so each is kept once, in order (and only
 * then can there be at most seven).
 */
const WorkingHoursInputSchema = WorkingHoursSchema.extend({
  days: z
    .array(z.int().min(1).max(7))
    .min(1)
    .transform((days) => [...new Set(days)].sort())
    .describe('ISO weekdays the window starts on, 1 = Monday; a repeated day counts once'),
}).meta({ id: 'WorkingHoursRequest', description: workingHoursDescription });
export type WorkingHours = z.infer<typeof WorkingHoursSchema>;

export const defaultWorkingHours: WorkingHours = { start: '09:00', end: '18:00', days: [1, 2, 3, 4, 5] };

/** Seconds between metered steps; the floor keeps an account from looking automated. */
export const minActionIntervalBounds = { min: 30, max: 3600, default: 90 } as const;

export const SenderProfileCreateSchema = z
  .object({
    name: NameSchema,
    timezone: TimeZoneSchema.default('UTC'),
  })
  .meta({ id: 'SenderProfileCreate' });

export const SenderProfileSchema = z
  .object({
    id: UuidSchema,
    name: z.string(),
    timezone: z.string(),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
  })
  .meta({ id: 'SenderProfile' });
export type SenderProfile = z.infer<typeof SenderProfileSchema>;

export const SenderProfileListSchema = z.object({ sender_profiles: z.array(SenderProfileSchema) }).meta({ id: 'SenderProfileList' });

export const PnetSettingsSchema = z
  .object({
    timezone: z.string(),
    working_hours: WorkingHoursSchema,
    min_action_interval_seconds: z.int(),
    run_mode: RunModeSchema,
    resume_enabled: z.boolean(),
    attempts_enabled: z.boolean(),
    limits: LimitsSchema,
    limit_maximums: LimitsSchema,
  })
  .meta({ id: 'PnetSettings' });

export const PnetSettingsUpdateSchema = z
  .object({
    timezone: TimeZoneSchema.optional(),
    working_hours: WorkingHoursInputSchema.optional(),
    min_action_interval_seconds: z.int().min(minActionIntervalBounds.min).max(minActionIntervalBounds.max).optional(),
    run_mode: RunModeSchema.optional(),
    resume_enabled: z
      .boolean()
      .optional()
      .describe('A step cut off mid-run goes back in line as `resuming` (verify first) instead of failing with `claim_expired`'),
    attempts_enabled: z.boolean().optional().describe('Builds that report attempts report a run cut off without an error to the attempts endpoint'),
    limits: LimitsSchema.partial().strict().optional(),
  })
  .meta({ id: 'PnetSettingsUpdate' });
export type PnetSettingsUpdate = z.infer<typeof PnetSettingsUpdateSchema>;

// ---------------------------------------------------------------------------------------------
// The account wrapper (endpoint 8, 2.10)

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
      gaps: z.array(z.object({ started_at: TimestampSchema, ended_at: TimestampSchema.nullable(), problem: z.string() })),
    }),
  })
  .extend(limitShape)
  .extend({ limit_maximums: LimitsSchema })
  .meta({ id: 'PnetAccount' });
export type PnetAccount = z.infer<typeof PnetAccountSchema>;

export const PnetAccountWrapperSchema = z
  .object({
    account: PnetAccountSchema.optional().describe(
      'The account, connected or not: before a browser connects its status is `pending` (`disconnected` after a disconnect) and its wait `not_connected`',
    ),
    connected: z.boolean(),
    connection_token: z.string().describe('Paste into the extension; the same token connects a second browser'),
  })
  .meta({ id: 'PnetAccountWrapper' });

// ---------------------------------------------------------------------------------------------
// Browser action steps (2.2) and their statuses (3.1)

export const StepStatusSchema = z
  .enum(['queued', 'resuming', 'claimed', 'succeeded', 'failed', 'rejected', 'skipped'])
  .meta({ id: 'StepStatus' });
export type StepStatus = z.infer<typeof StepStatusSchema>;

/**
 * Where a step stands in the service, a superset of the spec's statuses: `awaiting_approval`
 * is a step on the Tasks page (not yet a queued step) and `cancelled` one a person withdrew;
 * both read through `recordStatus` below.
 */
export type StoredStepStatus = StepStatus | 'awaiting_approval' | 'cancelled';

export const StepErrorCodeSchema = z
  .enum([
    'selector_missing',
    'blocked_checkpoint',
    'not_authenticated',
    'account_mismatch',
    'navigation_failed',
    'timed_out',
    'linkedin_error',
    'agent_restarted',
    'tab_lost',
    'not_applicable',
    'not_connected',
    'invalid_params',
    'user_rejected',
    'cancelled',
    'missed_window',
    'sender_changed',
    'claim_expired',
    'interrupted_repeatedly',
  ])
  .meta({ id: 'StepErrorCode' });
export type StepErrorCode = z.infer<typeof StepErrorCodeSchema>;
/** Codes the backend writes itself when a step settles without the browser's result. */
export const backendErrorCodes: ReadonlySet<StepErrorCode> = new Set(['cancelled', 'missed_window', 'sender_changed', 'claim_expired', 'interrupted_repeatedly']);
/** Codes a browser reports for a step it could not do (the first twelve of the vocabulary). */
export const browserReportedErrorCodes = StepErrorCodeSchema.options.slice(0, 12);

const ProfileUrlSchema = z.url({ protocol: /^https?$/ }).max(2048);

/** Params per kind; only profile_view's are in the spec, the others are ours (documented). */
export const StepParamsSchema = z
  .discriminatedUnion('kind', [
    z.object({ kind: z.literal('profile_view'), profile_url: ProfileUrlSchema, read_relationship: z.boolean().default(false) }),
    z.object({ kind: z.literal('connection_request'), profile_url: ProfileUrlSchema, note: textSchema(0, 300).nullable().default(null) }),
    z.object({ kind: z.literal('send_message'), profile_url: ProfileUrlSchema, body: textSchema(1, 8000) }),
    z.object({ kind: z.literal('inmail'), profile_url: ProfileUrlSchema, subject: NameSchema.max(200), body: textSchema(1, 8000) }),
    z.object({ kind: z.literal('withdraw_connection_request'), profile_url: ProfileUrlSchema }),
    z.object({ kind: z.literal('follow_contact'), profile_url: ProfileUrlSchema }),
    z.object({ kind: z.literal('like_latest_post'), profile_url: ProfileUrlSchema }),
    z.object({ kind: z.literal('check_sent_invitations') }),
    z.object({ kind: z.literal('check_connections') }),
    z.object({ kind: z.literal('check_inbox') }),
    z.object({ kind: z.literal('read_conversation'), thread_url: ProfileUrlSchema }),
  ])
  .meta({ id: 'StepParams' });
export type StepParams = z.infer<typeof StepParamsSchema>;

export const StepQueueSchema = z
  .object({
    account_id: UuidSchema,
    params: StepParamsSchema,
    contact_key: NameSchema.nullable().default(null).describe('The contact the step is for, as the caller keys it'),
    sequence_id: UuidSchema.nullable().default(null).describe('The sequence that queued the step, if any'),
    run_before: TimestampSchema.nullable()
      .default(null)
      .describe('A step still waiting (or on the Tasks page) at this time fails with `missed_window`, its credits returned'),
    test: z.boolean().default(false).describe('A test fired by the operator: unmetered, goes first, skips the Tasks page'),
  })
  .meta({ id: 'StepQueue' });
export type StepQueue = z.infer<typeof StepQueueSchema>;

export const BrowserStepSchema = z
  .object({
    id: UuidSchema,
    account_id: UuidSchema,
    kind: ActionKindSchema,
    params: z.record(z.string(), z.unknown()),
    status: StepStatusSchema,
    contact_key: z.string().nullable(),
    sequence_id: UuidSchema.nullable(),
    queued_at: TimestampSchema.nullable(),
    claimed_at: TimestampSchema.nullable(),
    finished_at: TimestampSchema.nullable(),
    duration_ms: z.int().nullable(),
    error_code: StepErrorCodeSchema.nullable(),
    error_message: z.string().nullable(),
    outcome: z.record(z.string(), z.unknown()).nullable(),
    acted_at: TimestampSchema.nullable(),
    approved_at: TimestampSchema.nullable().describe('Equals the queue time. Kept for older builds.'),
    held: z.boolean(),
    hold: z.null().describe('Always null; read `held`. Kept for older builds.'),
    metered: z.boolean(),
    requires_approval: z.literal(false),
  })
  .meta({ id: 'BrowserStep' });
export type BrowserStep = z.infer<typeof BrowserStepSchema>;

/**
 * The spec status a stored step reads as: a cancelled step is a failed one with error_code
 * `cancelled`. A step awaiting approval is a task, not yet a step record.
 */
export function recordStatus(stored: Exclude<StoredStepStatus, 'awaiting_approval'>): StepStatus {
  return stored === 'cancelled' ? 'failed' : stored;
}

export const TaskSchema = z
  .object({
    id: UuidSchema,
    account_id: UuidSchema,
    kind: ActionKindSchema,
    params: z.record(z.string(), z.unknown()),
    contact_key: z.string().nullable(),
    created_at: TimestampSchema,
    held: z.boolean(),
  })
  .meta({ id: 'PnetTask', description: 'A step waiting on the Tasks page for a person to approve or reject it' });

export const TaskListSchema = z.object({ tasks: z.array(TaskSchema) }).meta({ id: 'PnetTaskList' });
export const StepListSchema = z.object({ steps: z.array(BrowserStepSchema), next_before: TimestampSchema.nullable() }).meta({ id: 'BrowserStepList' });

export const StepListQuerySchema = z.object({
  status: StepStatusSchema.optional(),
  kind: ActionKindSchema.optional(),
  account_id: UuidSchema.optional(),
  held: z.enum(['true', 'false']).transform((v) => v === 'true').optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  before: TimestampSchema.optional().describe('Steps created before this time (the previous page’s next_before)'),
});

export const TaskRejectSchema = z
  .object({ reason: textSchema(0, 200).nullable().default(null) })
  .meta({ id: 'PnetTaskReject' });

// ---------------------------------------------------------------------------------------------
// The extension protocol (2.4): heartbeat, set state, and the agent state every check-in answers

/** The selector and pacing config's version; a browser on any other version fetches it again. */
export const configVersion = 2;
/** How long a lease outlives its holder's last check-in. */
export const leaseSeconds = 45;

const LeaseNonceSchema = z.string().min(8).max(64);

export const AgentIdentitySchema = z
  .object({
    member_urn: NameSchema,
    vanity_name: NameSchema.nullable().default(null),
    display_name: NameSchema.nullable().default(null),
    headline: textSchema(0, 500).nullable().default(null),
    photo_url: z.url({ protocol: /^https?$/ }).max(2048).nullable().default(null),
  })
  .meta({ id: 'AgentIdentity', description: 'Who the browser is signed in as on the network' });

export const AgentHeartbeatSchema = z
  .object({
    browser_id: UuidSchema.describe('Generated once by the extension for its browser profile'),
    browser_label: NameSchema.max(100),
    extension_version: z.string().regex(/^[0-9A-Za-z.+-]{1,32}$/),
    identity: AgentIdentitySchema.nullable().default(null),
    lease_nonce: LeaseNonceSchema.nullable().default(null),
    running: z
      .object({ action_id: UuidSchema, claimed_at: TimestampSchema })
      .nullable()
      .default(null)
      .describe('The step this browser is running, naming its claim'),
  })
  .meta({ id: 'AgentHeartbeat' });
export type AgentHeartbeat = z.infer<typeof AgentHeartbeatSchema>;

export const AgentSetStateSchema = z
  .object({
    browser_id: UuidSchema,
    lease_nonce: LeaseNonceSchema.nullable().default(null),
    run_mode: RunModeSchema.optional(),
  })
  .meta({ id: 'AgentSetState' });

export const AgentStateSchema = z
  .object({
    run_mode: RunModeSchema,
    checkpoint: z.boolean(),
    lease_granted: z.boolean(),
    lease_holder_label: z.string().nullable(),
    account_mismatch: z.boolean(),
    queued_count: z.int(),
    approvals_waiting: z.int(),
    poll_after_seconds: z.int(),
    config_version: z.int(),
    attempts_enabled: z.boolean(),
    resume_enabled: z.boolean(),
    running_claim: z.enum(['renewed', 'lost']).nullable(),
    unpaced_waiting: z.boolean(),
    usage: z.array(UsageSchema),
    usage_resets_at: TimestampSchema.nullable(),
    wait: WaitSchema.nullable(),
  })
  .meta({ id: 'AgentState' });
export type AgentState = z.infer<typeof AgentStateSchema>;

// Claims and results

export { claimLeaseSeconds } from './timing.js';

export const AgentClaimSchema = z
  .object({
    browser_id: UuidSchema,
    verify_first: z.boolean().default(false).describe('This build checks before acting (resume:v1): it may take a resuming step'),
    unmetered_only: z.boolean().default(false).describe('Ask only for an unpaced test step'),
  })
  .meta({ id: 'AgentClaim' });

/**
 * How a browser takes a `resuming` step: the earlier run may have acted. `verify_only` when it was
 * granted the commit (it likely pressed): look, report success if done, else release it
 * `verified_absent`; `verify_then_act` when it never got that far: look first, finish if not done.
 */
export const AgentVerificationSchema = z
  .object({
    mode: z.enum(['verify_then_act', 'verify_only']),
    commit_granted_at: TimestampSchema.nullable().describe('When the earlier run was let past the point of no return'),
  })
  .meta({ id: 'AgentVerification' });
export type AgentVerification = z.infer<typeof AgentVerificationSchema>;

export const AgentClaimResponseSchema = z
  .object({
    step: BrowserStepSchema.nullable(),
    verification: AgentVerificationSchema.nullable().describe('Set when the step handed out is `resuming`: check before acting'),
    reason: WaitReasonSchema.nullable().describe('Why nothing was handed out'),
    wait: WaitSchema.nullable(),
  })
  .meta({ id: 'AgentClaimResponse' });

export const ResultStatusSchema = z.enum(['succeeded', 'failed', 'skipped']);

export const OutcomeSchema = z
  .object({
    kind: ActionKindSchema.optional(),
    already_connected: z.boolean().optional(),
    already_following: z.boolean().optional(),
    can_send_message: z.boolean().optional(),
    invitation_pending: z.boolean().optional(),
    member_urn: NameSchema.optional(),
    member_urns: z.array(NameSchema).max(1000).optional(),
    open_profile: z.boolean().nullable().optional(),
    page_loaded: z.boolean().optional(),
    profile_resolved: z.boolean().optional(),
    vanity: NameSchema.optional(),
    // check_inbox and read_conversation: what the inbox records (domain/inbox.ts).
    ...pnetInboxOutcomeFields,
  })
  .meta({ id: 'StepOutcome' });

/** 2.3: the result report body of endpoint 2. */
export const ResultReportSchema = z
  .object({
    status: ResultStatusSchema,
    claimed_at: TimestampSchema.nullable().default(null),
    diagnostic: z.unknown().optional().describe('Page-report summary; never changes how the step settles, dropped when unreadable'),
    duration_ms: z.int().min(0).nullable().default(null),
    error_code: StepErrorCodeSchema.refine((code) => !backendErrorCodes.has(code), {
      message: `is written by the service itself when a step settles without the browser (${[...backendErrorCodes].join(', ')}); a browser reports one of the others`,
    })
      .nullable()
      .default(null)
      .describe(`A browser reports any code of the vocabulary but the service's own: ${[...backendErrorCodes].join(', ')}`),
    error_message: textSchema(0, 2000).nullable().default(null),
    outcome: OutcomeSchema.nullable().default(null),
  })
  .meta({ id: 'ResultReport' });
export type ResultReport = z.infer<typeof ResultReportSchema>;

export const DiagnosticSchema = z.object({
  checkpoint: z.string().max(200).optional(),
  before_commit: z.boolean().default(false),
  config_version: z.int().optional(),
});

// The agent sending switch (2.4)

export const AgentSendingSchema = z
  .object({
    paused: z.boolean().describe("This workspace paused the agent's own sends; replies it writes still wait in Needs approval"),
    paused_everywhere: z.boolean().describe('The operator paused unattended sending for all workspaces'),
    changed_by: z.string().nullable().describe('Identity-provider user id of who last changed it'),
    changed_at: TimestampSchema.nullable(),
  })
  .meta({ id: 'AgentSendingRead' });
export type AgentSending = z.infer<typeof AgentSendingSchema>;

export const AgentSendingUpdateSchema = z
  .object({
    paused: z.boolean().describe('Unpausing is for admins only'),
    reason: textSchema(0, 500).nullable().default(null),
  })
  .meta({ id: 'AgentSendingUpdate' });

export const AgentSendingHistorySchema = z
  .object({
    changes: z.array(
      z.object({ paused: z.boolean(), reason: z.string().nullable(), changed_by: z.string().nullable(), changed_at: TimestampSchema }),
    ),
  })
  .meta({ id: 'AgentSendingHistory' });

/** 2.4 Release: the browser gives its claim back; it never counts against the step. */
export const AgentReleaseSchema = z
  .object({
    claimed_at: TimestampSchema,
    reason: z.enum(['verified_absent', 'reopen_paused']),
  })
  .meta({ id: 'AgentRelease' });

// Agent tool availability (2.4)

export const AgentToolKeySchema = z.enum(['find_work_email', 'read_pnet_profile']).meta({ id: 'AgentToolKey' });
export type AgentToolKey = z.infer<typeof AgentToolKeySchema>;

export const AgentToolSchema = z
  .object({
    key: AgentToolKeySchema,
    available: z.boolean().describe('Whether something in this environment supplies the tool; switching on is refused when false'),
    enabled: z.boolean(),
    unavailable_reason: z.string().nullable(),
  })
  .meta({ id: 'AgentTool' });
export type AgentTool = z.infer<typeof AgentToolSchema>;

export const AgentToolListSchema = z.object({ tools: z.array(AgentToolSchema) }).meta({ id: 'AgentToolList' });
export const AgentToolUpdateSchema = z.object({ enabled: z.boolean() }).meta({ id: 'AgentToolUpdate' });

// ---------------------------------------------------------------------------------------------
// The rest of the extension protocol: commit, attempts, running waits, config

export const AgentCommitSchema = z
  .object({ claimed_at: TimestampSchema.describe('The claim the browser is running') })
  .meta({ id: 'AgentCommit', description: 'Ask leave to press the irreversible button of a step' });

export const AgentCommitGrantSchema = z
  .object({ commit_granted_at: TimestampSchema })
  .meta({ id: 'AgentCommitGrant' });

export const AttemptReasonSchema = z
  .enum(['cut_off', 'verified_absent', 'reopen_paused'])
  .meta({ id: 'AttemptReason', description: '`cut_off`: the run stopped without an error (tab closed, browser restarted)' });

export const AgentAttemptSchema = z
  .object({
    claimed_at: TimestampSchema,
    reason: AttemptReasonSchema,
    detail: textSchema(0, 500).nullable().default(null),
  })
  .meta({ id: 'AgentAttempt' });

export const StepAttemptSchema = z
  .object({ claimed_at: TimestampSchema, reason: AttemptReasonSchema, detail: z.string().nullable(), created_at: TimestampSchema })
  .meta({ id: 'StepAttempt' });
export const StepAttemptListSchema = z.object({ attempts: z.array(StepAttemptSchema) }).meta({ id: 'StepAttemptList' });

/** 2.4 Running wait: the running step waits inside the page (the nested waits, outermost first). */
export const AgentRunningWaitSchema = z
  .object({
    claimed_at: TimestampSchema.nullable().default(null).describe('The claim the browser is running; when given it must be current'),
    site: textSchema(0, 200),
    awake_seconds: z.int().min(0),
    tab_discarded: z.boolean().nullable().default(null),
    tab_frozen: z.boolean().nullable().default(null),
    tab_status: z.string().max(16).nullable().default(null),
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
      max_poll_after_seconds: z.int().describe('The longest a check-in answer asks a browser to wait (poll_after_seconds never exceeds it)'),
      typing_ms_per_char: z.object({ min: z.int(), max: z.int() }),
      page_settle_ms: z.object({ min: z.int(), max: z.int() }),
    }),
  })
  .meta({ id: 'AgentConfig' });
export type AgentConfig = z.infer<typeof AgentConfigSchema>;

// ---------------------------------------------------------------------------------------------
// Holds: a paused contact or sequence keeps its steps out of every browser's line

const holdReason = textSchema(0, 500).nullable().default(null);
export const StepHoldCreateSchema = z
  .union([
    z.strictObject({ contact_key: NameSchema, reason: holdReason }),
    z.strictObject({ sequence_id: UuidSchema, reason: holdReason }),
  ])
  .meta({ id: 'PnetStepHoldCreate', description: 'Pause one contact (`contact_key`) or one sequence (`sequence_id`)' });
export type StepHoldCreate = z.infer<typeof StepHoldCreateSchema>;

export const StepHoldSchema = z
  .object({
    id: UuidSchema,
    contact_key: z.string().nullable(),
    sequence_id: UuidSchema.nullable(),
    reason: z.string().nullable(),
    created_at: TimestampSchema,
    held_steps: z.int().describe('Steps of this contact or sequence held now'),
  })
  .meta({ id: 'PnetStepHold' });
export const StepHoldListSchema = z.object({ holds: z.array(StepHoldSchema) }).meta({ id: 'PnetStepHoldList' });
export const StepHoldReleaseSchema = z
  .object({ resumed_steps: z.int().describe('Steps back in line (or on the Tasks page); others may stay held by another hold') })
  .meta({ id: 'PnetStepHoldRelease' });
