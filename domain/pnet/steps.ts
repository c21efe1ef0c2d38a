/** Browser action steps (interface spec 2.2 Browser action step) and their statuses (interface spec 3.1 Browser action step status). */
import { z } from 'zod';
import { NameSchema, queryInteger, textSchema, TimestampSchema, UuidSchema } from '../shared/common.js';
import { ActionKindSchema } from './limits.js';

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
export const backendErrorCodeList = [
  'cancelled',
  'missed_window',
  'sender_changed',
  'claim_expired',
  'interrupted_repeatedly',
] as const satisfies readonly StepErrorCode[];
export const backendErrorCodes: ReadonlySet<StepErrorCode> = new Set(backendErrorCodeList);
/** What a result report may carry: the vocabulary less the backend's own, so the document lists exactly that. */
export const BrowserErrorCodeSchema = StepErrorCodeSchema.exclude(backendErrorCodeList, {
  error: `must be a code of the vocabulary a browser reports; ${backendErrorCodeList.join(', ')} are written by the service itself when a step settles without the browser`,
});
export type BrowserErrorCode = z.infer<typeof BrowserErrorCodeSchema>;
/** Codes a browser reports for a step it could not do (the first twelve of the vocabulary). */
export const browserReportedErrorCodes = BrowserErrorCodeSchema.options.slice(0, 12);

const ProfileUrlSchema = z.url({ protocol: /^https?$/ }).max(2048);

/** Params per kind; only profile_view's are in the spec, the others are ours (documented). */
export const StepParamsSchema = z
  .discriminatedUnion('kind', [
    z.object({
      kind: z.literal('profile_view'),
      profile_url: ProfileUrlSchema,
      read_relationship: z.boolean().default(false),
    }),
    z.object({
      kind: z.literal('connection_request'),
      profile_url: ProfileUrlSchema,
      note: textSchema(0, 300).nullable().default(null),
    }),
    z.object({ kind: z.literal('send_message'), profile_url: ProfileUrlSchema, body: textSchema(1, 8000) }),
    z.object({
      kind: z.literal('inmail'),
      profile_url: ProfileUrlSchema,
      subject: NameSchema.max(200),
      body: textSchema(1, 8000),
    }),
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
      .describe(
        'A step still waiting (or on the Tasks page) at this time fails with `missed_window`, its credits returned',
      ),
    test: z
      .boolean()
      .default(false)
      .describe('A test fired by the operator: unmetered, goes first, skips the Tasks page'),
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
export const StepListSchema = z
  .object({ steps: z.array(BrowserStepSchema), next_before: TimestampSchema.nullable() })
  .meta({ id: 'BrowserStepList' });

export const StepListQuerySchema = z.object({
  status: StepStatusSchema.optional(),
  kind: ActionKindSchema.optional(),
  account_id: UuidSchema.optional(),
  held: z
    .enum(['true', 'false'])
    .transform((v) => v === 'true')
    .optional(),
  limit: queryInteger(z.int().min(1).max(200).default(50)),
  before: TimestampSchema.optional().describe('Steps created before this time (the previous page’s next_before)'),
});

export const TaskRejectSchema = z
  .object({ reason: textSchema(0, 200).nullable().default(null) })
  .meta({ id: 'PnetTaskReject' });
