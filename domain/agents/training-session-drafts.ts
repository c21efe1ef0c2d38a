/**
 * What a training session's writes and its prompt update decide, pure: which contacts a run still
 * owes, whether a write is a rewrite from a note, what the writer is told, how each slot's outcome
 * is stored, and which of the model's proposed prompt changes count. The session's use cases
 * (services/agents/training-sessions.ts) apply them around the writer and the model; the
 * transitions that store them are training-sessions.ts.
 */
import { z } from 'zod';
import type { AgentSlot, ContactInput, ResearchFact, WriteContext } from './outbound-agents.js';
import type { Written } from './outbound-writing.js';
import type { Progress, Proposal, Send, TrainingContact, TrainingStep } from './training-session-schemas.js';
import type { DraftedMessage, SessionDoc } from './training-sessions.js';

/** Where a run stands, after a restart too: the contacts still to write and the rewrites still owed, in order. */
export function writesOwed(doc: SessionDoc): { toWrite: string[]; toRewrite: string[] } {
  const ids = (states: TrainingContact['state'][]) =>
    doc.contacts.filter((c) => states.includes(c.state)).map((c) => c.record_id);
  return { toWrite: ids(['waiting_write', 'writing']), toRewrite: ids(['rewrite_queued', 'rewriting']) };
}

/** A write is a rewrite from the contact's note only over a written thread: a contact whose first write failed is written afresh, whatever its note. */
export const isRewrite = (contact: TrainingContact) => contact.state === 'rewriting' && contact.messages.length > 0;

/** A first write researches the contact; a rewrite keeps the brief it has, unless it has none. */
export const needsResearch = (contact: TrainingContact, rewrite: boolean) =>
  !rewrite || contact.context.research_brief.length === 0;

/** Who the contact is, for research and the writer: the row's person, its fields by column name. */
export const contactInputOf = (contact: TrainingContact): ContactInput => ({
  ...contact.person,
  fields: Object.fromEntries(contact.fields.map((f) => [f.name, f.value])),
});

/** The round a write belongs to: a rewrite is the contact's next one. */
export const writeRound = (contact: TrainingContact, rewrite: boolean) => contact.round + (rewrite ? 1 : 0);

/** The credit hold's cause key of one slot's write; the activity's attempt is in it, so a retried write holds afresh. */
export const trainingHoldKey = (sessionId: string, recordId: string, round: number, slotKey: string, attempt: number) =>
  `training:${sessionId}:${recordId}:${round}:${slotKey}:${attempt}`;

/**
 * What the writer is told for one slot: the session's lessons and, on a rewrite, the contact's
 * pending notes. `thread` is the caller's list of the slots written so far in this write.
 */
export function trainingWriteContext(
  agent: { name: string; instructions: string },
  slot: AgentSlot,
  contact: TrainingContact,
  brief: ResearchFact[],
  lessons: string[],
  thread: WriteContext['thread'],
  rewrite: boolean,
): WriteContext {
  return {
    agentName: agent.name,
    instructions: agent.instructions,
    slot,
    contact: contactInputOf(contact),
    brief,
    lessons: lessons.concat(rewrite ? contact.notes.filter((n) => n.state === 'pending').map((n) => n.note) : []),
    thread,
    round: writeRound(contact, rewrite),
  };
}

/** Whether a message may go out without a person looking first, and why not; a failed write never may. */
export const sendOf = (written: Pick<Written, 'assessment' | 'findings'> | null, error: string | null): Send =>
  written
    ? {
        alone: written.assessment.review_reason === null,
        reason: written.assessment.review_reason,
        doubt: written.findings.find((f) => f.severity !== 'info')?.message ?? null,
      }
    : { alone: false, reason: 'error', doubt: error };

/** One slot's outcome of a write: the writer's message, or the error its last attempt kept. */
export interface SlotOutcome {
  slot: AgentSlot;
  written: Written | null;
  error: string | null;
}

/** A slot's outcome as the session stores it, under the message id `id`. */
export const draftedMessage = (id: string, d: SlotOutcome): DraftedMessage => ({
  id,
  slot_key: d.slot.slot_key,
  kind: d.slot.kind,
  subject: d.written?.draft.subject ?? null,
  body: d.written?.draft.body ?? '',
  error: d.error,
  send: sendOf(d.written, d.error),
  reasoning: d.written?.draft.reasoning ?? '',
  facts_used: d.written?.draft.facts_used ?? [],
  model_key: d.written?.modelKey ?? '',
});

/** The step a write records: how many slots were written and by what (`model` null: the local template writer); failed when none was. */
export function writeStep(
  contact: TrainingContact,
  rewrite: boolean,
  outcomes: { error: string | null }[],
  model: { key: string } | null,
  durationMs: number,
): TrainingStep {
  const failed = outcomes.filter((d) => d.error).length;
  return {
    action: rewrite ? 'rewrite_messages' : 'write_messages',
    detail: contact.label,
    duration_ms: durationMs,
    observation: `${outcomes.length - failed} of ${outcomes.length} messages written${model ? ` by ${model.key}` : ' by the local template writer'}.`,
    outcome: failed === outcomes.length && outcomes.length > 0 ? 'failed' : 'completed',
    thought: rewrite
      ? `Rewriting from the note: ${contact.notes
          .filter((n) => n.state === 'pending')
          .map((n) => n.note)
          .join(' / ')}`
      : 'First draft from the research brief.',
  };
}

/** What the chat model answers when it drafts the prompt update (JSON mode). */
export const ModelProposalSchema = z.object({
  summary: z.string().min(1).max(1000),
  changes: z
    .array(
      z.object({
        slot_key: z.string().min(1).max(64),
        proposed: z.string().min(1).max(20_000),
        rationale: z.string().max(2000).default(''),
      }),
    )
    .max(20),
});

/**
 * The prompt update as the model drafted it (`content`, its JSON answer) on top of the local draft:
 * only slots the agent has and whose prompt it changes count. Null when the answer is out of shape
 * or changes nothing: the local draft is used then.
 */
export function proposalFromModel(content: string, slots: AgentSlot[], local: Proposal): Proposal | null {
  let answer: unknown;
  try {
    answer = JSON.parse(content);
  } catch {
    return null;
  }
  const parsed = ModelProposalSchema.safeParse(answer);
  if (!parsed.success) return null;
  const changes = parsed.data.changes.flatMap((c) => {
    const slot = slots.find((s) => s.slot_key === c.slot_key);
    return slot && c.proposed !== slot.prompt
      ? [{ slot_key: c.slot_key, current: slot.prompt, proposed: c.proposed, rationale: c.rationale }]
      : [];
  });
  return changes.length > 0 ? { ...local, summary: parsed.data.summary, changes } : null;
}

/** The step a drafted proposal records; `drafter` is the model's key, or null for the local draft. */
export function proposalStep(
  proposal: Proposal,
  progress: Progress,
  drafter: string | null,
  durationMs: number,
): TrainingStep {
  return {
    action: 'propose_update',
    detail: `${proposal.changes.length} slot change${proposal.changes.length === 1 ? '' : 's'}`,
    duration_ms: durationMs,
    observation: proposal.summary,
    outcome: 'completed',
    thought: `Ready after ${progress.in_a_row} Looks good in a row; ${progress.lessons.length} lesson(s) to carry into the prompts${
      drafter === null ? ', drafted by adding them to each slot prompt' : `, drafted by ${drafter}`
    }.`,
  };
}

/** The agent's slots as they are now, each changed one with its proposed prompt (a slot edited since the session began takes it too). */
export const slotsWithProposal = <S extends AgentSlot>(slots: S[], changes: Proposal['changes']): S[] =>
  slots.map((s) => ({ ...s, prompt: changes.find((c) => c.slot_key === s.slot_key)?.proposed ?? s.prompt }));
