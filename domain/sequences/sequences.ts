/**
 * Sequences: the versioned step graph, its audience and senders, contacts and their progression,
 * the approval queue, and the contract of the per-contact workflow (signals, query, ids). Pure:
 * imported by the API, the activities and the workflow alike.
 */
import { z } from 'zod';
import { textOf } from '../shared/text.js';
import {
  EmailAddressSchema,
  NameSchema,
  queryInteger,
  textSchema,
  TimestampSchema,
  UuidSchema,
} from '../shared/common.js';
import { SegmentsSchema } from '../inbox/email-templates.js';
import { addDays, localDate, localParts, zonedInstant } from '../shared/zoned-time.js';

export const graphStepsMax = 100;
export const sendersMax = 20;
export const enrolRowsMax = 1000;
export const contactPageMax = 500;
export const approvalsPageMax = 200;
export const waitDaysMax = 365;
export const subjectMax = 998;
export const bodyMax = 50_000;
/** Revisions and versions are Postgres integers. */
export const int32Max = 2_147_483_647;

// ---------------------------------------------------------------------------------------------
// The graph

export const StepIdSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[a-z][a-z0-9_]*$/, 'lower-case letters, digits and underscores, starting with a letter')
  .describe(
    "Stable within the sequence across versions: a migrated contact is matched to its step by this id. It is also the outbound agent's slot key of the step",
  );

/** The pnet actions a sequence can take (the housekeeping kinds belong to the account, not to outreach). */
export const sequencePnetActions = [
  'profile_view',
  'connection_request',
  'send_message',
  'inmail',
  'follow_contact',
  'like_latest_post',
  'withdraw_connection_request',
] as const;
export const SequencePnetActionSchema = z.enum(sequencePnetActions).meta({ id: 'SequencePnetAction' });
export type SequencePnetAction = z.infer<typeof SequencePnetActionSchema>;
/** Actions that carry a message (a connection request's message is its note). */
export const messageActions: readonly SequencePnetAction[] = ['connection_request', 'send_message', 'inmail'];

export const WriterSchema = z.enum(['template', 'agent']).meta({
  id: 'SequenceWriter',
  description:
    "`template`: a saved template or the step's own segments; `agent`: the sequence's outbound agent writes it per contact",
});

const content = {
  writer: WriterSchema.default('template'),
  template_id: UuidSchema.nullable()
    .default(null)
    .describe("A saved email template; when null the step's own segments are used"),
  subject_segments: SegmentsSchema.default([]),
  body_segments: SegmentsSchema.default([]),
};

export const EmailStepSchema = z
  .strictObject({ id: StepIdSchema, type: z.literal('email'), ...content, next: StepIdSchema })
  .meta({ id: 'SequenceEmailStep' });
export const PnetStepSchema = z
  .strictObject({
    id: StepIdSchema,
    type: z.literal('pnet'),
    action: SequencePnetActionSchema,
    ...content,
    next: StepIdSchema,
  })
  .meta({
    id: 'SequencePnetStep',
    description: "A browser step on the sender's pnet account; message actions take content like an email (no subject)",
  });
export const WaitStepSchema = z
  .strictObject({
    id: StepIdSchema,
    type: z.literal('wait'),
    days: z
      .int()
      .min(0)
      .max(waitDaysMax)
      .default(0)
      .describe("Calendar days in the sender's time zone (a daylight-saving change keeps the wall-clock time)"),
    hours: z.int().min(0).max(23).default(0),
    minutes: z.int().min(0).max(59).default(0),
    business_hours: z
      .boolean()
      .default(true)
      .describe(
        "Move the end of the wait to the next business hour (Monday to Friday, 09:00 to 17:00, sender's time zone)",
      ),
    next: StepIdSchema,
  })
  .meta({ id: 'SequenceWaitStep' });
export const branchConditions = ['connected', 'replied', 'email_found', 'opened'] as const;
export const BranchConditionSchema = z.enum(branchConditions).meta({ id: 'SequenceBranchCondition' });
export type BranchCondition = z.infer<typeof BranchConditionSchema>;
export const BranchStepSchema = z
  .strictObject({
    id: StepIdSchema,
    type: z.literal('branch'),
    condition: BranchConditionSchema,
    if_true: StepIdSchema,
    if_false: StepIdSchema,
  })
  .meta({
    id: 'SequenceBranchStep',
    description:
      '`connected`: the sender and contact are connected on pnet; `replied`: an auto-reply was recorded (a real reply stops the contact before any branch); ' +
      '`email_found`: the contact has an email (the live row is read again); `opened`: an email of this contact was opened.',
  });
export const EndStepSchema = z
  .strictObject({ id: StepIdSchema, type: z.literal('end') })
  .meta({ id: 'SequenceEndStep' });

export const SequenceStepSchema = z.discriminatedUnion('type', [
  EmailStepSchema,
  PnetStepSchema,
  WaitStepSchema,
  BranchStepSchema,
  EndStepSchema,
]);
export type SequenceStep = z.infer<typeof SequenceStepSchema>;

export const SequenceGraphSchema = z
  .strictObject({ start: StepIdSchema, steps: z.array(SequenceStepSchema).min(1).max(graphStepsMax) })
  .meta({ id: 'SequenceGraph' });
export type SequenceGraph = z.infer<typeof SequenceGraphSchema>;

export const defaultGraph: SequenceGraph = { start: 'end', steps: [{ id: 'end', type: 'end' }] };

export interface GraphIssue {
  loc: string[];
  msg: string;
  type: string;
  input: unknown;
}

export function successors(step: SequenceStep): string[] {
  switch (step.type) {
    case 'branch':
      return [step.if_true, step.if_false];
    case 'end':
      return [];
    default:
      return [step.next];
  }
}

/** Graph rules a schema cannot say: unique ids, targets that exist, every step reachable, no loop without a wait. */
export function validateGraph(graph: SequenceGraph): GraphIssue[] {
  const issues: GraphIssue[] = [];
  const byId = new Map<string, SequenceStep>();
  graph.steps.forEach((s, i) => {
    if (byId.has(s.id))
      issues.push({
        loc: ['body', `graph.steps.${i}.id`],
        msg: `Step id "${s.id}" is used twice`,
        type: 'duplicate_step',
        input: s.id,
      });
    byId.set(s.id, s);
  });
  if (!byId.has(graph.start))
    issues.push({
      loc: ['body', 'graph.start'],
      msg: `Start step "${graph.start}" does not exist`,
      type: 'unknown_step',
      input: graph.start,
    });
  graph.steps.forEach((s, i) => {
    for (const target of successors(s)) {
      if (!byId.has(target))
        issues.push({
          loc: ['body', `graph.steps.${i}`],
          msg: `Step "${s.id}" goes to "${target}", which does not exist`,
          type: 'unknown_step',
          input: target,
        });
    }
  });
  if (issues.length > 0) return issues;
  const reached = new Set<string>();
  const stack = [graph.start];
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (reached.has(id)) continue;
    reached.add(id);
    stack.push(...successors(byId.get(id)!));
  }
  graph.steps.forEach((s, i) => {
    if (!reached.has(s.id))
      issues.push({
        loc: ['body', `graph.steps.${i}`],
        msg: `Step "${s.id}" cannot be reached from the start`,
        type: 'unreachable_step',
        input: s.id,
      });
  });
  // A loop is allowed only through a wait of some length, so a contact can never spin.
  const passable = (s: SequenceStep) => !(s.type === 'wait' && s.days + s.hours + s.minutes > 0);
  const state = new Map<string, 'open' | 'done'>();
  const loops = new Set<string>();
  const visit = (id: string) => {
    state.set(id, 'open');
    const step = byId.get(id)!;
    if (passable(step)) {
      for (const next of successors(step)) {
        const seen = state.get(next);
        if (seen === 'open') loops.add(next);
        else if (!seen) visit(next);
      }
    }
    state.set(id, 'done');
  };
  for (const s of graph.steps) if (!state.has(s.id)) visit(s.id);
  for (const id of loops)
    issues.push({
      loc: ['body', 'graph.steps'],
      msg: `Steps loop back to "${id}" without a wait`,
      type: 'loop_without_wait',
      input: id,
    });
  return issues;
}

export const stepById = (graph: SequenceGraph, id: string) => graph.steps.find((s) => s.id === id);

// ---------------------------------------------------------------------------------------------
// Waits in the sender's business hours

export const businessHours = { startHour: 9, endHour: 17 } as const;

/** The first business moment (Mon-Fri, 09:00-17:00 local) at or after an instant. */
export function nextBusinessMoment(instant: Date, timeZone: string): Date {
  let day = localDate(instant, timeZone);
  for (let i = 0; i < 8; i++) {
    const open = zonedInstant(day, businessHours.startHour, 0, timeZone);
    const close = zonedInstant(day, businessHours.endHour, 0, timeZone);
    const weekday = localParts(open, timeZone).isoWeekday;
    if (weekday <= 5) {
      if (instant < open) return open;
      if (instant < close) return instant;
    }
    day = addDays(day, 1);
    if (instant < zonedInstant(day, 0, 0, timeZone)) instant = zonedInstant(day, 0, 0, timeZone);
  }
  return instant;
}

/** When a wait started at `now` ends: local calendar days (DST keeps the wall time), then hours and minutes, then business hours. */
export function waitUntil(
  now: Date,
  wait: { days: number; hours: number; minutes: number; business_hours: boolean },
  timeZone: string,
): Date {
  const p = localParts(now, timeZone);
  const shifted = wait.days > 0 ? zonedInstant(addDays(p, wait.days), p.hour, p.minute, timeZone) : now;
  const base = new Date(shifted.getTime() + (wait.days > 0 ? p.second * 1000 : 0));
  const end = new Date(base.getTime() + (wait.hours * 60 + wait.minutes) * 60_000);
  return wait.business_hours ? nextBusinessMoment(end, timeZone) : end;
}

// ---------------------------------------------------------------------------------------------
// Sequences

export const ChannelModeSchema = z.enum(['manual', 'automatic']).meta({
  id: 'SequenceChannelMode',
  description:
    'manual: every outbound message of the channel (emails; pnet messages, InMails and connection notes) waits in the approval queue; automatic: it goes out on schedule. ' +
    "A pnet step a person did not approve here still follows its sender account's own run mode (the Tasks page).",
});
export const SequenceStatusSchema = z.enum(['draft', 'active', 'paused', 'archived']).meta({
  id: 'SequenceStatus',
  description: 'draft: contacts may be enrolled, nothing is sent until launch; paused: every step is held',
});

export const AudienceMappingSchema = z
  .strictObject({
    email_column_id: UuidSchema.nullable().default(null),
    profile_url_column_id: UuidSchema.nullable().default(null),
    first_name_column_id: UuidSchema.nullable().default(null),
    last_name_column_id: UuidSchema.nullable().default(null),
    company_name_column_id: UuidSchema.nullable().default(null),
  })
  .meta({ id: 'SequenceAudienceMapping', description: 'Which audience-table columns hold each contact field' });
export type AudienceMapping = z.infer<typeof AudienceMappingSchema>;

const cell = (cells: Record<string, unknown>, columnId: string | null) => {
  if (!columnId) return null;
  const v = cells[columnId];
  if (v === null || v === undefined) return null;
  const s = textOf(v).trim();
  return s === '' ? null : s;
};

/** A contact's fields read from its audience row through the sequence's mappings. */
export function contactFieldsOf(cells: Record<string, unknown>, mapping: AudienceMapping) {
  return {
    email: cell(cells, mapping.email_column_id),
    profile_url: cell(cells, mapping.profile_url_column_id),
    first_name: cell(cells, mapping.first_name_column_id),
    last_name: cell(cells, mapping.last_name_column_id),
    company_name: cell(cells, mapping.company_name_column_id),
  };
}

export const SequenceSenderSchema = z
  .strictObject({
    sender_profile_id: UuidSchema,
    from_email: EmailAddressSchema.nullable()
      .default(null)
      .describe('The mailbox email steps go out from; email steps of a sender without one wait for a person'),
    from_name: NameSchema.nullable()
      .default(null)
      .describe("The display name on emails; the sender profile's name when null"),
  })
  .meta({ id: 'SequenceSender' });
export type SequenceSender = z.infer<typeof SequenceSenderSchema>;

export const SequenceCreateSchema = z
  .strictObject({
    name: NameSchema,
    audience_table_id: UuidSchema.nullable().default(null),
    audience_mapping: AudienceMappingSchema.default(AudienceMappingSchema.parse({})),
    feed_new_rows: z
      .boolean()
      .default(false)
      .describe('Enrol rows added to the audience table from now on, as they arrive'),
    email_mode: ChannelModeSchema.default('manual'),
    pnet_mode: ChannelModeSchema.default('manual'),
    senders: z.array(SequenceSenderSchema).max(sendersMax).default([]),
    graph: SequenceGraphSchema.default(defaultGraph),
  })
  .meta({ id: 'SequenceCreate' });
export type SequenceCreate = z.infer<typeof SequenceCreateSchema>;

export const SequenceUpdateSchema = z
  .strictObject({
    expected_revision: z
      .int()
      .min(1)
      .max(int32Max)
      .describe('The revision read; a stale one is 409 and nothing changes'),
    name: NameSchema.optional(),
    audience_table_id: UuidSchema.nullable().optional(),
    audience_mapping: AudienceMappingSchema.optional(),
    feed_new_rows: z.boolean().optional(),
    email_mode: ChannelModeSchema.optional(),
    pnet_mode: ChannelModeSchema.optional(),
    senders: z.array(SequenceSenderSchema).max(sendersMax).optional(),
    graph: SequenceGraphSchema.optional().describe(
      'A new graph. Once a contact is enrolled this makes a new version; contacts in flight stay on theirs',
    ),
  })
  .meta({ id: 'SequenceUpdate', description: 'Fields left out keep their value' });
export type SequenceUpdate = z.infer<typeof SequenceUpdateSchema>;

export const ContactCountsSchema = z
  .object({ active: z.int(), paused: z.int(), failed: z.int(), stopped: z.int(), completed: z.int() })
  .meta({ id: 'SequenceContactCounts' });

export const SequenceSchema = z
  .object({
    id: UuidSchema,
    name: z.string(),
    status: SequenceStatusSchema,
    audience_table_id: UuidSchema.nullable(),
    audience_mapping: AudienceMappingSchema,
    feed_new_rows: z.boolean(),
    email_mode: ChannelModeSchema,
    pnet_mode: ChannelModeSchema,
    senders: z.array(SequenceSenderSchema),
    version: z.int().describe('The newest version; new contacts start on it'),
    graph: SequenceGraphSchema.describe('The graph of the newest version'),
    revision: z.int(),
    contact_counts: ContactCountsSchema,
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
  })
  .meta({ id: 'Sequence' });
export type Sequence = z.infer<typeof SequenceSchema>;

export const SequenceListSchema = z
  .object({ sequences: z.array(SequenceSchema).describe('Newest first') })
  .meta({ id: 'SequenceList' });

export const SequenceVersionSchema = z
  .object({
    version: z.int(),
    graph: SequenceGraphSchema,
    created_at: TimestampSchema,
    contacts: z.int().describe('Contacts on this version now'),
  })
  .meta({ id: 'SequenceVersion' });
export const SequenceVersionListSchema = z
  .object({ versions: z.array(SequenceVersionSchema).describe('Oldest first') })
  .meta({ id: 'SequenceVersionList' });

export const RevisionBodySchema = z
  .strictObject({ expected_revision: z.int().min(1).max(int32Max) })
  .meta({ id: 'SequenceRevisionBody' });

export const SequenceSettingsSchema = z
  .object({
    recontact_cooldown_days: z
      .int()
      .min(0)
      .max(365)
      .describe('No person is reached by two different sequences inside this many days'),
  })
  .meta({ id: 'SequenceSettings' });
export const SequenceSettingsUpdateSchema = z
  .strictObject({ recontact_cooldown_days: z.int().min(0).max(365) })
  .meta({ id: 'SequenceSettingsUpdate' });

// ---------------------------------------------------------------------------------------------
// Contacts

export const ContactStatusSchema = z.enum(['active', 'paused', 'failed', 'stopped', 'completed']).meta({
  id: 'SequenceContactStatus',
  description: 'failed: a step failed and the contact waits at it until a person retries',
});
export type ContactStatus = z.infer<typeof ContactStatusSchema>;

export const ContactWaitSchema = z
  .object({
    reason: z.string().describe('timer, approval, pnet_step, paused, sequence_paused, sequence_draft, failed_step'),
    until: TimestampSchema.nullable(),
  })
  .meta({ id: 'SequenceContactWait' });
export type ContactWait = z.infer<typeof ContactWaitSchema>;

export const SequenceContactSchema = z
  .object({
    id: UuidSchema,
    sequence_id: UuidSchema,
    row_id: UuidSchema,
    contact_key: z
      .string()
      .describe("`<sequence_id>:<row_id>`: the key of this contact's browser steps, holds and agent conversation"),
    email: z.string().nullable(),
    profile_url: z.string().nullable(),
    first_name: z.string().nullable(),
    last_name: z.string().nullable(),
    company_name: z.string().nullable(),
    sender_profile_id: UuidSchema.nullable(),
    status: ContactStatusSchema,
    version: z.int(),
    current_step_id: z.string().nullable(),
    done_steps: z.array(z.string()).describe('Action steps already performed; never performed again'),
    wait: ContactWaitSchema.nullable(),
    stop_reason: z
      .string()
      .nullable()
      .describe('do_not_contact, replied, bounced, stopped, recontact_cooldown, active_elsewhere'),
    error: z.string().nullable(),
    enrolled_at: TimestampSchema,
    finished_at: TimestampSchema.nullable(),
    updated_at: TimestampSchema,
  })
  .meta({ id: 'SequenceContact' });
export type SequenceContact = z.infer<typeof SequenceContactSchema>;

export const SequenceContactListSchema = z
  .object({
    contacts: z.array(SequenceContactSchema).describe('In enrolment order'),
    next_after: UuidSchema.nullable(),
  })
  .meta({ id: 'SequenceContactList' });
export const ContactListQuerySchema = z.object({
  status: ContactStatusSchema.optional(),
  limit: queryInteger(z.int().min(1).max(contactPageMax).default(100)),
  after: UuidSchema.optional().describe('The `next_after` of the previous page'),
});

export const EnrolRequestSchema = z
  .strictObject({
    row_ids: z
      .array(UuidSchema)
      .min(1)
      .max(enrolRowsMax)
      .describe('Rows of the audience table; each answered on its own'),
    sender_profile_id: UuidSchema.nullable()
      .default(null)
      .describe("One of the sequence's senders for all of them; spread across senders when null"),
  })
  .meta({ id: 'SequenceEnrolRequest' });
export const EnrolResultSchema = z
  .object({
    row_id: UuidSchema,
    status: z.enum(['enrolled', 'already_enrolled', 'refused']),
    reason: z
      .string()
      .nullable()
      .describe(
        'Why refused: row_not_found, no_address, do_not_contact, replied, bounced, stopped, recontact_cooldown, active_elsewhere, already_in_sequence, duplicate_person',
      ),
    contact: SequenceContactSchema.nullable(),
  })
  .meta({ id: 'SequenceEnrolResult' });
export type EnrolResult = z.infer<typeof EnrolResultSchema>;
export const EnrolResponseSchema = z
  .object({ results: z.array(EnrolResultSchema).describe('In the order asked') })
  .meta({ id: 'SequenceEnrolResponse' });

export const MigrateRequestSchema = z
  .strictObject({
    contact_ids: z.array(UuidSchema).min(1).max(enrolRowsMax),
    to_version: z.int().min(1).max(int32Max),
    at_step_id: StepIdSchema.nullable()
      .default(null)
      .describe("Where to continue when the contact's step is not in the new version"),
  })
  .meta({
    id: 'SequenceMigrateRequest',
    description: 'Steps the contact already had are skipped on the new version, never repeated',
  });
export const MigrateResponseSchema = z
  .object({
    results: z.array(
      z.object({
        contact_id: UuidSchema,
        migrated: z.boolean(),
        reason: z.string().nullable(),
        contact: SequenceContactSchema.nullable(),
      }),
    ),
  })
  .meta({ id: 'SequenceMigrateResponse' });

// ---------------------------------------------------------------------------------------------
// Approval queue

export const SendStatusSchema = z
  .enum(['awaiting_approval', 'approved', 'rejected', 'sending', 'sent', 'stopped'])
  .meta({ id: 'SequenceSendStatus' });
export const ApprovalSchema = z
  .object({
    id: UuidSchema,
    sequence_id: UuidSchema,
    contact_id: UuidSchema,
    step_id: z.string(),
    channel: z.enum(['email', 'pnet']),
    kind: z.string().describe('`email` or the pnet action'),
    status: SendStatusSchema,
    reason: z
      .string()
      .nullable()
      .describe('Why it waits: manual_mode, missing_values: ..., agent_review: ..., no_mailbox'),
    to_email: z.string().nullable(),
    from_email: z.string().nullable(),
    subject: z.string().nullable(),
    body: z.string(),
    edited: z.boolean(),
    message_id: z.string(),
    unconfirmed: z
      .boolean()
      .describe(
        'Sent, but the worker stopped between claiming it and the mail server answering: it may not have arrived. Never resent on its own ' +
          '(a second copy is worse); list these with `unconfirmed=true` to check with the contact',
      ),
    decided_at: TimestampSchema.nullable(),
    sent_at: TimestampSchema.nullable(),
    created_at: TimestampSchema,
  })
  .meta({ id: 'SequenceApproval' });
export type Approval = z.infer<typeof ApprovalSchema>;
export const ApprovalListSchema = z
  .object({ approvals: z.array(ApprovalSchema).describe('Oldest first') })
  .meta({ id: 'SequenceApprovalList' });
export const ApprovalListQuerySchema = z.object({
  sequence_id: UuidSchema.optional(),
  unconfirmed: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true')
    .describe(
      'true: instead of the messages waiting for a person, the sent ones whose delivery is unconfirmed, newest first',
    ),
  limit: queryInteger(z.int().min(1).max(approvalsPageMax).default(50)),
});
export const ApproveRequestSchema = z
  .strictObject({
    subject: textSchema(0, subjectMax).nullable().optional().describe('Edit then approve: the subject to send'),
    body: textSchema(1, bodyMax).optional().describe('Edit then approve: the body to send'),
  })
  .meta({ id: 'SequenceApproveRequest' });
export const RejectRequestSchema = z
  .strictObject({
    reason: textSchema(0, 500).nullable().default(null),
    stop_contact: z
      .boolean()
      .default(false)
      .describe('Also stop the contact; otherwise it moves on to its next step without this message'),
  })
  .meta({ id: 'SequenceRejectRequest' });

// ---------------------------------------------------------------------------------------------
// A contact's keys (its workflow's id is in workflows/sequences/sequence-contact.contract.ts)

export const contactKeyOf = (sequenceId: string, rowId: string) => `${sequenceId}:${rowId}`;
/** Stable per contact, step and version: a retried send carries the same id. */
export const messageIdOf = (contactId: string, stepId: string, version: number, domain: string) =>
  `<seq.${contactId}.${stepId}.v${version}@${domain}>`;
