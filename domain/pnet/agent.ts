/** The extension protocol (interface spec 2.4 Browser agent records): heartbeat, set state, claims, results, the sending switch and tool availability. */
import { z } from 'zod';
import { NameSchema, TimestampSchema, UuidSchema, lineSchema, textSchema } from '../shared/common.js';
import { pnetInboxOutcomeFields } from '../inbox/inbox.js';
import { UsageSchema, WaitSchema, WaitReasonSchema } from './accounts.js';
import { ActionKindSchema } from './limits.js';
import { RunModeSchema } from './sender-profiles.js';
import { BrowserErrorCodeSchema, BrowserStepSchema, backendErrorCodes } from './steps.js';
import type { BrowserStep } from './steps.js';

/** The selector and pacing config's version; a browser on any other version fetches it again. */
export const configVersion = 2;
/** How long a lease outlives its holder's last check-in. */
export const leaseSeconds = 45;

const LeaseNonceSchema = lineSchema(8, 64);

export const AgentIdentitySchema = z
  .object({
    member_urn: NameSchema,
    vanity_name: NameSchema.nullable().default(null),
    display_name: NameSchema.nullable().default(null),
    headline: textSchema(0, 500).nullable().default(null),
    photo_url: z
      .url({ protocol: /^https?$/ })
      .max(2048)
      .nullable()
      .default(null),
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
    queued_count: z
      .int()
      .describe(
        'Steps waiting for a browser, not one running. Counted here too: a claim whose lease ended more than 5 s ago unrenewed (its browser went silent; the next claim lapses it first), and, for the browser it was handed to, a claim it does not name (the answer was lost; the next claim hands it back).',
      ),
    approvals_waiting: z.int(),
    poll_after_seconds: z
      .int()
      .describe(
        "Time before the next check-in: the account's gap at most, at most 15 while work is about to run, and no later than a running claim would become overdue.",
      ),
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

export const AgentClaimSchema = z
  .object({
    browser_id: UuidSchema,
    verify_first: z
      .boolean()
      .default(false)
      .describe('This build checks before acting (resume:v1): it may take a resuming step'),
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
    verification: AgentVerificationSchema.nullable().describe(
      'Set when the step handed out is `resuming`: check before acting',
    ),
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

/** The result report body (operationId reportStepResult; interface spec: Result report). */
export const ResultReportSchema = z
  .object({
    status: ResultStatusSchema,
    claimed_at: TimestampSchema.nullable().default(null),
    diagnostic: z
      .unknown()
      .optional()
      .describe('Page-report summary; never changes how the step settles, dropped when unreadable'),
    duration_ms: z.int().min(0).nullable().default(null),
    error_code: BrowserErrorCodeSchema.nullable()
      .default(null)
      .describe(
        `A browser reports any code of the vocabulary but the service's own: ${[...backendErrorCodes].join(', ')}`,
      ),
    error_message: textSchema(0, 2000).nullable().default(null),
    outcome: OutcomeSchema.nullable().default(null),
  })
  .meta({ id: 'ResultReport' });
export type ResultReport = z.infer<typeof ResultReportSchema>;

/**
 * A result as the step's workflow hands it to the settle transition (the `reportResult` Update):
 * the report without its diagnostic, the outcome as the JSON it is stored as.
 */
export type SettleReport = Pick<
  ResultReport,
  'status' | 'claimed_at' | 'duration_ms' | 'error_code' | 'error_message'
> & {
  outcome: Record<string, unknown> | null;
};

/** The record after a step transition (what its Update answers); a claim of a `resuming` step says how to verify it. */
export type StepTransitionResult = { step: BrowserStep; verification?: AgentVerification | null; checkpoint?: boolean };

export const DiagnosticSchema = z.object({
  checkpoint: z.string().max(200).optional(),
  before_commit: z.boolean().default(false),
  config_version: z.int().optional(),
});

// The agent sending switch (interface spec 2.4 Browser agent records)

export const AgentSendingSchema = z
  .object({
    paused: z
      .boolean()
      .describe("This workspace paused the agent's own sends; replies it writes still wait in Needs approval"),
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
      z.object({
        paused: z.boolean(),
        reason: z.string().nullable(),
        changed_by: z.string().nullable(),
        changed_at: TimestampSchema,
      }),
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

// Agent tool availability (interface spec 2.4 Browser agent records)

export const AgentToolKeySchema = z.enum(['find_work_email', 'read_pnet_profile']).meta({ id: 'AgentToolKey' });
export type AgentToolKey = z.infer<typeof AgentToolKeySchema>;

export const AgentToolSchema = z
  .object({
    key: AgentToolKeySchema,
    available: z
      .boolean()
      .describe('Whether something in this environment supplies the tool; switching on is refused when false'),
    enabled: z.boolean(),
    unavailable_reason: z.string().nullable(),
  })
  .meta({ id: 'AgentTool' });
export type AgentTool = z.infer<typeof AgentToolSchema>;

export const AgentToolListSchema = z.object({ tools: z.array(AgentToolSchema) }).meta({ id: 'AgentToolList' });
export const AgentToolUpdateSchema = z.object({ enabled: z.boolean() }).meta({ id: 'AgentToolUpdate' });
