/**
 * Training sessions of a sequence's outbound agent (interface spec: Training session, Training
 * session status): the agent writes messages for sample contacts (rows of the sequence's audience
 * table), a person gives each "Looks good" or a note, a note makes a rewrite and a lesson, and
 * after `ready_after` Looks good in a row the session proposes a prompt update (per slot: current,
 * proposed, rationale) that a person applies (a new agent version) or abandons.
 *
 * The session row holds `status` and `revision` (every mutating transition bumps it, by a
 * compare-and-set) and a document with the contacts, steps, progress and proposal. The functions
 * here are the transitions themselves, pure, applied by services/agents/training-sessions.ts inside
 * that compare-and-set; the workflow `training-session/<session_id>` decides what runs next. The
 * API's request and response shapes are training-session-schemas.ts.
 *
 * Session status transitions (the interface spec's Training session status leaves them to us):
 *
 * | From                          | Trigger                                  | To          | Also |
 * |-------------------------------|------------------------------------------|-------------|------|
 * | (new)                         | start                                    | running     | sample contacts chosen; the workflow writes each in turn |
 * | running                       | every sample contact written             | reviewing   | |
 * | running, reviewing            | Looks good                               | same        | in_a_row + 1; a pending rewrite is accepted (fixed + 1) |
 * | running, reviewing            | note                                     | same        | in_a_row = 0, ready = false; the contact is rewritten next; `note_waiting` while another write is under way |
 * | running, reviewing            | rewrite lands                            | same        | proposed_* set on the contact's messages, a lesson added, notes `learned`, the contact waits for a verdict |
 * | running, reviewing, proposed  | discard-changes (discardTrainingChanges) | reviewing   | drops the latest pending rewrite and its lesson; the thread stays as written; its notes `discarded`; the contact waits for a verdict again; a proposal is withdrawn (remade without the lesson) |
 * | reviewing                     | ready (in_a_row >= ready_after), nothing queued | proposing | the workflow drafts the prompt update |
 * | proposing                     | proposal drafted                         | proposed    | |
 * | proposed                      | apply                                    | completed   | a new agent version (`applied_version`) |
 * | proposed                      | abandon                                  | abandoned   | the agent is left as it was |
 * | running, reviewing, proposing, proposed | close                          | abandoned   | ends the run early; nothing is applied |
 * | completed, abandoned          | anything                                 | unchanged   | 409 |
 *
 * A transition that carries `expected_revision` and finds another revision is refused with 409
 * and changes nothing. Contact `verdict`: null (waiting), `looks_good`, `note`. Note `state`:
 * `pending` (waiting for its rewrite), `learned` (its rewrite landed and its lesson counts),
 * `discarded` (its rewrite was discarded; never learned).
 */
import type { AgentSlot, ResearchFact } from './outbound-agents.js';
import type {
  ContactState,
  PersonInput,
  Progress,
  Proposal,
  Send,
  TrainingContact,
  TrainingMessage,
  TrainingSession,
  TrainingStatus,
  TrainingStep,
  TrainingVerdict,
} from './training-session-schemas.js';

export const stepsKept = 200;
export const liveStatuses: readonly TrainingStatus[] = ['running', 'reviewing', 'proposing', 'proposed'];

/** The session workflow's view of its session: enough for validators and for deciding what runs next. */
export type TrainingView = Pick<TrainingSession, 'revision' | 'status'> & {
  contacts: Record<string, ContactState>;
  readyToPropose: boolean;
};

// ---------------------------------------------------------------------------------------------
// The stored document and its transitions

export interface LessonRecord {
  lesson: string;
  record_id: string;
  round: number;
  state: 'active' | 'discarded';
}

export interface SessionDoc {
  ready_after: number;
  contacts: TrainingContact[];
  steps: TrainingStep[];
  progress: Progress;
  proposal: Proposal | null;
  reviewed_ids: string[];
  lesson_log: LessonRecord[];
}

/** The columns a transition may change beside the document. */
export interface SessionHead {
  status: TrainingStatus;
  note_waiting: boolean;
  error: string;
}

export type Transition = { head: SessionHead; doc: SessionDoc };

/** A refused transition: the API answers 409 (or 404 for an unknown contact), and nothing changed. */
export class TrainingRefusal extends Error {
  override name = 'TrainingRefusal';
  constructor(
    message: string,
    readonly code: 'conflict' | 'not_found' = 'conflict',
  ) {
    super(message);
  }
}

export interface SampleContact {
  record_id: string;
  person: PersonInput;
  label: string;
  fields: { name: string; value: string }[];
  profile_mismatch: boolean;
}

export function newDoc(samples: SampleContact[], readyAfter: number): SessionDoc {
  return {
    ready_after: readyAfter,
    contacts: samples.map((s) => ({
      ...s,
      note: null,
      context: { research_brief: [], sources: [] },
      verdict: null,
      notes: [],
      notice: null,
      messages: [],
      state: 'waiting_write',
      round: 0,
    })),
    steps: [],
    progress: { fixed: 0, in_a_row: 0, reviewed: 0, ready_after: readyAfter, ready: false, lessons: [] },
    proposal: null,
    reviewed_ids: [],
    lesson_log: [],
  };
}

/** A note is waiting while a contact's rewrite is queued behind another write. */
const noteWaiting = (doc: SessionDoc) => doc.contacts.some((c) => c.state === 'rewrite_queued');
const clone = <T>(value: T): T => structuredClone(value);
const activeLessons = (doc: SessionDoc) => doc.lesson_log.filter((l) => l.state === 'active').map((l) => l.lesson);

function contactOf(doc: SessionDoc, recordId: string): TrainingContact {
  const contact = doc.contacts.find((c) => c.record_id === recordId);
  if (!contact) throw new TrainingRefusal('That contact is not part of this training session.', 'not_found');
  return contact;
}

function requireStatus(head: SessionHead, allowed: readonly TrainingStatus[], action: string) {
  if (!allowed.includes(head.status)) throw new TrainingRefusal(`The session is ${head.status}; it cannot ${action}.`);
}

export function pushStep(doc: SessionDoc, step: TrainingStep) {
  doc.steps.push(step);
  if (doc.steps.length > stepsKept) doc.steps.splice(0, doc.steps.length - stepsKept);
}

/** Marks a contact as being written (first write or rewrite). */
export function beginWrite(t: Transition, recordId: string): Transition {
  const next = clone(t);
  const contact = contactOf(next.doc, recordId);
  contact.state = contact.state === 'rewrite_queued' || contact.state === 'rewriting' ? 'rewriting' : 'writing';
  next.head.note_waiting = noteWaiting(next.doc);
  return next;
}

/** A first write landed: the thread as written, waiting for a verdict. */
export function landFirstWrite(
  t: Transition,
  recordId: string,
  messages: TrainingMessage[],
  context: TrainingContact['context'],
  step: TrainingStep,
): Transition {
  const next = clone(t);
  const contact = contactOf(next.doc, recordId);
  contact.messages = messages;
  contact.context = context;
  contact.state = 'awaiting_verdict';
  contact.notice = messages.some((m) => m.error) ? 'A message could not be written; give a note to try again.' : null;
  pushStep(next.doc, step);
  return next;
}

/** A message's rewrite (on failure: the error, and nothing proposed). */
export interface Rewrite {
  subject: string | null;
  body: string;
  error: string | null;
  send: Send;
  reasoning: string;
  facts_used: string[];
}

/**
 * A rewrite landed: each message gets the rewrite as proposed_*, the pending notes are learned,
 * their lesson counts, and the contact waits for a verdict.
 */
export function landRewrite(
  t: Transition,
  recordId: string,
  rewrites: Map<string, Rewrite>,
  step: TrainingStep,
): Transition {
  const next = clone(t);
  const contact = contactOf(next.doc, recordId);
  const pending = contact.notes.filter((n) => n.state === 'pending');
  contact.round += 1;
  for (const message of contact.messages) {
    const rewrite = rewrites.get(message.id);
    if (!rewrite) continue;
    message.proposed_subject = rewrite.error ? null : rewrite.subject;
    message.proposed_body = rewrite.error ? null : rewrite.body;
    message.proposed_error = rewrite.error;
    message.proposed_send = rewrite.error ? null : rewrite.send;
    message.note = pending.map((n) => n.note).join('\n') || message.note;
    if (!rewrite.error) message.reasoning = rewrite.reasoning;
    if (!rewrite.error) message.facts_used = rewrite.facts_used;
  }
  const failed = [...rewrites.values()].every((r) => r.error);
  if (!failed) {
    for (const note of pending) {
      note.state = 'learned';
      next.doc.lesson_log.push({ lesson: note.note, record_id: recordId, round: contact.round, state: 'active' });
    }
  }
  next.doc.progress.lessons = activeLessons(next.doc);
  contact.verdict = null;
  contact.state = 'awaiting_verdict';
  contact.notice = failed
    ? 'The rewrite could not be written; give the note again to retry.'
    : 'Rewritten from your note: Looks good keeps the rewrite, discard-changes drops it.';
  next.head.note_waiting = noteWaiting(next.doc);
  pushStep(next.doc, step);
  return next;
}

/** Looks good or a note. `writingOther` says a write for another contact is under way (note_waiting). */
export function giveVerdict(t: Transition, request: TrainingVerdict, writingOther: boolean): Transition {
  requireStatus(t.head, ['running', 'reviewing'], 'take a verdict');
  const next = clone(t);
  const contact = contactOf(next.doc, request.record_id);
  if (contact.state !== 'awaiting_verdict') {
    const why: Record<ContactState, string> = {
      waiting_write: 'it has not been written yet',
      writing: 'it is being written',
      rewrite_queued: 'its rewrite is queued',
      rewriting: 'it is being rewritten',
      reviewed: 'it already has a verdict',
      awaiting_verdict: '',
    };
    throw new TrainingRefusal(`That contact cannot take a verdict now: ${why[contact.state]}.`);
  }
  const progress = next.doc.progress;
  progress.reviewed += 1;
  if (!next.doc.reviewed_ids.includes(contact.record_id)) next.doc.reviewed_ids.push(contact.record_id);
  if (request.verdict === 'looks_good') {
    let accepted = false;
    for (const m of contact.messages) {
      if (m.proposed_body === null) continue;
      m.previous_body = m.body;
      m.previous_subject = m.subject;
      m.body = m.proposed_body;
      m.subject = m.proposed_subject;
      m.send = m.proposed_send ?? m.send;
      m.proposed_body = null;
      m.proposed_subject = null;
      m.proposed_send = null;
      m.note = null;
      accepted = true;
    }
    if (accepted) progress.fixed += 1;
    contact.verdict = 'looks_good';
    contact.state = 'reviewed';
    contact.notice = null;
    progress.in_a_row += 1;
  } else {
    contact.verdict = 'note';
    contact.note = request.note;
    contact.notes.push({ note: request.note, state: 'pending' });
    contact.state = 'rewrite_queued';
    contact.notice = writingOther
      ? 'Your note waits for the write under way; its rewrite follows as soon as that lands.'
      : 'Being rewritten from your note.';
    progress.in_a_row = 0;
    if (writingOther) next.head.note_waiting = true;
  }
  progress.ready = progress.in_a_row >= progress.ready_after;
  return next;
}

/**
 * discardTrainingChanges: drops the latest rewrite still pending and the lesson that wrote it. The
 * thread stays as written, its notes are kept as discarded, and the contact waits for a verdict
 * again. A proposal drafted with that lesson is withdrawn (the session goes back to reviewing and
 * drafts it again without the lesson once ready).
 */
export function discardChanges(t: Transition): Transition {
  requireStatus(t.head, ['running', 'reviewing', 'proposed'], 'discard changes');
  const next = clone(t);
  const lesson = [...next.doc.lesson_log].reverse().find((l) => {
    const c = contactOf(next.doc, l.record_id);
    return l.state === 'active' && c.state === 'awaiting_verdict' && c.messages.some((m) => m.proposed_body !== null);
  });
  if (!lesson)
    throw new TrainingRefusal('There is no rewrite to discard: every rewrite was already kept or discarded.');
  const contact = contactOf(next.doc, lesson.record_id);
  const dropped = new Set<string>();
  for (const l of next.doc.lesson_log) {
    if (l.record_id !== contact.record_id || l.round !== lesson.round) continue;
    l.state = 'discarded';
    dropped.add(l.lesson);
  }
  // Only the notes this rewrite learned from; notes of earlier, kept rewrites stay learned.
  for (const note of contact.notes) if (note.state === 'learned' && dropped.has(note.note)) note.state = 'discarded';
  for (const m of contact.messages) {
    m.proposed_body = null;
    m.proposed_subject = null;
    m.proposed_error = null;
    m.proposed_send = null;
    m.note = null;
  }
  contact.verdict = null;
  contact.state = 'awaiting_verdict';
  contact.notice = 'Changes discarded: the messages stand as written and wait for your verdict again.';
  next.doc.progress.lessons = activeLessons(next.doc);
  if (next.head.status === 'proposed') {
    next.head.status = 'reviewing';
    next.doc.proposal = null;
  }
  return next;
}

/** Whether the workflow should draft a proposal now. */
export const readyToPropose = (t: Transition) =>
  t.head.status === 'reviewing' &&
  t.doc.progress.ready &&
  t.doc.contacts.every((c) => c.state === 'awaiting_verdict' || c.state === 'reviewed');

/** The prompt update: each slot's prompt with the lessons added (the local drafter; the model's is proposeTrainingUpdate in services/agents/training-sessions.ts). */
export function draftProposal(t: Transition, slots: AgentSlot[], revision: number, proposalId: string): Proposal {
  const lessons = activeLessons(t.doc);
  const reviewed = t.doc.reviewed_ids;
  if (lessons.length === 0) {
    return {
      summary: `${t.doc.progress.in_a_row} messages in a row were good as written; no change to the prompts is needed.`,
      changes: [],
      made_at: revision,
      record_id: proposalId,
      round_ids: reviewed,
    };
  }
  const block = `Lessons from training:\n${lessons.map((l) => `- ${l}`).join('\n')}`;
  return {
    summary: `Adds ${lessons.length} lesson${lessons.length === 1 ? '' : 's'} from reviewers' notes to ${slots.length} slot prompt${slots.length === 1 ? '' : 's'}.`,
    changes: slots.map((slot) => ({
      slot_key: slot.slot_key,
      current: slot.prompt,
      proposed: `${slot.prompt.replace(/\n\nLessons from training:\n(- .*\n?)*$/, '')}\n\n${block}`.slice(0, 20_000),
      rationale: `Reviewers asked for: ${lessons.map((l) => `"${l}"`).join(', ')}; the rewrites that followed these notes were written with them.`,
    })),
    made_at: revision,
    record_id: proposalId,
    round_ids: reviewed,
  };
}

export function withProposal(t: Transition, proposal: Proposal, step: TrainingStep): Transition {
  requireStatus(t.head, ['proposing'], 'take a proposal');
  const next = clone(t);
  next.doc.proposal = proposal;
  next.head.status = 'proposed';
  pushStep(next.doc, step);
  return next;
}

export function moveTo(
  t: Transition,
  allowed: readonly TrainingStatus[],
  status: TrainingStatus,
  action: string,
): Transition {
  requireStatus(t.head, allowed, action);
  const next = clone(t);
  next.head.status = status;
  if (status === 'abandoned' || status === 'completed') next.head.note_waiting = false;
  return next;
}

/** The research brief kept on a contact. */
export const contextOf = (brief: ResearchFact[], sources: string[]): TrainingContact['context'] => ({
  research_brief: brief,
  sources,
});

// ---------------------------------------------------------------------------------------------
// Decisions: every change of a session is decideTraining(snapshot, event), pure. The services
// apply a `write` under the compare-and-set on the revision (services/agents/training-sessions.ts,
// `mutate`), and re-decide from a fresh read when another write got there first.
//
// | Event               | Refused when (nothing written)                                   | Otherwise |
// |---------------------|------------------------------------------------------------------|-----------|
// | any pinned event    | expected_revision is not the session's revision                  | as below |
// | begin_write         | the session is completed/abandoned; the contact owes no write    | the contact `writing` (`rewriting` after a note) |
// | write_landed        | the session is completed/abandoned; the contact is no longer being written | a first write: the thread as written; a rewrite: proposed_*, lessons learned unless every slot failed |
// | write_failed        | never                                                            | the error on the session; a contact owed a write waits for a verdict |
// | initial_writes_done | never                                                            | running -> reviewing; otherwise unchanged |
// | verdict             | not running/reviewing; unknown contact (not_found); the contact waits for no verdict | Looks good or a note (giveVerdict) |
// | discard_changes     | not running/reviewing/proposed; no pending rewrite                | the rewrite and its lesson dropped; proposed -> reviewing |
// | start_proposing     | not ready to propose                                             | reviewing -> proposing |
// | proposal_drafted    | never                                                            | proposing -> proposed with the proposal; otherwise unchanged |
// | apply_proposal      | not proposed                                                     | proposed -> completed |
// | abandon_proposal    | not proposed                                                     | proposed -> abandoned |
// | close               | completed or abandoned                                           | -> abandoned |
//
// `unchanged` is still written by the caller: the workflow's own writes bump the revision as they
// always have, so a caller pinned to the revision read before them is refused.

/** Contact states that owe a write. */
export const owed: readonly ContactState[] = ['waiting_write', 'writing', 'rewrite_queued', 'rewriting'];

export type TrainingSnapshot = Transition & { revision: number };

/** One slot's message as the writer drafted it (on failure: no subject, an empty body, the error). */
export interface DraftedMessage {
  /** The id a first write gives the new message (a rewrite keeps the message's own). */
  id: string;
  slot_key: string;
  kind: TrainingMessage['kind'];
  subject: string | null;
  body: string;
  error: string | null;
  send: Send;
  reasoning: string;
  facts_used: string[];
  model_key: string;
}

export type TrainingEvent =
  | { type: 'begin_write'; record_id: string }
  | {
      type: 'write_landed';
      record_id: string;
      /** Decided when the write began: a rewrite of a written thread, or a (fresh) first write. */
      rewrite: boolean;
      drafts: DraftedMessage[];
      context: TrainingContact['context'];
      step: TrainingStep;
    }
  | { type: 'write_failed'; record_id: string; error: string }
  | { type: 'initial_writes_done' }
  | { type: 'verdict'; request: TrainingVerdict; writing_other: boolean }
  | { type: 'discard_changes'; expected_revision: number }
  | { type: 'start_proposing' }
  | { type: 'proposal_drafted'; proposal: Proposal; step: TrainingStep }
  | { type: 'apply_proposal'; expected_revision: number }
  | { type: 'abandon_proposal'; expected_revision: number }
  | { type: 'close'; expected_revision?: number };

export type TrainingDecision =
  | { kind: 'write'; next: Transition }
  | { kind: 'unchanged' }
  | { kind: 'refuse'; code: TrainingRefusal['code']; message: string };

/** The revision a person's event is pinned to, if any. */
export function expectedRevisionOf(event: TrainingEvent): number | undefined {
  if (event.type === 'verdict') return event.request.expected_revision;
  return 'expected_revision' in event ? event.expected_revision : undefined;
}

/** A rewrite for a message whose slot the agent no longer has. */
const slotGone = (): Rewrite => ({
  subject: null,
  body: '',
  error: 'The agent no longer has this slot.',
  send: { alone: false, reason: 'error', doubt: null },
  reasoning: '',
  facts_used: [],
});

function firstWriteMessages(drafts: DraftedMessage[]): TrainingMessage[] {
  return drafts.map((d, i) => ({
    id: d.id,
    kind: d.kind,
    title: d.slot_key,
    timing: i === 0 ? 'first message' : `follow-up ${i}`,
    subject: d.subject,
    body: d.body,
    authored: true,
    conditional: false,
    edited_body: null,
    edited_subject: null,
    error: d.error,
    facts_used: d.facts_used,
    note: null,
    previous_body: null,
    previous_subject: null,
    reasoning: d.reasoning,
    reply_to_step_id: null,
    steps: [],
    proposed_body: null,
    proposed_error: null,
    proposed_subject: null,
    send: d.send,
    proposed_send: null,
    model_key: d.model_key,
  }));
}

function landWrite(t: Transition, event: Extract<TrainingEvent, { type: 'write_landed' }>): Transition {
  // Closed meanwhile: the write is dropped (its caller returns its credits).
  if (!liveStatuses.includes(t.head.status)) throw new TrainingRefusal(`The session is ${t.head.status}.`);
  const contact = t.doc.contacts.find((c) => c.record_id === event.record_id);
  if (contact?.state !== 'writing' && contact?.state !== 'rewriting')
    throw new TrainingRefusal('The contact is no longer being written.');
  if (!event.rewrite)
    return landFirstWrite(t, event.record_id, firstWriteMessages(event.drafts), event.context, event.step);
  // Each message takes the draft of its slot.
  const rewrites = new Map(
    contact.messages.map((m) => {
      const d = event.drafts.find((x) => x.slot_key === m.title);
      const rewrite: Rewrite = d
        ? {
            subject: d.subject,
            body: d.body,
            error: d.error,
            send: d.send,
            reasoning: d.reasoning,
            facts_used: d.facts_used,
          }
        : slotGone();
      return [m.id, rewrite] as const;
    }),
  );
  return landRewrite(t, event.record_id, rewrites, event.step);
}

/** A write that could not run at all (no credits, agent gone): the session shows why, and the contact waits for a person. */
function writeFailed(t: Transition, recordId: string, error: string): Transition {
  const next = clone(t);
  next.head.error = error.slice(0, 2000);
  const contact = next.doc.contacts.find((c) => c.record_id === recordId);
  if (contact && owed.includes(contact.state)) {
    contact.state = 'awaiting_verdict';
    contact.notice = `Could not be written: ${error.slice(0, 300)} Give a note to try again.`;
  }
  next.head.note_waiting = noteWaiting(next.doc);
  return next;
}

/** The transition an event makes, or null when it changes nothing; refusals throw TrainingRefusal. */
function transitionFor(t: Transition, event: TrainingEvent): Transition | null {
  switch (event.type) {
    case 'begin_write': {
      if (!liveStatuses.includes(t.head.status)) throw new TrainingRefusal(`The session is ${t.head.status}.`);
      // A retry after the write landed finds nothing owed: its caller answers the session as it is.
      const state = t.doc.contacts.find((c) => c.record_id === event.record_id)?.state;
      if (!state || !owed.includes(state)) throw new TrainingRefusal('Nothing to write for this contact.');
      return beginWrite(t, event.record_id);
    }
    case 'write_landed':
      return landWrite(t, event);
    case 'write_failed':
      return writeFailed(t, event.record_id, event.error);
    case 'initial_writes_done':
      return t.head.status === 'running' ? moveTo(t, ['running'], 'reviewing', 'start reviewing') : null;
    case 'verdict':
      return giveVerdict(t, event.request, event.writing_other);
    case 'discard_changes':
      return discardChanges(t);
    case 'start_proposing':
      if (!readyToPropose(t)) throw new TrainingRefusal('The session is not ready to propose.');
      return moveTo(t, ['reviewing'], 'proposing', 'propose');
    case 'proposal_drafted':
      // A verdict, a discard or a close got there first: the draft is dropped.
      return t.head.status === 'proposing' ? withProposal(t, event.proposal, event.step) : null;
    case 'apply_proposal':
      return moveTo(t, ['proposed'], 'completed', 'apply a proposal');
    case 'abandon_proposal':
      return moveTo(t, ['proposed'], 'abandoned', 'abandon a proposal');
    case 'close':
      return moveTo(t, liveStatuses, 'abandoned', 'be closed');
  }
}

/** What `event` does to the session as read (see the table above). Never changes `snapshot`. */
export function decideTraining(snapshot: TrainingSnapshot, event: TrainingEvent): TrainingDecision {
  const expected = expectedRevisionOf(event);
  if (expected !== undefined && snapshot.revision !== expected) {
    return {
      kind: 'refuse',
      code: 'conflict',
      message: `The session is at revision ${snapshot.revision}, not ${expected}; read it again and retry.`,
    };
  }
  try {
    const next = transitionFor({ head: snapshot.head, doc: snapshot.doc }, event);
    return next ? { kind: 'write', next } : { kind: 'unchanged' };
  } catch (error) {
    if (error instanceof TrainingRefusal) return { kind: 'refuse', code: error.code, message: error.message };
    throw error;
  }
}
