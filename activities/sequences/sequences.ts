/**
 * A sequence contact's progression, one guarded transition per call. Postgres holds where the
 * contact stands (step, version, steps done, what it waits on); the contact's workflow only owns
 * time (its timers) and calls `advanceSequenceContact` until the contact is done. Every call locks
 * the contact row, so a retried or duplicated call can never move a contact twice, and reads
 * contact_stop_reason() first, so a reply, bounce, stop or do-not-contact entry wins over
 * whatever step comes next.
 */
import { Context } from '@temporalio/activity';
import { WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { FinalStatement, commitWith, transaction, type Db, type Sql } from '../../db/sql.js';
import {
  afterWrite,
  decideAdvance,
  isFact,
  isWrite,
  writtenSend,
  type AdvanceMove,
  type AdvanceSnapshot,
  type Wait,
} from '../../domain/sequences/advance.js';
import { messageIdOf, stepById } from '../../domain/sequences/sequences.js';
import { startStepWorkflow, updateStep } from '../../services/pnet/browser-step-client.js';
import { enrolRows, outreachBlock } from '../../store/sequences/sequences.js';
import { advanceFeedCursor, audienceRowsAfter, readFeed } from '../../store/sequences/feed.js';
import { contactsOfSteps } from '../../store/sequences/step-wakes.js';
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
import { startContacts } from '../../services/sequences/sequence-client.js';
import { cancelStepUpdate } from '../../workflows/pnet/browser-step.contract.js';
import { sequenceContactWorkflowId } from '../../workflows/sequences/sequence-contact.contract.js';
import type { StepRow } from '../../store/pnet/steps.js';
import type { WriteStepMessageInput, WriteStepMessageResult } from '../agents/outbound-agent.js';
import { afterStepTransitions } from '../pnet/steps.js';

/** What the contact's workflow does next. */
export type ContactAction =
  | { kind: 'done'; status: string; reason: string | null }
  | { kind: 'next' }
  | { kind: 'wait'; reason: string; until: string | null }
  | { kind: 'send_email'; sendId: string }
  | { kind: 'write'; stepId: string; version: number; input: WriteStepMessageInput };

export interface SequenceActivityDeps {
  sql: Sql;
  /** The Message-ID domain of sequence emails. */
  messageDomain?: string;
  /** The Temporal client for browser steps and wake-ups; the worker's own when omitted. */
  client?: () => Client;
}

export function createSequenceActivities(deps: SequenceActivityDeps) {
  const { sql } = deps;
  const domain = deps.messageDomain ?? 'sequences.local';
  const client = () => deps.client?.() ?? Context.current().client;
  const taskQueue = () => Context.current().info.taskQueue;

  async function cancelSteps(rows: StepRow[]) {
    for (const row of rows) {
      await updateStep(
        { client: client(), taskQueue: taskQueue(), sql },
        row,
        cancelStepUpdate,
        `contact-stopped:${row.id}`,
        [{ errorCode: 'cancelled' }],
      ).catch((error: unknown) => {
        // Claimed or settled meanwhile: its own workflow ends it.
        if (!(error instanceof WorkflowUpdateFailedError)) throw error;
      });
    }
  }

  type Advanced = { action: ContactAction; cancel: StepRow[]; start: StepRow | null };

  /**
   * One move in one transaction: the contact row is locked first, then decideAdvance asks for
   * the facts it needs one statement at a time (each after the lock, on a fresh snapshot), the
   * writes it goes on after are applied as they come, and its final decision is applied last.
   * A pnet step's queueing is the statement sent with the COMMIT; nothing follows it.
   */
  async function advance(contactId: string, now: Date): Promise<Advanced> {
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
        return applyMove(tx, snap, d, browserStep);
      }
    });
  }

  async function applyMove(
    tx: Db,
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

  return {
    /**
     * One transition of a contact. `now` is the workflow's clock (a wait's end is computed from
     * it, so time-skipping tests and replays read the same time).
     */
    async advanceSequenceContact({ contactId, now }: { contactId: string; now: string }): Promise<ContactAction> {
      const result = await advance(contactId, new Date(now));
      if (result.start) await startStepWorkflow({ client: client(), taskQueue: taskQueue(), sql }, result.start);
      if (result.cancel.length > 0) await cancelSteps(result.cancel);
      return result.action;
    },

    /**
     * Enrols the audience rows added since the feed last read (at most `batch`), and starts their
     * contacts. The cursor moves only after the enrolment, which is idempotent per row, so a
     * retry after a crash enrols nothing twice and still starts every contact.
     */
    async feedSequence({
      sequenceId,
      batch = 500,
    }: {
      sequenceId: string;
      batch?: number;
    }): Promise<{ feeding: boolean; enrolled: number; more: boolean }> {
      const seq = await readFeed(sql, sequenceId);
      if (!seq || !seq.feed_new_rows || !seq.audience_table_id || seq.status === 'archived')
        return { feeding: false, enrolled: 0, more: false };
      const rows = await audienceRowsAfter(sql, seq.audience_table_id, seq.feed_cursor, batch);
      if (rows.length === 0) return { feeding: true, enrolled: 0, more: false };
      const { results } = await enrolRows(
        sql,
        seq.workspace_id,
        sequenceId,
        rows.map((r) => r.id),
        null,
      );
      const live = results.flatMap((r) =>
        r.contact && ['active', 'paused', 'failed'].includes(r.contact.status)
          ? [{ ...r.contact, workspace_id: seq.workspace_id }]
          : [],
      );
      await startContacts(client(), taskQueue(), live);
      await advanceFeedCursor(sql, sequenceId, rows[rows.length - 1]!.seq);
      return {
        feeding: true,
        enrolled: results.filter((r) => r.status === 'enrolled').length,
        more: rows.length === batch,
      };
    },

    /** Stores what the outbound agent wrote for a step as the step's message (manual mode or a doubtful message waits for a person). */
    async recordWrittenMessage({
      contactId,
      stepId,
      version,
      written,
    }: {
      contactId: string;
      stepId: string;
      version: number;
      written: WriteStepMessageResult;
    }): Promise<void> {
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
          messageIdOf(c.id, stepId, c.version, domain),
        );
      });
    },
  };
}
export type SequenceActivities = ReturnType<typeof createSequenceActivities>;

/** The contact workflows to wake: the contact of each step id given (for the pnet settle hook). */
export async function wakeContactsOfSteps(sql: Sql, client: Client, stepIds: string[]): Promise<void> {
  if (stepIds.length === 0) return;
  const rows = await contactsOfSteps(sql, stepIds);
  for (const r of rows) {
    await client.workflow
      .getHandle(sequenceContactWorkflowId(r.sequence_id, r.id))
      .signal('wake')
      .catch(() => undefined); // a closed workflow has nothing to wake; the contact re-checks on its own poll
  }
}

/**
 * Wraps the pnet step activities so a step of a sequence contact wakes that contact's workflow
 * once it settles (or is retried): the contact waits for its step without polling.
 */
export function withSequenceWake<T extends object>(activities: T, sql: Sql): T {
  return afterStepTransitions(
    activities,
    ['readStepChange', 'expireClaim', 'missWindow', 'rejectStep', 'cancelStep', 'retryStep'],
    async (stepId, step) => {
      // A transition that answers the record shows whether the step belongs to a sequence: a step
      // outside one has no contact to wake, and the look-up would cost every settle a round trip.
      if (step && step.sequence_id === null) return;
      await wakeContactsOfSteps(sql, Context.current().client, [stepId]).catch(() => undefined);
    },
  );
}
