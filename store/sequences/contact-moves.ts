/**
 * The statements of a sequence contact's move (domain/sequences/advance.ts decides which): the
 * reads that fill its snapshot and the writes that apply each decision. Every one runs inside the
 * move's transaction, after the contact row is locked (`lockContact`), so none of them is
 * guarded again on the contact's own columns: the lock is the guard. The statements are the ones
 * the move sent before decisions were split from them, one for one.
 */
import { randomUUID } from 'node:crypto';
import type { Db } from '../../db/sql.js';
import { recordWorkspaceEvent } from '../notifications/outbox.js';
import type { StepParams } from '../../domain/pnet/steps.js';
import type {
  AdvanceContact,
  AdvanceMove,
  AdvanceSend,
  AdvanceSender,
  AdvanceSequence,
  AdvanceTemplate,
  Wait,
} from '../../domain/sequences/advance.js';
import type { BranchCondition, SequenceGraph, SequencePnetAction } from '../../domain/sequences/sequences.js';
import { holdCtes } from '../platform/credits.js';
import { stepHold, type StepRow } from '../pnet/steps.js';
import type { ContactRow } from './sequences.js';

type Contact = Pick<AdvanceContact, 'id' | 'workspace_id' | 'sequence_id' | 'contact_key'>;

/** Browser-step statuses a stopped contact's steps are cancelled from. */
const activeStepStatuses = ['awaiting_approval', 'queued', 'resuming'];

// ---------------------------------------------------------------------------------------------
// Reads

/** The contact under its row lock, with a send of it left `sending` by a worker that died. */
export async function lockContact(
  db: Db,
  contactId: string,
): Promise<(ContactRow & { claimed_send_id: string | null }) | undefined> {
  const [c] = await db<(ContactRow & { claimed_send_id: string | null })[]>`
    select c.*, (select id from sequence_sends where contact_id = c.id and status = 'sending' limit 1) as claimed_send_id
    from sequence_contacts c where id = ${contactId} for update`;
  return c;
}

/** The contact row alone under its lock (a written message is stored against it). */
export async function lockContactRow(db: Db, contactId: string): Promise<ContactRow | undefined> {
  const [c] = await db<ContactRow[]>`select * from sequence_contacts where id = ${contactId} for update`;
  return c;
}

/** The contact's browser steps still to run (to cancel once it stops). */
export async function activeStepsOf(
  db: Db,
  c: Pick<AdvanceContact, 'workspace_id' | 'contact_key'>,
): Promise<StepRow[]> {
  return db<
    StepRow[]
  >`select * from browser_steps where workspace_id = ${c.workspace_id} and contact_key = ${c.contact_key} and status in ${db(activeStepStatuses)}`;
}

export async function readSequence(db: Db, c: Pick<AdvanceContact, 'sequence_id'>): Promise<AdvanceSequence> {
  const [seq] = await db<AdvanceSequence[]>`select * from sequences where id = ${c.sequence_id}`;
  return seq!;
}

/** contact_stop_reason() of migration 014: a reply, bounce, stop or do-not-contact entry, or null. */
export async function readStopReason(
  db: Db,
  c: Pick<AdvanceContact, 'id' | 'workspace_id' | 'email' | 'profile_url' | 'enrolled_at'>,
): Promise<string | null> {
  const [stop] = await db<{ reason: string | null }[]>`
    select contact_stop_reason(${c.workspace_id}, ${c.email}, ${c.profile_url}, ${c.enrolled_at}, ${c.id}) as reason`;
  return stop!.reason;
}

export async function readGraph(db: Db, c: Pick<AdvanceContact, 'sequence_id' | 'version'>): Promise<SequenceGraph> {
  const [v] = await db<
    { graph: SequenceGraph }[]
  >`select graph from sequence_versions where sequence_id = ${c.sequence_id} and version = ${c.version}`;
  return v!.graph;
}

/** The status of a browser step (a failed contact's), or null when it is gone. */
export async function readStepStatus(db: Db, browserStepId: string): Promise<{ status: string } | null> {
  const [bs] = await db<{ status: string }[]>`select status from browser_steps where id = ${browserStepId}`;
  return bs ?? null;
}

export async function readBrowserStep(db: Db, browserStepId: string): Promise<StepRow | null> {
  const [bs] = await db<StepRow[]>`select * from browser_steps where id = ${browserStepId}`;
  return bs ?? null;
}

/** Whether a branch condition holds now (email_found is decided on the contact and its row). */
export async function readBranchCondition(
  db: Db,
  c: Pick<AdvanceContact, 'id' | 'workspace_id' | 'contact_key' | 'email' | 'profile_url' | 'enrolled_at'>,
  condition: Exclude<BranchCondition, 'email_found'>,
): Promise<boolean> {
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
    case 'opened': {
      const [row] = await db<
        { yes: boolean }[]
      >`select exists (select 1 from sequence_sends where contact_id = ${c.id} and opened_at is not null) as yes`;
      return row!.yes;
    }
  }
}

/** The audience row as it is now (the enrolment snapshot when the row is gone). */
export async function readLiveCells(
  db: Db,
  c: Pick<AdvanceContact, 'row_id' | 'workspace_id' | 'fields'>,
): Promise<Record<string, unknown>> {
  const [row] = await db<
    { cells: Record<string, unknown> }[]
  >`select cells from table_rows where id = ${c.row_id} and workspace_id = ${c.workspace_id}`;
  return row?.cells ?? c.fields;
}

export async function readSender(
  db: Db,
  c: Pick<AdvanceContact, 'sequence_id' | 'sender_profile_id'>,
): Promise<AdvanceSender> {
  const [row] = await db<AdvanceSender[]>`
    select p.name, p.timezone, ss.from_email, ss.from_name, a.id as account_id, a.run_mode as account_run_mode
    from sender_profiles p
    left join sequence_senders ss on ss.sender_profile_id = p.id and ss.sequence_id = ${c.sequence_id}
    left join pnet_accounts a on a.sender_profile_id = p.id
    where p.id = ${c.sender_profile_id}`;
  return (
    row ?? { name: null, timezone: 'UTC', from_email: null, from_name: null, account_id: null, account_run_mode: null }
  );
}

/** The contact's send of a step, or null. */
export async function readSend(db: Db, contactId: string, stepId: string): Promise<AdvanceSend | null> {
  const [send] = await db<AdvanceSend[]>`
    select id, status, subject, body, decided_at from sequence_sends where contact_id = ${contactId} and step_id = ${stepId}`;
  return send ?? null;
}

/** A saved template of the workspace, or null when deleted. */
export async function readTemplate(db: Db, workspaceId: string, templateId: string): Promise<AdvanceTemplate | null> {
  const [saved] = await db<AdvanceTemplate[]>`
    select subject_segments, body_segments from email_templates where id = ${templateId} and workspace_id = ${workspaceId}`;
  return saved ?? null;
}

// ---------------------------------------------------------------------------------------------
// Writes after which the move goes on

export async function setStartStep(db: Db, contactId: string, stepId: string) {
  await db`update sequence_contacts set current_step_id = ${stepId} where id = ${contactId}`;
}

/** A failed contact whose browser step a person retried follows it again. */
export async function resumeContact(db: Db, contactId: string) {
  await db`update sequence_contacts set status = 'active', error = null, updated_at = now() where id = ${contactId}`;
}

/** A wait step's end, set once when the contact reaches it. */
export async function startTimer(db: Db, contactId: string, stepId: string, until: Date) {
  await db`update sequence_contacts set wait_step_id = ${stepId}, wait_until = ${until} where id = ${contactId}`;
}

export async function recordEmail(db: Db, contactId: string, email: string) {
  await db`update sequence_contacts set email = ${email} where id = ${contactId}`;
}

// ---------------------------------------------------------------------------------------------
// Writes that end the move

/** The contact's wait, written only when the row says otherwise. */
export async function setWait(db: Db, contactId: string, wait: Wait) {
  if (wait.write)
    await db`update sequence_contacts set wait_reason = ${wait.reason}, wait_until = ${wait.until}, updated_at = now() where id = ${contactId}`;
}

/** Its step is not in its version (no revision: nothing a person did). */
export async function failAtMissingStep(db: Db, contactId: string, error: string) {
  await db`update sequence_contacts set status = 'failed', error = ${error}, updated_at = now() where id = ${contactId}`;
}

/** Its pnet step failed: it stops at the step until a person retries. */
export async function failAtStep(db: Db, contactId: string, error: string) {
  await db`update sequence_contacts set status = 'failed', error = ${error},
             revision = revision + 1, updated_at = now() where id = ${contactId}`;
}

export async function completeContact(db: Db, contactId: string) {
  const [c] = await db<{ workspace_id: string; sequence_id: string }[]>`
    update sequence_contacts set status = 'completed', wait_reason = null, wait_until = null, finished_at = now(),
      revision = revision + 1, updated_at = now() where id = ${contactId} returning workspace_id, sequence_id`;
  if (c) {
    await recordWorkspaceEvent(db, {
      workspaceId: c.workspace_id,
      type: 'sequence_contact.finished',
      payload: { sequence_id: c.sequence_id, sequence_contact_id: contactId },
    });
  }
}

/** A stopped contact is a workspace event, in the transaction that stops it (pass the rows the stop returned). */
export async function recordContactStopped(
  db: Db,
  stopped: { workspace_id: string; sequence_id: string; id: string }[],
  reason: string,
): Promise<void> {
  for (const c of stopped) {
    await recordWorkspaceEvent(db, {
      workspaceId: c.workspace_id,
      type: 'sequence_contact.stopped',
      payload: { sequence_id: c.sequence_id, sequence_contact_id: c.id, reason },
    });
  }
}

/** The contact was reached (a message sent, a pnet step succeeded): the recontact cooldown counts from now. */
export async function markReached(db: Db, contactId: string) {
  await db`update sequence_contacts set last_reached_at = now() where id = ${contactId}`;
}

/** Moves to the step's successor; an action step performed joins done_steps so no version repeats it. */
export async function moveOn(db: Db, contactId: string, move: Extract<AdvanceMove, { kind: 'move_on' }>) {
  await db`
    update sequence_contacts set current_step_id = ${move.to},
      done_steps = ${move.appendDone ? db`array_append(done_steps, ${move.from})` : db`done_steps`},
      wait_reason = null, wait_until = null, wait_step_id = null, browser_step_id = null, error = null,
      revision = revision + 1, updated_at = now()
    where id = ${contactId}`;
}

/** Stops the contact: open messages stop, and its waiting pnet steps are returned to cancel. */
export async function stopContact(
  db: Db,
  c: Pick<AdvanceContact, 'id' | 'workspace_id' | 'contact_key'>,
  reason: string,
): Promise<StepRow[]> {
  const stopped = await db<{ workspace_id: string; sequence_id: string; id: string }[]>`
    update sequence_contacts set status = 'stopped', stop_reason = ${reason}, wait_reason = null, wait_until = null,
      finished_at = now(), revision = revision + 1, updated_at = now()
    where id = ${c.id} returning workspace_id, sequence_id, id`;
  await recordContactStopped(db, stopped, reason);
  await db`update sequence_sends set status = 'stopped', reason = ${reason}, updated_at = now()
           where contact_id = ${c.id} and status in ('awaiting_approval', 'approved')`;
  return activeStepsOf(db, c);
}

/** A step's message, once per contact and step (a concurrent or repeated insert does nothing). */
export async function insertSend(
  db: Db,
  c: Contact & Pick<AdvanceContact, 'email' | 'version'>,
  send: Omit<Extract<AdvanceMove, { kind: 'insert_send' }>, 'kind'>,
  fromEmail: string | null,
  messageId: string,
) {
  await db`
    insert into sequence_sends (workspace_id, sequence_id, contact_id, step_id, version, channel, kind, status, reason, message_id,
                                to_email, from_email, subject, body)
    values (${c.workspace_id}, ${c.sequence_id}, ${c.id}, ${send.stepId}, ${c.version}, ${send.channel},
            ${send.sendKind}, ${send.status}, ${send.reason}, ${messageId},
            ${c.email}, ${fromEmail}, ${send.subject}, ${send.body})
    on conflict (contact_id, step_id) do nothing`;
}

/** A message the network cannot take goes back to the approval queue for a person's edit. */
export async function returnSendForEdit(db: Db, sendId: string, reason: string) {
  await db`update sequence_sends set status = 'awaiting_approval', reason = ${reason}, updated_at = now() where id = ${sendId}`;
}

/**
 * The browser step of a pnet action, queued with the statement that commits the contact's
 * transaction: the step, its credit hold (the workspace's balance row, the ledger), the
 * contact's wait and its approved message go out with the COMMIT, so the balance row, which
 * every queue and settle of the workspace locks, is held for the server's time alone. Whether the
 * credits suffice is decided inside this one statement (the hold's CTEs read the balance they
 * take from): too few writes no step, no hold and no send, and the contact waits
 * `insufficient_credits` until `retryAt`; the rest of the transaction commits all the same.
 * Its rows are the step queued, or none when credits fell short. The statement is returned unsent,
 * for the caller's commitWith: it must be the transaction's last.
 */
export function queuePnetStep(
  db: Db,
  c: Contact,
  accountId: string | null,
  step: { stepId: string; action: SequencePnetAction; params: StepParams; awaiting: boolean; retryAt: Date },
) {
  const id = randomUUID();
  const hold = step.awaiting
    ? null
    : stepHold({ id, workspace_id: c.workspace_id, kind: step.action, credit_round: 0 }, randomUUID());
  return db<StepRow[]>`
    with ${hold ? db`${holdCtes(db, hold)},` : db``} step as (
      insert into browser_steps (id, workspace_id, account_id, kind, params, contact_key, sequence_id, status, metered, queued_at, held, credit_hold_id)
      select ${id}, ${c.workspace_id}, ${accountId}, ${step.action}, ${db.json(step.params)}, ${c.contact_key}, ${c.sequence_id},
        ${step.awaiting ? 'awaiting_approval' : 'queued'}, true, ${step.awaiting ? null : db`now()`},
        pnet_step_held(${c.workspace_id}, ${c.contact_key}, ${c.sequence_id}), ${hold?.id ?? null}::uuid
      ${hold ? db`where exists (select 1 from created)` : db``}
      returning *
    ), contact as (
      update sequence_contacts set browser_step_id = coalesce((select id from step), browser_step_id),
        wait_reason = case when exists (select 1 from step) then 'pnet_step' else 'insufficient_credits' end,
        wait_until = case when exists (select 1 from step) then null else ${step.retryAt}::timestamptz end, updated_at = now()
      where id = ${c.id}
    ), sent as (
      update sequence_sends m set browser_step_id = s.id, status = 'sent', sent_at = now(), updated_at = now()
      from step s where m.contact_id = ${c.id} and m.step_id = ${step.stepId} and m.status = 'approved'
    )
    select * from step`;
}
