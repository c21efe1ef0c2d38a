/**
 * A sequence contact's next move, decided apart from the statements that read and apply it.
 *
 * `decideAdvance(snapshot, now)` is pure. The snapshot starts as the contact row under its lock
 * and grows one fact at a time: while a decision needs a fact the snapshot lacks, the answer is
 * `{ kind: 'read', fact }` and the caller reads it and asks again. So each move sends the
 * statements it sent before this split, in the same order, and no more: a contact on a timer never
 * pays for the reads of an action step. Reading every fact up front in the locking statement would
 * also be wrong, not only slower: under READ COMMITTED a statement that waits for the row lock
 * reads the rest of the database as of before its wait, so a reply or a stop committed while it
 * waited would go unseen. The stop reason and the other guards are therefore read by statements of
 * their own after the lock.
 *
 * A few writes come before the decision ends and change what it reads next (the start step of a
 * new contact, a failed contact resumed, a wait's timer, an email found for a branch): they are
 * answered as `continue` writes, and `afterWrite` gives the snapshot as the write leaves it.
 * Everything else ends in one final decision, applied by the guarded statements of
 * store/sequences/contact-moves.ts. What still decides inside SQL, on the statement's own
 * snapshot, stays there: the credit hold of a queued pnet step (too few credits writes no step;
 * the contact waits `insufficient_credits`), the sends' `on conflict do nothing`, and the
 * mailer's claim of a send, which checks for a reply in the statement that claims it.
 */
import type { ContactInput, MessageKind } from '../agents/outbound-agents.js';
import { renderMessage, type TemplateSegmentInput } from '../inbox/email-templates.js';
import { StepParamsSchema, type StepParams } from '../pnet/steps.js';
import {
  AudienceMappingSchema,
  contactFieldsOf,
  messageActions,
  stepById,
  waitUntil,
  type BranchCondition,
  type ContactStatus,
  type SequenceGraph,
  type SequencePnetAction,
  type SequenceStep,
} from './sequences.js';

// ---------------------------------------------------------------------------------------------
// The snapshot

/** The contact row, as locked (and as the move's own earlier writes left it). */
export interface AdvanceContact {
  id: string;
  workspace_id: string;
  sequence_id: string;
  row_id: string;
  contact_key: string;
  email: string | null;
  profile_url: string | null;
  first_name: string | null;
  last_name: string | null;
  company_name: string | null;
  /** The audience row's cells at enrolment (read when the row is gone). */
  fields: Record<string, unknown>;
  sender_profile_id: string | null;
  status: ContactStatus;
  version: number;
  current_step_id: string | null;
  done_steps: string[];
  wait_reason: string | null;
  wait_until: Date | null;
  wait_step_id: string | null;
  stop_reason: string | null;
  browser_step_id: string | null;
  enrolled_at: Date;
}

export interface AdvanceSequence {
  status: 'draft' | 'active' | 'paused' | 'archived';
  email_mode: 'manual' | 'automatic';
  pnet_mode: 'manual' | 'automatic';
  audience_mapping: unknown;
  outbound_agent_id: string | null;
}

export interface AdvanceSender {
  name: string | null;
  timezone: string;
  from_email: string | null;
  from_name: string | null;
  account_id: string | null;
  account_run_mode: 'manual' | 'automatic' | null;
}

/** The contact's send of its current step. */
export interface AdvanceSend {
  id: string;
  status: string;
  subject: string | null;
  body: string;
  decided_at: Date | null;
}

export interface AdvanceBrowserStep {
  status: string;
  error_code: string | null;
}

export interface AdvanceTemplate {
  subject_segments: TemplateSegmentInput[];
  body_segments: TemplateSegmentInput[];
}

/** What is known so far; `undefined` means not read yet, `null` read and absent. */
export interface AdvanceSnapshot {
  /** The contact under its row lock; null: there is no such contact. */
  contact: AdvanceContact | null;
  /** A send of the contact left `sending` (read in the locking statement). */
  claimedSendId: string | null;
  sequence?: AdvanceSequence;
  /** contact_stop_reason(): a reply, bounce, stop or do-not-contact entry, or null. */
  stopReason?: string | null;
  /** The graph of the contact's version. */
  graph?: SequenceGraph;
  /** A failed contact's browser step (its status only), null when gone. */
  failedStep?: { status: string } | null;
  /** Whether the branch step's condition holds (connected, replied, opened). */
  branchHolds?: boolean;
  /** The audience row's cells now (the enrolment snapshot when the row is gone). */
  liveCells?: Record<string, unknown>;
  sender?: AdvanceSender;
  send?: AdvanceSend | null;
  /** The contact's browser step of a pnet step, null when gone. */
  browserStep?: AdvanceBrowserStep | null;
  /** The step's saved template, null when deleted. */
  template?: AdvanceTemplate | null;
  /** outreachBlock() right before queueing a pnet step: why the person must not be reached, or null. */
  outreachBlock?: string | null;
}

// ---------------------------------------------------------------------------------------------
// Decisions

type PlainFact =
  | 'sequence'
  | 'stop_reason'
  | 'graph'
  | 'failed_step'
  | 'live_cells'
  | 'sender'
  | 'send'
  | 'browser_step'
  | 'outreach_block';

/** A fact to read before deciding further. */
export type AdvanceFact =
  | { kind: 'read'; fact: PlainFact }
  | { kind: 'read'; fact: 'branch'; condition: Exclude<BranchCondition, 'email_found'> }
  | { kind: 'read'; fact: 'template'; templateId: string };

/** Writes after which the decision goes on (see `afterWrite`). */
export type AdvanceWrite =
  | { kind: 'start_at'; stepId: string }
  | { kind: 'resume' }
  | { kind: 'start_timer'; stepId: string; until: Date }
  | { kind: 'record_email'; email: string };

/** The contact's wait; `write` is false when the row already says so. */
export interface Wait {
  reason: string;
  until: Date | null;
  write: boolean;
}

/** The outbound agent's request for a step's message (the activity's WriteStepMessageInput). */
export interface WriteRequest {
  workspaceId: string;
  agentId: string;
  sequenceId: string;
  contactKey: string;
  slotKey: string;
  kind: MessageKind;
  contact: ContactInput;
}

export type AdvanceMove =
  /** No such contact. */
  | { kind: 'missing' }
  /** A send claimed by a worker that died mid-exchange: the mailer settles it before anything else. */
  | { kind: 'settle_claimed_send'; sendId: string }
  /** Completed already: nothing to write. */
  | { kind: 'completed' }
  /** Stopped already (a person, the mailer): its waiting pnet steps are cancelled. */
  | { kind: 'stopped'; reason: string | null }
  /** Stop now: the contact, its open messages, and its waiting pnet steps. */
  | { kind: 'stop'; reason: string }
  | { kind: 'wait'; wait: Wait }
  /** The contact's step is not in its version. */
  | { kind: 'fail_missing_step'; error: string; wait: Wait }
  /** Its pnet step failed, was cancelled or vanished: it waits for a person to retry. */
  | { kind: 'fail_step'; error: string; wait: Wait }
  | { kind: 'complete' }
  /** To the next step; `appendDone` records a performed action step, `reached` the last reach. */
  | { kind: 'move_on'; from: string; to: string; appendDone: boolean; reached: boolean }
  | { kind: 'write_message'; stepId: string; version: number; input: WriteRequest }
  | {
      kind: 'insert_send';
      stepId: string;
      channel: 'email' | 'pnet';
      sendKind: 'email' | SequencePnetAction;
      status: 'awaiting_approval' | 'approved';
      reason: string | null;
      subject: string | null;
      body: string;
    }
  | { kind: 'send_email'; sendId: string }
  /** Its pnet step still waits: the contact waits on it (and its workflow is started if it is not). */
  | { kind: 'follow_step'; wait: Wait }
  /** A message the network cannot take goes back to a person. */
  | { kind: 'return_for_edit'; sendId: string; reason: string; wait: Wait }
  /** Queue the pnet step (awaiting the sender's approval, or queued with its credit hold). */
  | {
      kind: 'queue_pnet_step';
      stepId: string;
      action: SequencePnetAction;
      params: StepParams;
      awaiting: boolean;
      retryAt: Date;
    };

export type AdvanceDecision = AdvanceFact | AdvanceWrite | AdvanceMove;

/** Browser-step statuses of a step still to run: the contact waits on it. */
export const waitingStepStatuses: ReadonlySet<string> = new Set(['awaiting_approval', 'queued', 'resuming', 'claimed']);
/** How long a contact whose pnet step found too few credits waits before it tries again. */
export const insufficientCreditsRetryMs = 3_600_000;

export const agentKindOf = (step: SequenceStep): MessageKind =>
  step.type === 'email'
    ? 'email'
    : step.type === 'pnet' && step.action === 'connection_request'
      ? 'connection_note'
      : 'pnet_message';

const read = (fact: PlainFact): AdvanceFact => ({ kind: 'read', fact });

const waitFor = (c: AdvanceContact, reason: string, until: Date | null = null): Wait => ({
  reason,
  until,
  write: c.wait_reason !== reason || c.wait_until?.getTime() !== until?.getTime(),
});
const wait = (c: AdvanceContact, reason: string, until: Date | null = null): AdvanceMove => ({
  kind: 'wait',
  wait: waitFor(c, reason, until),
});

/**
 * An action step joins done_steps when performed, so no version repeats it. (A step already
 * there is passed over before it can be performed again, so the de-duplication is a guard only.)
 */
const moveOn = (
  c: AdvanceContact,
  from: SequenceStep,
  to: string,
  performed: boolean,
  reached = false,
): AdvanceMove => ({
  kind: 'move_on',
  from: from.id,
  to,
  appendDone: performed && !c.done_steps.includes(from.id),
  reached,
});

type MessageStep = Extract<SequenceStep, { type: 'email' | 'pnet' }>;

const sendOf = (
  step: MessageStep,
  hold: string | null,
  message: { subject: string | null; body: string },
): Extract<AdvanceMove, { kind: 'insert_send' }> => ({
  kind: 'insert_send',
  stepId: step.id,
  channel: step.type === 'email' ? 'email' : 'pnet',
  sendKind: step.type === 'email' ? 'email' : step.action,
  status: hold ? 'awaiting_approval' : 'approved',
  reason: hold,
  subject: message.subject,
  body: message.body,
});

/** The next thing to read, write or do for a contact; pure. */
export function decideAdvance(s: AdvanceSnapshot, now: Date): AdvanceDecision {
  const c = s.contact;
  if (!c) return { kind: 'missing' };
  // A send claimed by a worker that died during the SMTP exchange: after the restart this runs
  // before the send is tried again, so the mailer settles it first (sent, unconfirmed: it may have
  // been delivered, and it was claimed before anything that stops the contact now). Otherwise a
  // stop recorded meanwhile would leave it claimed for good.
  if (s.claimedSendId) return { kind: 'settle_claimed_send', sendId: s.claimedSendId };
  if (c.status === 'completed') return { kind: 'completed' };
  // Stopped by a person (or the mailer): its waiting pnet steps still go.
  if (c.status === 'stopped') return { kind: 'stopped', reason: c.stop_reason };

  if (s.sequence === undefined) return read('sequence');
  if (s.stopReason === undefined) return read('stop_reason');
  const seq = s.sequence;
  // A reply, bounce, stop or do-not-contact entry wins over whatever step comes next.
  const stopReason = s.stopReason ?? (seq.status === 'archived' ? 'archived' : null);
  if (stopReason) return { kind: 'stop', reason: stopReason };
  if (c.status === 'paused') return wait(c, 'paused');
  if (seq.status === 'paused' || seq.status === 'draft') return wait(c, `sequence_${seq.status}`);

  if (s.graph === undefined) return read('graph');
  if (c.current_step_id === null) return { kind: 'start_at', stepId: s.graph.start };
  const step = stepById(s.graph, c.current_step_id);
  if (!step)
    return {
      kind: 'fail_missing_step',
      error: `Step "${c.current_step_id}" is not in version ${c.version}`,
      wait: waitFor(c, 'failed_step'),
    };

  if (c.status === 'failed') {
    // A person may have retried the failed browser step itself: the contact follows it.
    if (c.browser_step_id && s.failedStep === undefined) return read('failed_step');
    const bs = c.browser_step_id ? s.failedStep : null;
    if (!bs || bs.status === 'failed' || bs.status === 'cancelled') return wait(c, 'failed_step');
    return { kind: 'resume' };
  }

  switch (step.type) {
    case 'end':
      return { kind: 'complete' };
    case 'branch': {
      if (step.condition === 'email_found' && !c.email) {
        // An enrichment may have found it since enrolment: the row is read again.
        if (s.liveCells === undefined) return read('live_cells');
        const email = contactFieldsOf(s.liveCells, AudienceMappingSchema.parse(seq.audience_mapping)).email;
        if (email) return { kind: 'record_email', email };
        return moveOn(c, step, step.if_false, false);
      }
      if (step.condition === 'email_found') return moveOn(c, step, step.if_true, false);
      if (s.branchHolds === undefined) return { kind: 'read', fact: 'branch', condition: step.condition };
      return moveOn(c, step, s.branchHolds ? step.if_true : step.if_false, false);
    }
    case 'wait': {
      const until = c.wait_step_id === step.id && c.wait_until ? c.wait_until : null;
      if (!until) {
        if (s.sender === undefined) return read('sender');
        return { kind: 'start_timer', stepId: step.id, until: waitUntil(now, step, s.sender.timezone) };
      }
      if (until.getTime() <= now.getTime()) return moveOn(c, step, step.next, false);
      return wait(c, 'timer', until);
    }
    default:
      return decideAction(s, c, seq, step, now);
  }
}

function decideAction(
  s: AdvanceSnapshot,
  c: AdvanceContact,
  seq: AdvanceSequence,
  step: MessageStep,
  now: Date,
): AdvanceDecision {
  // An action step: never twice for one contact, whichever version it is on now.
  if (c.done_steps.includes(step.id)) return moveOn(c, step, step.next, false);
  if (s.sender === undefined) return read('sender');
  if (s.send === undefined) return read('send');
  const sender = s.sender;
  const send = s.send;
  const carriesMessage = step.type === 'email' || messageActions.includes(step.action);

  if (step.type === 'pnet' && c.browser_step_id) {
    if (s.browserStep === undefined) return read('browser_step');
    const bs = s.browserStep;
    if (bs && waitingStepStatuses.has(bs.status)) return { kind: 'follow_step', wait: waitFor(c, 'pnet_step') };
    if (bs && (bs.status === 'succeeded' || bs.status === 'skipped'))
      return moveOn(c, step, step.next, true, bs.status === 'succeeded');
    if (bs && bs.status === 'rejected') return moveOn(c, step, step.next, false);
    // Failed or cancelled: the contact stops at this step until a person retries.
    const error = `The ${step.action} step ${bs?.status ?? 'vanished'}${bs?.error_code ? ` (${bs.error_code})` : ''}`;
    return { kind: 'fail_step', error, wait: waitFor(c, 'failed_step') };
  }

  if (step.type === 'email' && !c.email) return moveOn(c, step, step.next, false);
  if (step.type === 'pnet' && (!c.profile_url || !sender.account_id)) return moveOn(c, step, step.next, false);

  if (carriesMessage && !send) return decideMessage(s, c, seq, sender, step);
  if (send) {
    switch (send.status) {
      case 'awaiting_approval':
        return wait(c, 'approval');
      case 'rejected':
        return moveOn(c, step, step.next, false);
      case 'stopped':
        return wait(c, 'stopped');
      case 'sent':
        return moveOn(c, step, step.next, true, true);
      default:
        if (step.type === 'email') return { kind: 'send_email', sendId: send.id };
    }
  }
  // A pnet action whose message (if any) is approved: re-check the person, then queue it.
  if (s.outreachBlock === undefined) return read('outreach_block');
  if (s.outreachBlock) return { kind: 'stop', reason: s.outreachBlock };
  // An email step never gets here (it answered above, with its send or without one); kept as a guard.
  if (step.type !== 'pnet') return wait(c, 'approval');

  const parsed = StepParamsSchema.safeParse({
    kind: step.action,
    profile_url: c.profile_url,
    ...(step.action === 'profile_view' ? { read_relationship: true } : {}),
    ...(step.action === 'connection_request' ? { note: send?.body ? send.body : null } : {}),
    ...(step.action === 'send_message' || step.action === 'inmail' ? { body: send?.body ?? '' } : {}),
    ...(step.action === 'inmail' ? { subject: send?.subject ?? '' } : {}),
  });
  if (!parsed.success) {
    const error = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    // A message the network cannot take (a note over 300 characters, an empty message): a person edits it.
    if (send && carriesMessage)
      return {
        kind: 'return_for_edit',
        sendId: send.id,
        reason: `invalid_message: ${error}`,
        wait: waitFor(c, 'approval'),
      };
    // Params no edit can fix (a malformed profile URL): the step is passed over.
    return moveOn(c, step, step.next, false);
  }
  // The sender's own approval setting applies unless a person already approved this message here
  // (a message approved in the queue is not put on the Tasks page a second time).
  const approvedByPerson = send?.decided_at != null;
  return {
    kind: 'queue_pnet_step',
    stepId: step.id,
    action: step.action,
    params: parsed.data,
    awaiting: !approvedByPerson && sender.account_run_mode === 'manual',
    retryAt: new Date(now.getTime() + insufficientCreditsRetryMs),
  };
}

/** The message of a step with no send yet: rendered from its template, or asked of the agent. */
function decideMessage(
  s: AdvanceSnapshot,
  c: AdvanceContact,
  seq: AdvanceSequence,
  sender: AdvanceSender,
  step: MessageStep,
): AdvanceDecision {
  if (s.liveCells === undefined) return read('live_cells');
  const cells = s.liveCells;
  const mode = step.type === 'email' ? seq.email_mode : seq.pnet_mode;
  const held = (hold: string | null) => hold ?? (mode === 'manual' ? 'manual_mode' : null);
  if (step.writer === 'agent') {
    if (!seq.outbound_agent_id) return sendOf(step, held('no_outbound_agent'), { subject: null, body: '' });
    const fields: Record<string, string> = {};
    for (const [k, v] of Object.entries(cells))
      if (v !== null && v !== undefined) fields[k] = typeof v === 'string' ? v : JSON.stringify(v);
    if (c.company_name) fields.company_name = c.company_name;
    const name = [c.first_name, c.last_name].filter(Boolean).join(' ');
    return {
      kind: 'write_message',
      stepId: step.id,
      version: c.version,
      input: {
        workspaceId: c.workspace_id,
        agentId: seq.outbound_agent_id,
        sequenceId: c.sequence_id,
        contactKey: c.contact_key,
        slotKey: step.id,
        kind: agentKindOf(step),
        contact: {
          ...(name ? { name } : {}),
          ...(c.email ? { email: c.email } : {}),
          ...(c.profile_url ? { profileUrl: c.profile_url } : {}),
          fields,
        },
      },
    };
  }
  let template: AdvanceTemplate = step;
  if (step.template_id) {
    if (s.template === undefined) return { kind: 'read', fact: 'template', templateId: step.template_id };
    if (!s.template) return sendOf(step, held('template_deleted'), { subject: null, body: '' });
    template = s.template;
  }
  const rendered = renderMessage(template, {
    contactKey: c.contact_key,
    contact: c,
    sender: { name: sender.from_name ?? sender.name, email: sender.from_email },
    columns: cells,
  });
  const subject = step.type === 'email' || step.action === 'inmail' ? rendered.subject : null;
  return sendOf(step, held(rendered.missing.length > 0 ? `missing_values: ${rendered.missing.join(', ')}` : null), {
    subject,
    body: rendered.body,
  });
}

/**
 * The send of a message the outbound agent wrote for a step: a doubtful one, or any in a manual
 * channel, waits for a person.
 */
export function writtenSend(
  step: MessageStep,
  seq: Pick<AdvanceSequence, 'email_mode' | 'pnet_mode'>,
  written: { subject: string | null; body: string; needsReview: boolean; reason: string | null },
): Extract<AdvanceMove, { kind: 'insert_send' }> {
  const mode = step.type === 'email' ? seq.email_mode : seq.pnet_mode;
  const hold = written.needsReview
    ? `agent_review: ${written.reason ?? 'needs review'}`
    : mode === 'manual'
      ? 'manual_mode'
      : null;
  return sendOf(step, hold, { subject: written.subject, body: written.body });
}

/** The snapshot as a `continue` write leaves the contact row. */
export function afterWrite(s: AdvanceSnapshot, write: AdvanceWrite): AdvanceSnapshot {
  const c = s.contact!;
  switch (write.kind) {
    case 'start_at':
      return { ...s, contact: { ...c, current_step_id: write.stepId } };
    case 'resume':
      return { ...s, contact: { ...c, status: 'active' } };
    case 'start_timer':
      return { ...s, contact: { ...c, wait_step_id: write.stepId, wait_until: write.until } };
    case 'record_email':
      return { ...s, contact: { ...c, email: write.email } };
  }
}

export const isFact = (d: AdvanceDecision): d is AdvanceFact => d.kind === 'read';
export const isWrite = (d: AdvanceDecision): d is AdvanceWrite =>
  d.kind === 'start_at' || d.kind === 'resume' || d.kind === 'start_timer' || d.kind === 'record_email';
