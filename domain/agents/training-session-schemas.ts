/**
 * The API shapes of training sessions (interface spec: Training session, Training session status):
 * the request and response bodies the routes of api/routes/agents/training-sessions.ts validate
 * (operationIds startTrainingSession, giveTrainingVerdict, discardTrainingChanges, ...), and the
 * types of the stored document they show. The transitions that change a session are
 * training-sessions.ts beside this file.
 */
import { z } from 'zod';
import { TimestampSchema, UuidSchema, textSchema } from '../shared/common.js';
import { MessageKindSchema } from './outbound-agents.js';

export const sampleSizeMax = 20;
export const noteMax = 2000;

export const TrainingStatusSchema = z
  .enum(['running', 'reviewing', 'proposing', 'proposed', 'completed', 'abandoned'])
  .meta({ id: 'TrainingSessionStatus', description: "See the transition table in the training routes' descriptions" });
export type TrainingStatus = z.infer<typeof TrainingStatusSchema>;

export const VerdictSchema = z.enum(['looks_good', 'note']).meta({ id: 'TrainingVerdict' });
export type Verdict = z.infer<typeof VerdictSchema>;
export const NoteStateSchema = z.enum(['pending', 'learned', 'discarded']).meta({ id: 'TrainingNoteState' });

/** Where a contact stands in the run (ours, beside the spec's fields, so a screen can resume). */
export const ContactStateSchema = z
  .enum(['waiting_write', 'writing', 'awaiting_verdict', 'rewrite_queued', 'rewriting', 'reviewed'])
  .meta({ id: 'TrainingContactState' });
export type ContactState = z.infer<typeof ContactStateSchema>;

export const TrainingStepSchema = z
  .object({
    action: z.string(),
    detail: z.string().default(''),
    duration_ms: z.int(),
    observation: z.string().default(''),
    outcome: z.string().describe('`completed` or `failed`'),
    thought: z.string(),
  })
  .meta({ id: 'TrainingStep' });
export type TrainingStep = z.infer<typeof TrainingStepSchema>;

const SendSchema = z
  .object({
    alone: z.boolean().describe('Good enough to go out without a person looking first'),
    reason: z.string().nullable().describe('Why not: `insufficient_data`, `low_confidence`, `judge_failed` or `error`'),
    doubt: z.string().nullable().describe('The first doubt the judge raised'),
  })
  .meta({ id: 'TrainingSend' });
export type Send = z.infer<typeof SendSchema>;

export const TrainingMessageSchema = z
  .object({
    id: UuidSchema,
    kind: MessageKindSchema,
    title: z.string().describe('The slot it writes, for example `opener`'),
    timing: z.string().describe('`first message` or `follow-up <n>`'),
    subject: z.string().nullable(),
    body: z.string(),
    authored: z.boolean().describe('Written by the agent (true) rather than typed by a person'),
    conditional: z.boolean(),
    edited_body: z.string().nullable(),
    edited_subject: z.string().nullable(),
    error: z.string().nullable(),
    facts_used: z.array(z.string()),
    note: z.string().nullable().describe('The note its pending rewrite answers'),
    previous_body: z.string().nullable().describe('The body before an accepted rewrite'),
    previous_subject: z.string().nullable(),
    reasoning: z.string(),
    reply_to_step_id: UuidSchema.nullable(),
    steps: z.array(TrainingStepSchema),
    proposed_body: z.string().nullable().describe('The rewrite a note asked for, pending Looks good or a discard'),
    proposed_error: z.string().nullable(),
    proposed_subject: z.string().nullable(),
    send: SendSchema,
    proposed_send: SendSchema.nullable(),
    model_key: z.string(),
  })
  .meta({ id: 'TrainingMessage' });
export type TrainingMessage = z.infer<typeof TrainingMessageSchema>;

export const TrainingContactSchema = z
  .object({
    record_id: UuidSchema.describe('The audience-table row'),
    label: z.string(),
    note: z.string().nullable().describe('The latest note'),
    context: z
      .object({ research_brief: z.array(z.unknown()), sources: z.array(z.string()) })
      .describe('What the agent found out'),
    fields: z.array(z.object({ name: z.string(), value: z.string() })),
    verdict: VerdictSchema.nullable().describe('Null while the contact waits for a verdict'),
    notes: z.array(z.object({ note: z.string(), state: NoteStateSchema })),
    notice: z.string().nullable(),
    profile_mismatch: z
      .boolean()
      .describe('The row names no person the research could tie to it (no name, email or profile)'),
    messages: z.array(TrainingMessageSchema),
    state: ContactStateSchema,
    round: z.int().describe('Rewrites so far'),
  })
  .meta({ id: 'TrainingContact' });
/** Who the contact is, for research and the writer (kept in the document, not shown). */
export interface PersonInput {
  name?: string;
  email?: string;
  profileUrl?: string;
}
export type TrainingContact = z.infer<typeof TrainingContactSchema> & { person?: PersonInput };

export const ProposalSchema = z
  .object({
    summary: z.string(),
    changes: z.array(
      z.object({ slot_key: z.string(), current: z.string(), proposed: z.string(), rationale: z.string() }),
    ),
    made_at: z.int().describe('The session revision at which it was drafted'),
    record_id: UuidSchema.describe('The id of this proposal'),
    round_ids: z.array(UuidSchema).describe('The contacts whose reviews it was drafted from'),
  })
  .meta({ id: 'TrainingProposal' });
export type Proposal = z.infer<typeof ProposalSchema>;

export const ProgressSchema = z
  .object({
    fixed: z.int().describe('Rewrites accepted with Looks good'),
    in_a_row: z.int().describe('Looks good given in a row since the last note'),
    reviewed: z.int().describe('Verdicts given'),
    ready_after: z.int(),
    ready: z.boolean(),
    lessons: z.array(z.string()).describe('Lessons learned from notes (a discarded rewrite takes its lesson with it)'),
  })
  .meta({ id: 'TrainingProgress' });
export type Progress = z.infer<typeof ProgressSchema>;

export const TrainingSessionSchema = z
  .object({
    id: UuidSchema,
    agent_id: UuidSchema,
    sequence_id: UuidSchema,
    applied_version: z.int().nullable().describe('The agent version the applied proposal made'),
    base_version: z.int().describe('The agent version the session writes with'),
    revision: z.int().describe('Bumped by every change; pass it as `expected_revision`'),
    status: TrainingStatusSchema,
    created_at: TimestampSchema,
    error: z.string().describe('Empty unless something failed'),
    note_waiting: z.boolean(),
    reviewed_ids: z.array(UuidSchema),
    steps: z.array(TrainingStepSchema),
    progress: ProgressSchema,
    proposal: ProposalSchema.nullable(),
    contacts: z.array(TrainingContactSchema),
  })
  .meta({ id: 'TrainingSession' });
export type TrainingSession = z.infer<typeof TrainingSessionSchema>;

export const TrainingSessionListSchema = z
  .object({ sessions: z.array(TrainingSessionSchema).describe('Newest first') })
  .meta({ id: 'TrainingSessionList' });

export const ExpectedRevisionSchema = z
  .int()
  .min(1)
  .describe('The revision the caller last read; another one is refused with 409 and nothing changes');

export const TrainingStartSchema = z
  .object({
    sample_size: z
      .int()
      .min(1)
      .max(sampleSizeMax)
      .default(5)
      .describe('Audience rows to write for (the first rows of the table)'),
    ready_after: z
      .int()
      .min(1)
      .max(sampleSizeMax)
      .default(3)
      .describe('Looks good in a row that make the session ready; capped at the number of sample contacts'),
  })
  .meta({ id: 'TrainingStart' });
export type TrainingStart = z.infer<typeof TrainingStartSchema>;

export const TrainingVerdictSchema = z
  .discriminatedUnion('verdict', [
    z.object({
      record_id: UuidSchema,
      verdict: z.literal('looks_good'),
      expected_revision: ExpectedRevisionSchema.optional(),
    }),
    z.object({
      record_id: UuidSchema,
      verdict: z.literal('note'),
      note: textSchema(1, noteMax).describe('What to change; it becomes a lesson once its rewrite lands'),
      expected_revision: ExpectedRevisionSchema.optional(),
    }),
  ])
  .meta({ id: 'TrainingVerdictRequest' });
export type TrainingVerdict = z.infer<typeof TrainingVerdictSchema>;

export const RevisionBodySchema = z
  .object({ expected_revision: ExpectedRevisionSchema })
  .meta({ id: 'ExpectedRevisionBody' });
export const OptionalRevisionBodySchema = z
  .object({ expected_revision: ExpectedRevisionSchema.optional() })
  .meta({ id: 'OptionalRevisionBody' });
