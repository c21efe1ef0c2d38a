/**
 * A sequence contact's progression, one guarded transition per call (`advanceContact`), and the
 * message the outbound agent wrote for a step stored as the step's send (`recordWrittenMessage`).
 * Postgres holds where the contact stands (step, version, steps done, what it waits on); the
 * contact's workflow (`sequence-contact/<sequence_id>/<contact_id>`) only owns time (its timers)
 * and asks for a transition until the contact is done. Every call locks the contact row, so a
 * retried or duplicated call can never move a contact twice, and reads contact_stop_reason()
 * first, so a reply, bounce, stop or do-not-contact entry wins over whatever step comes next. The
 * statements are store/sequences/contact-moves.ts; the decisions domain/sequences/advance.ts.
 */
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { FinalStatement, commitWith, transaction, type Db } from '../../db/sql.js';
import {
  afterWrite,
  decideAdvance,
  isFact,
  isWrite,
  writtenSend,
  type AdvanceMove,
  type AdvanceSnapshot,
  type Wait,
  type WriteRequest,
} from '../../domain/sequences/advance.js';
import { messageIdOf, stepById } from '../../domain/sequences/sequences.js';
import type { StepRow } from '../../store/pnet/steps.js';
import {
  activeStepsOf,
  completeContact,
  failAtMissingStep,
  failAtStep,
  insertSend,
  lockContact,
  lockContactRow,
  markReached,
  moveOn,
  queuePnetStep,
  readBranchCondition,
  readBrowserStep,
  readGraph,
  readLiveCells,
  readSend,
  readSender,
  readSequence,
  readStepStatus,
  readStopReason,
  readTemplate,
  recordEmail,
  resumeContact,
  returnSendForEdit,
  setStartStep,
  setWait,
  startTimer,
  stopContact,
} from '../../store/sequences/contact-moves.js';
import { outreachBlock } from '../../store/sequences/sequences.js';
import { cancelStepUpdate } from '../../workflows/pnet/browser-step.contract.js';
import type { ServiceDeps } from '../deps.js';
import { startStepWorkflow, updateStep } from '../pnet/browser-step-client.js';

/** What the contact's workflow does next. */
export type ContactAction =
  | { kind: 'done'; status: string; reason: string | null }
  | { kind: 'next' }
  | { kind: 'wait'; reason: string; until: string | null }
  | { kind: 'send_email'; sendId: string }
  | { kind: 'write'; stepId: string; version: number; input: WriteRequest };

type Deps = Pick<ServiceDeps, 'sql' | 'temporal'>;

/** A move's answer, and the pnet steps to start and cancel once it has committed. */
type Advanced = { action: ContactAction; cancel: StepRow[]; start: StepRow | null };

/**
 * One transition of a contact at `now` (the workflow's clock: a wait's end is computed from it, so
 * time-skipping tests and replays read the same time). The move commits first; only then is the
 * pnet step it follows started again, and the steps a stop leaves waiting cancelled.
 * `messageDomain` is the Message-ID domain of sequence emails.
 */
export async function advanceContact(
  { sql, temporal }: Deps,
  messageDomain: string,
  contactId: string,
  now: Date,
): Promise<ContactAction> {
  const result = await advance(sql, messageDomain, contactId, now);
  if (result.start) await startStepWorkflow({ ...temporal, sql }, result.start);
  if (result.cancel.length > 0) await cancelSteps({ sql, temporal }, result.cancel);
  return result.action;
}

/** Cancels a stopped contact's waiting pnet steps through their workflows. */
async function cancelSteps({ sql, temporal }: Deps, rows: StepRow[]) {
  for (const row of rows) {
    await updateStep({ ...temporal, sql }, row, cancelStepUpdate, `contact-stopped:${row.id}`, [
      { errorCode: 'cancelled' },
    ]).catch((error: unknown) => {
      // Claimed or settled meanwhile: its own workflow ends it.
      if (!(error instanceof WorkflowUpdateFailedError)) throw error;
    });
  }
}

/**
 * One move in one transaction: the contact row is locked first, then decideAdvance asks for
 * the facts it needs one statement at a time (each after the lock, on a fresh snapshot), the
 * writes it goes on after are applied as they come, and its final decision is applied last.
 * A pnet step's queueing is the statement sent with the COMMIT; nothing follows it.
 */
async function advance(sql: Deps['sql'], domain: string, contactId: string, now: Date): Promise<Advanced> {
  return transaction(sql, async (tx) => {
    const locked = await lockContact(tx, contactId);
    let snap: AdvanceSnapshot = { contact: locked ?? null, claimedSendId: locked?.claimed_send_id ?? null };
    // The contact's browser step as read, whole: a step still waiting is started again if need be.
    let browserStep: StepRow | null = null;
    for (;;) {
      const d = decideAdvance(snap, now);
      const c = snap.contact!;
      if (isFact(d)) {
        switch (d.fact) {
          case 'sequence':
            snap = { ...snap, sequence: await readSequence(tx, c) };
            break;
          case 'stop_reason':
            snap = { ...snap, stopReason: await readStopReason(tx, c) };
            break;
          case 'graph':
            snap = { ...snap, graph: await readGraph(tx, c) };
            break;
          case 'failed_step':
            snap = { ...snap, failedStep: await readStepStatus(tx, c.browser_step_id!) };
            break;
          case 'branch':
            snap = { ...snap, branchHolds: await readBranchCondition(tx, c, d.condition) };
            break;
          case 'live_cells':
            snap = { ...snap, liveCells: await readLiveCells(tx, c) };
            break;
          case 'sender':
            snap = { ...snap, sender: await readSender(tx, c) };
            break;
          case 'send':
            snap = { ...snap, send: await readSend(tx, c.id, c.current_step_id!) };
            break;
          case 'browser_step':
            browserStep = await readBrowserStep(tx, c.browser_step_id!);
            snap = { ...snap, browserStep };
            break;
          case 'template':
            snap = { ...snap, template: await readTemplate(tx, c.workspace_id, d.templateId) };
            break;
          case 'outreach_block': {
            const who = {
              email: c.email,
              profile_url: c.profile_url,
              sequence_id: c.sequence_id,
              contact_id: c.id,
              since: c.enrolled_at,
            };
            snap = { ...snap, outreachBlock: await outreachBlock(tx, c.workspace_id, who) };
            break;
          }
        }
        continue;
      }
      if (isWrite(d)) {
        switch (d.kind) {
          case 'start_at':
            await setStartStep(tx, c.id, d.stepId);
            break;
          case 'resume':
            await resumeContact(tx, c.id);
            break;
          case 'start_timer':
            await startTimer(tx, c.id, d.stepId, d.until);
            break;
          case 'record_email':
            await recordEmail(tx, c.id, d.email);
            break;
        }
        snap = afterWrite(snap, d);
        continue;
      }
      return applyMove(tx, domain, snap, d, browserStep);
    }
  });
}

/** The move's final statements, in the transaction, and what the workflow does next. */
async function applyMove(
  tx: Db,
  domain: string,
  snap: AdvanceSnapshot,
  d: AdvanceMove,
  browserStep: StepRow | null,
): Promise<Advanced | FinalStatement<Advanced>> {
  const answer = (action: ContactAction, cancel: StepRow[] = [], start: StepRow | null = null): Advanced => ({
    action,
    cancel,
    start,
  });
  const waiting = async (contactId: string, wait: Wait) => {
    await setWait(tx, contactId, wait);
    return answer({ kind: 'wait', reason: wait.reason, until: wait.until?.toISOString() ?? null });
  };
  if (d.kind === 'missing') return answer({ kind: 'done', status: 'missing', reason: null });
  const c = snap.contact!;
  switch (d.kind) {
    case 'settle_claimed_send':
      return answer({ kind: 'send_email', sendId: d.sendId });
    case 'completed':
      return answer({ kind: 'done', status: 'completed', reason: null });
    case 'stopped':
      return answer({ kind: 'done', status: 'stopped', reason: d.reason }, await activeStepsOf(tx, c));
    case 'stop':
      return answer({ kind: 'done', status: 'stopped', reason: d.reason }, await stopContact(tx, c, d.reason));
    case 'wait':
      return waiting(c.id, d.wait);
    case 'fail_missing_step':
      await failAtMissingStep(tx, c.id, d.error);
      return waiting(c.id, d.wait);
    case 'fail_step':
      await failAtStep(tx, c.id, d.error);
      return waiting(c.id, d.wait);
    case 'complete':
      await completeContact(tx, c.id);
      return answer({ kind: 'done', status: 'completed', reason: null });
    case 'move_on':
      if (d.reached) await markReached(tx, c.id);
      await moveOn(tx, c.id, d);
      return answer({ kind: 'next' });
    case 'write_message':
      return answer({ kind: 'write', stepId: d.stepId, version: d.version, input: d.input });
    case 'insert_send':
      await insertSend(tx, c, d, snap.sender!.from_email, messageIdOf(c.id, d.stepId, c.version, domain));
      // A message held for a person: the contact waits on it in the same transaction, so the
      // approval queue never lists a message whose contact does not yet say it waits for one.
      if (d.status === 'awaiting_approval') return waiting(c.id, { reason: 'approval', until: null, write: true });
      return answer({ kind: 'next' });
    case 'send_email':
      return answer({ kind: 'send_email', sendId: d.sendId });
    case 'follow_step':
      return { ...(await waiting(c.id, d.wait)), start: browserStep };
    case 'return_for_edit':
      await returnSendForEdit(tx, d.sendId, d.reason);
      return waiting(c.id, d.wait);
    case 'queue_pnet_step': {
      // The queueing goes out with the COMMIT (queuePnetStep): the move's last statement.
      return commitWith(queuePnetStep(tx, c, snap.sender!.account_id, d), ([row]) =>
        row
          ? answer({ kind: 'wait', reason: 'pnet_step', until: null }, [], row)
          : answer({ kind: 'wait', reason: 'insufficient_credits', until: d.retryAt.toISOString() }),
      );
    }
  }
}

/**
 * Stores what the outbound agent wrote for a step as the step's message (manual mode or a doubtful
 * message waits for a person); nothing when the contact has moved on from that step or version.
 */
export async function recordWrittenMessage(
  { sql }: Pick<ServiceDeps, 'sql'>,
  messageDomain: string,
  {
    contactId,
    stepId,
    version,
    written,
  }: {
    contactId: string;
    stepId: string;
    version: number;
    /** The outbound agent's message (its writeStepMessage activity's answer). */
    written: { subject: string | null; body: string; needsReview: boolean; reason: string | null };
  },
): Promise<void> {
  await sql.begin(async (tx) => {
    const c = await lockContactRow(tx, contactId);
    if (!c || c.version !== version || (c.current_step_id ?? '') !== stepId) return;
    const seq = await readSequence(tx, c);
    const step = stepById(await readGraph(tx, c), stepId);
    if (!step || (step.type !== 'email' && step.type !== 'pnet')) return;
    const send = writtenSend(step, seq, written);
    await insertSend(
      tx,
      c,
      send,
      (await readSender(tx, c)).from_email,
      messageIdOf(c.id, stepId, c.version, messageDomain),
    );
  });
}
