/**
 * A sequence contact's progression, one guarded transition per call. Postgres holds where the
 * contact stands (step, version, steps done, what it waits on); the contact's workflow only owns
 * time (its timers) and calls `advanceSequenceContact` until the contact is done. Every call locks
 * the contact row, so a retried or duplicated call can never move a contact twice, and reads
 * contact_stop_reason() first, so a reply, bounce, stop or do-not-contact entry wins over
 * whatever step comes next.
 */
import { Context } from '@temporalio/activity';
import { randomUUID } from 'node:crypto';
import { WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { transaction, type CommitWith, type Db, type Sql } from '../../db/sql.js';
import { renderMessage, type TemplateSegmentInput } from '../../domain/inbox/email-templates.js';
import { StepParamsSchema } from '../../domain/pnet/steps.js';
import {
    AudienceMappingSchema,
    messageActions,
    messageIdOf,
    sequenceContactWorkflowId,
    stepById,
    waitUntil,
    type SequenceGraph,
    type SequenceStep,
} from '../../domain/sequences/sequences.js';
import type { MessageKind } from '../../domain/agents/outbound-agents.js';
import { startStepWorkflow, updateStep } from '../../services/pnet/browser-step-client.js';
import { contactFieldsOf, enrolRows, outreachBlock, type ContactRow } from '../../store/sequences/sequences.js';
import { startContacts } from '../../services/sequences/sequence-client.js';
import { cancelStepUpdate } from '../../workflows/pnet/browser-step.js';
import { stepHold, type StepRow } from '../../store/pnet/steps.js';
import { holdCtes } from '../../store/platform/credits.js';
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

interface SequenceInfo {
  status: 'draft' | 'active' | 'paused' | 'archived';
  email_mode: 'manual' | 'automatic';
  pnet_mode: 'manual' | 'automatic';
  audience_mapping: unknown;
  audience_table_id: string | null;
  outbound_agent_id: string | null;
}

interface SenderInfo {
  name: string | null;
  timezone: string;
  from_email: string | null;
  from_name: string | null;
  account_id: string | null;
  account_run_mode: 'manual' | 'automatic' | null;
}

const activeStatuses = ['awaiting_approval', 'queued', 'resuming'];
const waitingStatuses = new Set(['awaiting_approval', 'queued', 'resuming', 'claimed']);

const agentKindOf = (step: SequenceStep): MessageKind =>
  step.type === 'email' ? 'email' : step.type === 'pnet' && step.action === 'connection_request' ? 'connection_note' : 'pnet_message';

export function createSequenceActivities(deps: SequenceActivityDeps) {
  const { sql } = deps;
  const domain = deps.messageDomain ?? 'sequences.local';
  const client = () => deps.client?.() ?? Context.current().client;
  const taskQueue = () => Context.current().info.taskQueue;

  async function senderOf(db: Db, c: ContactRow): Promise<SenderInfo> {
    const [row] = await db<SenderInfo[]>`
      select p.name, p.timezone, ss.from_email, ss.from_name, a.id as account_id, a.run_mode as account_run_mode
      from sender_profiles p
      left join sequence_senders ss on ss.sender_profile_id = p.id and ss.sequence_id = ${c.sequence_id}
      left join pnet_accounts a on a.sender_profile_id = p.id
      where p.id = ${c.sender_profile_id}`;
    return row ?? { name: null, timezone: 'UTC', from_email: null, from_name: null, account_id: null, account_run_mode: null };
  }

  /** The audience row as it is now (the enrolment snapshot when the row is gone). */
  async function liveCells(db: Db, c: ContactRow): Promise<Record<string, unknown>> {
    const [row] = await db<{ cells: Record<string, unknown> }[]>`select cells from table_rows where id = ${c.row_id} and workspace_id = ${c.workspace_id}`;
    return row?.cells ?? c.fields;
  }

  async function setWait(db: Db, c: ContactRow, reason: string, until: Date | null): Promise<ContactAction> {
    if (c.wait_reason !== reason || c.wait_until?.getTime() !== until?.getTime()) {
      await db`update sequence_contacts set wait_reason = ${reason}, wait_until = ${until}, updated_at = now() where id = ${c.id}`;
    }
    return { kind: 'wait', reason, until: until?.toISOString() ?? null };
  }

  /** Moves to the step's successor; an action step joins done_steps so no version repeats it. */
  async function moveOn(db: Db, c: ContactRow, from: SequenceStep, to: string, performed: boolean): Promise<ContactAction> {
    await db`
      update sequence_contacts set current_step_id = ${to},
        done_steps = ${performed && !c.done_steps.includes(from.id) ? db`array_append(done_steps, ${from.id})` : db`done_steps`},
        wait_reason = null, wait_until = null, wait_step_id = null, browser_step_id = null, error = null,
        revision = revision + 1, updated_at = now()
      where id = ${c.id}`;
    return { kind: 'next' };
  }

  /** Stops the contact: open messages stop, and its waiting pnet steps are returned to cancel. */
  async function stopContact(db: Db, c: ContactRow, reason: string): Promise<StepRow[]> {
    await db`
      update sequence_contacts set status = 'stopped', stop_reason = ${reason}, wait_reason = null, wait_until = null,
        finished_at = now(), revision = revision + 1, updated_at = now()
      where id = ${c.id}`;
    await db`update sequence_sends set status = 'stopped', reason = ${reason}, updated_at = now()
             where contact_id = ${c.id} and status in ('awaiting_approval', 'approved')`;
    return db<StepRow[]>`select * from browser_steps where workspace_id = ${c.workspace_id} and contact_key = ${c.contact_key} and status in ${db(activeStatuses)}`;
  }

  async function cancelSteps(rows: StepRow[]) {
    for (const row of rows) {
      await updateStep({ client: client(), taskQueue: taskQueue(), sql }, row, cancelStepUpdate, `contact-stopped:${row.id}`, [{ errorCode: 'cancelled' }]).catch((error: unknown) => {
        // Claimed or settled meanwhile: its own workflow ends it.
        if (!(error instanceof WorkflowUpdateFailedError)) throw error;
      });
    }
  }

  async function evaluate(db: Db, c: ContactRow, seq: SequenceInfo, condition: string): Promise<boolean> {
    switch (condition) {
      case 'connected': {
        const [row] = await db<{ yes: boolean }[]>`
          select exists (
            select 1 from browser_steps s
            where s.workspace_id = ${c.workspace_id} and s.contact_key = ${c.contact_key} and s.status = 'succeeded'
              and ((s.outcome->>'already_connected')::boolean
                   or exists (select 1 from pnet_connections pc where pc.account_id = s.account_id and pc.member_urn = s.outcome->>'member_urn'))
          ) as yes`;
        return row!.yes;
      }
      case 'replied': {
        const [row] = await db<{ yes: boolean }[]>`
          select exists (
            select 1 from inbox_messages m
            where m.workspace_id = ${c.workspace_id} and m.direction = 'inbound' and m.kind in ('reply', 'auto_reply') and m.occurred_at >= ${c.enrolled_at}
              and ((m.from_email is not null and m.from_email = normalize_email(${c.email}))
                   or (m.from_profile_url is not null and m.from_profile_url = normalize_profile_url(${c.profile_url})))
          ) as yes`;
        return row!.yes;
      }
      case 'email_found': {
        if (c.email) return true;
        // An enrichment may have found it since enrolment: read the row again.
        const email = contactFieldsOf(await liveCells(db, c), AudienceMappingSchema.parse(seq.audience_mapping)).email;
        if (email) await db`update sequence_contacts set email = ${email} where id = ${c.id}`;
        return email !== null;
      }
      default: {
        const [row] = await db<{ yes: boolean }[]>`select exists (select 1 from sequence_sends where contact_id = ${c.id} and opened_at is not null) as yes`;
        return row!.yes;
      }
    }
  }

  /** Writes the message of a template step, or asks the workflow to have the agent write it. */
  async function prepareMessage(
    db: Db,
    c: ContactRow,
    seq: SequenceInfo,
    sender: SenderInfo,
    step: Extract<SequenceStep, { type: 'email' | 'pnet' }>,
  ): Promise<ContactAction | { subject: string | null; body: string; hold: string | null }> {
    const cells = await liveCells(db, c);
    if (step.writer === 'agent') {
      if (!seq.outbound_agent_id) return { subject: null, body: '', hold: 'no_outbound_agent' };
      const fields: Record<string, string> = {};
      for (const [k, v] of Object.entries(cells)) if (v !== null && v !== undefined) fields[k] = typeof v === 'string' ? v : JSON.stringify(v);
      if (c.company_name) fields.company_name = c.company_name;
      const name = [c.first_name, c.last_name].filter(Boolean).join(' ');
      return {
        kind: 'write',
        stepId: step.id,
        version: c.version,
        input: {
          workspaceId: c.workspace_id,
          agentId: seq.outbound_agent_id,
          sequenceId: c.sequence_id,
          contactKey: c.contact_key,
          slotKey: step.id,
          kind: agentKindOf(step),
          contact: { ...(name ? { name } : {}), ...(c.email ? { email: c.email } : {}), ...(c.profile_url ? { profileUrl: c.profile_url } : {}), fields },
        },
      };
    }
    let template: { subject_segments: TemplateSegmentInput[]; body_segments: TemplateSegmentInput[] } = step;
    if (step.template_id) {
      const [saved] = await db<{ subject_segments: TemplateSegmentInput[]; body_segments: TemplateSegmentInput[] }[]>`
        select subject_segments, body_segments from email_templates where id = ${step.template_id} and workspace_id = ${c.workspace_id}`;
      if (!saved) return { subject: null, body: '', hold: 'template_deleted' };
      template = saved;
    }
    const rendered = renderMessage(template, {
      contactKey: c.contact_key,
      contact: c,
      sender: { name: sender.from_name ?? sender.name, email: sender.from_email },
      columns: cells,
    });
    const subject = step.type === 'email' || (step.type === 'pnet' && step.action === 'inmail') ? rendered.subject : null;
    return { subject, body: rendered.body, hold: rendered.missing.length > 0 ? `missing_values: ${rendered.missing.join(', ')}` : null };
  }

  async function insertSend(
    db: Db,
    c: ContactRow,
    step: Extract<SequenceStep, { type: 'email' | 'pnet' }>,
    sender: SenderInfo,
    message: { subject: string | null; body: string },
    status: 'awaiting_approval' | 'approved',
    reason: string | null,
  ) {
    await db`
      insert into sequence_sends (workspace_id, sequence_id, contact_id, step_id, version, channel, kind, status, reason, message_id,
                                  to_email, from_email, subject, body)
      values (${c.workspace_id}, ${c.sequence_id}, ${c.id}, ${step.id}, ${c.version}, ${step.type === 'email' ? 'email' : 'pnet'},
              ${step.type === 'email' ? 'email' : step.action}, ${status}, ${reason}, ${messageIdOf(c.id, step.id, c.version, domain)},
              ${c.email}, ${sender.from_email}, ${message.subject}, ${message.body})
      on conflict (contact_id, step_id) do nothing`;
  }

  /**
   * The browser step of a pnet action, queued with the statement that commits the contact's
   * transaction: the step, its credit hold (the workspace's balance row, the ledger), the
   * contact's wait and its approved message go out with the COMMIT, so the balance row, which
   * every queue and settle of the workspace locks, is held for the server's time alone. Too few
   * credits writes no step, no hold and no send, and the contact waits `insufficient_credits`
   * for an hour; the rest of the transaction commits all the same.
   */
  async function queuePnetStep(
    db: Db,
    commitWith: CommitWith,
    c: ContactRow,
    sender: SenderInfo,
    step: Extract<SequenceStep, { type: 'pnet' }>,
    message: { subject: string | null; body: string } | null,
    approvedByPerson: boolean,
    now: Date,
  ): Promise<{ error: string } | { action: ContactAction; start: StepRow | null }> {
    const parsed = StepParamsSchema.safeParse({
      kind: step.action,
      profile_url: c.profile_url,
      ...(step.action === 'profile_view' ? { read_relationship: true } : {}),
      ...(step.action === 'connection_request' ? { note: message?.body ? message.body : null } : {}),
      ...(step.action === 'send_message' || step.action === 'inmail' ? { body: message?.body ?? '' } : {}),
      ...(step.action === 'inmail' ? { subject: message?.subject ?? '' } : {}),
    });
    if (!parsed.success) return { error: parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') };
    // The sender's own approval setting applies unless a person already approved this message here.
    const awaiting = !approvedByPerson && sender.account_run_mode === 'manual';
    const id = randomUUID();
    const hold = awaiting ? null : stepHold({ id, workspace_id: c.workspace_id, kind: step.action, credit_round: 0 }, randomUUID());
    const retryAt = new Date(now.getTime() + 3_600_000);
    const [row] = await commitWith(db<StepRow[]>`
      with ${hold ? db`${holdCtes(db, hold)},` : db``} step as (
        insert into browser_steps (id, workspace_id, account_id, kind, params, contact_key, sequence_id, status, metered, queued_at, held, credit_hold_id)
        select ${id}, ${c.workspace_id}, ${sender.account_id}, ${step.action}, ${db.json(parsed.data as never)}, ${c.contact_key}, ${c.sequence_id},
          ${awaiting ? 'awaiting_approval' : 'queued'}, true, ${awaiting ? null : db`now()`},
          pnet_step_held(${c.workspace_id}, ${c.contact_key}, ${c.sequence_id}), ${hold?.id ?? null}::uuid
        ${hold ? db`where exists (select 1 from created)` : db``}
        returning *
      ), contact as (
        update sequence_contacts set browser_step_id = coalesce((select id from step), browser_step_id),
          wait_reason = case when exists (select 1 from step) then 'pnet_step' else 'insufficient_credits' end,
          wait_until = case when exists (select 1 from step) then null else ${retryAt}::timestamptz end, updated_at = now()
        where id = ${c.id}
      ), sent as (
        update sequence_sends m set browser_step_id = s.id, status = 'sent', sent_at = now(), updated_at = now()
        from step s where m.contact_id = ${c.id} and m.step_id = ${step.id} and m.status = 'approved'
      )
      select * from step`);
    if (!row) return { action: { kind: 'wait', reason: 'insufficient_credits', until: retryAt.toISOString() }, start: null };
    return { action: { kind: 'wait', reason: 'pnet_step', until: null }, start: row };
  }

  async function advance(contactId: string, now: Date): Promise<{ action: ContactAction; cancel: StepRow[]; start: StepRow | null }> {
    return transaction(sql, async (tx, commitWith) => {
      const [c] = await tx<(ContactRow & { claimed_send_id: string | null })[]>`
        select c.*, (select id from sequence_sends where contact_id = c.id and status = 'sending' limit 1) as claimed_send_id
        from sequence_contacts c where id = ${contactId} for update`;
      if (!c) return { action: { kind: 'done', status: 'missing', reason: null }, cancel: [], start: null };
      // A send claimed by a worker that died during the SMTP exchange: after the restart this
      // runs before the send is tried again, so the mailer settles it first (sent, unconfirmed:
      // it may have been delivered, and it was claimed before anything that stops the contact
      // now). Otherwise a stop recorded meanwhile would leave it claimed for good.
      if (c.claimed_send_id) return { action: { kind: 'send_email', sendId: c.claimed_send_id }, cancel: [], start: null };
      if (c.status === 'completed') return { action: { kind: 'done', status: c.status, reason: null }, cancel: [], start: null };
      if (c.status === 'stopped') {
        // Stopped by a person (or the mailer): its waiting pnet steps still go.
        const cancel = await tx<StepRow[]>`select * from browser_steps where workspace_id = ${c.workspace_id} and contact_key = ${c.contact_key} and status in ${tx(activeStatuses)}`;
        return { action: { kind: 'done', status: c.status, reason: c.stop_reason }, cancel, start: null };
      }
      const [seq] = await tx<SequenceInfo[]>`select * from sequences where id = ${c.sequence_id}`;
      const [stop] = await tx<{ reason: string | null }[]>`
        select contact_stop_reason(${c.workspace_id}, ${c.email}, ${c.profile_url}, ${c.enrolled_at}, ${c.id}) as reason`;
      const stopReason = stop!.reason ?? (seq!.status === 'archived' ? 'archived' : null);
      if (stopReason) {
        const cancel = await stopContact(tx, c, stopReason);
        return { action: { kind: 'done', status: 'stopped', reason: stopReason }, cancel, start: null };
      }
      const wait = async (reason: string, until: Date | null = null) => ({ action: await setWait(tx, c, reason, until), cancel: [], start: null });
      if (c.status === 'paused') return wait('paused');
      if (seq!.status === 'paused' || seq!.status === 'draft') return wait(`sequence_${seq!.status}`);

      const [v] = await tx<{ graph: SequenceGraph }[]>`select graph from sequence_versions where sequence_id = ${c.sequence_id} and version = ${c.version}`;
      const graph = v!.graph;
      const stepId = c.current_step_id ?? graph.start;
      if (c.current_step_id === null) await tx`update sequence_contacts set current_step_id = ${stepId} where id = ${c.id}`;
      const step = stepById(graph, stepId);
      if (!step) {
        await tx`update sequence_contacts set status = 'failed', error = ${`Step "${stepId}" is not in version ${c.version}`}, updated_at = now() where id = ${c.id}`;
        return wait('failed_step');
      }
      const done = (a: ContactAction) => ({ action: a, cancel: [], start: null });

      if (c.status === 'failed') {
        // A person may have retried the failed browser step itself: the contact follows it.
        const [bs] = c.browser_step_id ? await tx<{ status: string }[]>`select status from browser_steps where id = ${c.browser_step_id}` : [];
        if (!bs || bs.status === 'failed' || bs.status === 'cancelled') return wait('failed_step');
        await tx`update sequence_contacts set status = 'active', error = null, updated_at = now() where id = ${c.id}`;
      }

      switch (step.type) {
        case 'end':
          await tx`update sequence_contacts set status = 'completed', wait_reason = null, wait_until = null, finished_at = now(),
                     revision = revision + 1, updated_at = now() where id = ${c.id}`;
          return done({ kind: 'done', status: 'completed', reason: null });
        case 'branch':
          return done(await moveOn(tx, c, step, (await evaluate(tx, c, seq!, step.condition)) ? step.if_true : step.if_false, false));
        case 'wait': {
          let until = c.wait_step_id === step.id && c.wait_until ? c.wait_until : null;
          if (!until) {
            const sender = await senderOf(tx, c);
            until = waitUntil(now, step, sender.timezone);
            await tx`update sequence_contacts set wait_step_id = ${step.id}, wait_until = ${until} where id = ${c.id}`;
            c.wait_until = until;
          }
          if (until.getTime() <= now.getTime()) return done(await moveOn(tx, c, step, step.next, false));
          return wait('timer', until);
        }
        default:
          break;
      }

      // An action step: never twice for one contact, whichever version it is on now.
      if (c.done_steps.includes(step.id)) return done(await moveOn(tx, c, step, step.next, false));
      const sender = await senderOf(tx, c);
      const [send] = await tx<{ id: string; status: string; subject: string | null; body: string; decided_at: Date | null }[]>`
        select id, status, subject, body, decided_at from sequence_sends where contact_id = ${c.id} and step_id = ${step.id}`;
      const carriesMessage = step.type === 'email' || messageActions.includes(step.action);

      if (step.type === 'pnet' && c.browser_step_id) {
        const [bs] = await tx<StepRow[]>`select * from browser_steps where id = ${c.browser_step_id}`;
        if (bs && waitingStatuses.has(bs.status)) return { action: await setWait(tx, c, 'pnet_step', null), cancel: [], start: bs };
        if (bs && (bs.status === 'succeeded' || bs.status === 'skipped')) {
          if (bs.status === 'succeeded') await tx`update sequence_contacts set last_reached_at = now() where id = ${c.id}`;
          return done(await moveOn(tx, c, step, step.next, true));
        }
        if (bs && bs.status === 'rejected') return done(await moveOn(tx, c, step, step.next, false));
        // Failed or cancelled: the contact stops at this step until a person retries.
        await tx`update sequence_contacts set status = 'failed', error = ${`The ${step.action} step ${bs?.status ?? 'vanished'}${bs?.error_code ? ` (${bs.error_code})` : ''}`},
                   revision = revision + 1, updated_at = now() where id = ${c.id}`;
        return wait('failed_step');
      }

      if (step.type === 'email' && !c.email) return done(await moveOn(tx, c, step, step.next, false));
      if (step.type === 'pnet' && (!c.profile_url || !sender.account_id)) return done(await moveOn(tx, c, step, step.next, false));

      if (carriesMessage && !send) {
        const prepared = await prepareMessage(tx, c, seq!, sender, step);
        if ('kind' in prepared) return done(prepared);
        const mode = step.type === 'email' ? seq!.email_mode : seq!.pnet_mode;
        const hold = prepared.hold ?? (mode === 'manual' ? 'manual_mode' : null);
        await insertSend(tx, c, step, sender, prepared, hold ? 'awaiting_approval' : 'approved', hold);
        return done({ kind: 'next' });
      }
      if (send) {
        switch (send.status) {
          case 'awaiting_approval':
            return wait('approval');
          case 'rejected':
            return done(await moveOn(tx, c, step, step.next, false));
          case 'stopped':
            return wait('stopped');
          case 'sent':
            await tx`update sequence_contacts set last_reached_at = now() where id = ${c.id}`;
            return done(await moveOn(tx, c, step, step.next, true));
          default:
            if (step.type === 'email') return done({ kind: 'send_email', sendId: send.id });
        }
      }
      // A pnet action whose message (if any) is approved: re-check the person, then queue it.
      const block = await outreachBlock(tx, c.workspace_id, { email: c.email, profile_url: c.profile_url, sequence_id: c.sequence_id, contact_id: c.id, since: c.enrolled_at });
      if (block) {
        const cancel = await stopContact(tx, c, block);
        return { action: { kind: 'done', status: 'stopped', reason: block }, cancel, start: null };
      }
      if (step.type !== 'pnet') return wait('approval');
      // A message a person approved in the queue is not put on the Tasks page a second time.
      const queued = await queuePnetStep(tx, commitWith, c, sender, step, send ?? null, send?.decided_at != null, now);
      if ('error' in queued) {
        // A message the network cannot take (a note over 300 characters, an empty message): a person edits it.
        if (send && carriesMessage) {
          await tx`update sequence_sends set status = 'awaiting_approval', reason = ${`invalid_message: ${queued.error}`}, updated_at = now() where id = ${send.id}`;
          return wait('approval');
        }
        // Params no edit can fix (a malformed profile URL): the step is passed over.
        return done(await moveOn(tx, c, step, step.next, false));
      }
      return { ...queued, cancel: [] };
    });
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
    async feedSequence({ sequenceId, batch = 500 }: { sequenceId: string; batch?: number }): Promise<{ feeding: boolean; enrolled: number; more: boolean }> {
      const [seq] = await sql<{ workspace_id: string; audience_table_id: string | null; feed_new_rows: boolean; status: string; feed_cursor: number }[]>`
        select workspace_id, audience_table_id, feed_new_rows, status, feed_cursor from sequences where id = ${sequenceId}`;
      if (!seq || !seq.feed_new_rows || !seq.audience_table_id || seq.status === 'archived') return { feeding: false, enrolled: 0, more: false };
      const rows = await sql<{ id: string; seq: number }[]>`
        select id, seq from table_rows where table_id = ${seq.audience_table_id} and seq > ${seq.feed_cursor} order by seq limit ${batch}`;
      if (rows.length === 0) return { feeding: true, enrolled: 0, more: false };
      const { results } = await enrolRows(sql, seq.workspace_id, sequenceId, rows.map((r) => r.id), null);
      const live = results.flatMap((r) => (r.contact && ['active', 'paused', 'failed'].includes(r.contact.status) ? [{ ...r.contact, workspace_id: seq.workspace_id }] : []));
      await startContacts(client(), taskQueue(), live);
      await sql`update sequences set feed_cursor = greatest(feed_cursor, ${rows[rows.length - 1]!.seq}) where id = ${sequenceId}`;
      return { feeding: true, enrolled: results.filter((r) => r.status === 'enrolled').length, more: rows.length === batch };
    },

    /** Stores what the outbound agent wrote for a step as the step's message (manual mode or a doubtful message waits for a person). */
    async recordWrittenMessage({ contactId, stepId, version, written }: { contactId: string; stepId: string; version: number; written: WriteStepMessageResult }): Promise<void> {
      await sql.begin(async (tx) => {
        const [c] = await tx<ContactRow[]>`select * from sequence_contacts where id = ${contactId} for update`;
        if (!c || c.version !== version || (c.current_step_id ?? '') !== stepId) return;
        const [seq] = await tx<SequenceInfo[]>`select * from sequences where id = ${c.sequence_id}`;
        const [v] = await tx<{ graph: SequenceGraph }[]>`select graph from sequence_versions where sequence_id = ${c.sequence_id} and version = ${c.version}`;
        const step = stepById(v!.graph, stepId);
        if (!step || (step.type !== 'email' && step.type !== 'pnet')) return;
        const mode = step.type === 'email' ? seq!.email_mode : seq!.pnet_mode;
        const hold = written.needsReview ? `agent_review: ${written.reason ?? 'needs review'}` : mode === 'manual' ? 'manual_mode' : null;
        await insertSend(tx, c, step, await senderOf(tx, c), { subject: written.subject, body: written.body }, hold ? 'awaiting_approval' : 'approved', hold);
      });
    },
  };
}
export type SequenceActivities = ReturnType<typeof createSequenceActivities>;

/** The contact workflows to wake: the contact of each step id given (for the pnet settle hook). */
export async function wakeContactsOfSteps(sql: Sql, client: Client, stepIds: string[]): Promise<void> {
  if (stepIds.length === 0) return;
  const rows = await sql<{ id: string; sequence_id: string }[]>`
    select c.id, c.sequence_id from browser_steps s
    join sequence_contacts c on c.workspace_id = s.workspace_id and c.contact_key = s.contact_key
    where s.id in ${sql(stepIds)} and s.sequence_id is not null and c.status in ('active', 'failed')`;
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
  return afterStepTransitions(activities, ['settleStep', 'expireClaim', 'missWindow', 'rejectStep', 'cancelStep', 'retryStep'], async (stepId, step) => {
    // A transition that answers the record shows whether the step belongs to a sequence: a step
    // outside one has no contact to wake, and the look-up would cost every settle a round trip.
    if (step && step.sequence_id === null) return;
    await wakeContactsOfSteps(sql, Context.current().client, [stepId]).catch(() => undefined);
  });
}
