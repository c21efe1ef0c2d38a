/** The unified inbox in Postgres: threads and messages, labels, settings, and the people behind threads. */
import type { Client } from '@temporalio/client';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { ChatModel } from '../../integrations/chat-model.js';
import { chargeHold, holdCredits, releaseHold } from '../../store/platform/credits.js';
import { insertMessage, refreshThread } from '../../store/inbox/messages.js';
import type { Db, Sql } from '../../db/sql.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import {
    countPeople,
    suggestionPriceCredits,
    type Label,
    type Mailbox,
    type MailboxCreate,
    type MailboxUpdate,
    type Message,
    type Suggestion,
    type Thread,
    type ThreadListQuery,
} from '../../domain/inbox/inbox.js';
import { mailboxPollWorkflow } from '../../workflows/inbox/mailbox-poll.js';
import { mailboxPollWorkflowId, pollMailboxNowSignal } from '../../workflows/inbox/mailbox-poll.contract.js';
import { WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';
import { startStepWorkflow } from '../pnet/browser-step-client.js';
import { addEntries } from '../../store/inbox/do-not-contact.js';
import { accountRunMode, insertStep } from '../../store/pnet/step-queue.js';
import { Mailer } from '../../integrations/mailer.js';
import { SuggestionContext, SuggestionDraft, templateSuggestion, modelSuggestion } from './suggestions.js';

interface ThreadRow {
  id: string;
  channel: Thread['channel'];
  subject: string | null;
  contact_name: string | null;
  contact_email: string | null;
  contact_profile_url: string | null;
  sequence_contact_id: string | null;
  last_message_at: Date | null;
  last_inbound_at: Date | null;
  unread: boolean;
  archived_at: Date | null;
  needs_reply: boolean;
  message_count: number;
  snippet: string | null;
  labels: { id: string; name: string; color: string | null; created_at: string }[];
  created_at: Date;
  pnet_account_id: string | null;
  our_address: string | null;
  external_key: string | null;
}

export type ThreadRecord = ThreadRow;

interface LabelRow {
  id: string;
  name: string;
  color: string | null;
  created_at: Date;
}

export interface MessageRow {
  id: string;
  thread_id: string;
  direction: 'inbound' | 'outbound';
  kind: Message['kind'];
  from_email: string | null;
  from_profile_url: string | null;
  to_email: string | null;
  subject: string | null;
  body: string;
  external_id: string | null;
  delivery_status: Message['delivery_status'];
  delivery_error: string | null;
  occurred_at: Date;
  in_reply_to: string | null;
  reference_ids: string[];
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export const toLabel = (r: LabelRow): Label => ({ id: r.id, name: r.name, color: r.color, created_at: r.created_at.toISOString() });

export const toThread = (r: ThreadRow): Thread => ({
  id: r.id,
  channel: r.channel,
  subject: r.subject,
  contact_name: r.contact_name,
  contact_email: r.contact_email,
  contact_profile_url: r.contact_profile_url,
  sequence_contact_id: r.sequence_contact_id,
  last_message_at: iso(r.last_message_at),
  last_inbound_at: iso(r.last_inbound_at),
  unread: r.unread,
  archived: r.archived_at !== null,
  needs_reply: r.needs_reply,
  message_count: r.message_count,
  snippet: r.snippet,
  labels: r.labels.map((l) => ({ ...l, created_at: new Date(l.created_at).toISOString() })),
  created_at: r.created_at.toISOString(),
});

export const toMessage = (r: MessageRow): Message => ({
  id: r.id,
  thread_id: r.thread_id,
  direction: r.direction,
  kind: r.kind,
  from_email: r.from_email,
  from_profile_url: r.from_profile_url,
  to_email: r.to_email,
  subject: r.subject,
  body: r.body,
  external_id: r.external_id,
  delivery_status: r.delivery_status,
  delivery_error: r.delivery_error,
  occurred_at: r.occurred_at.toISOString(),
});

const threadColumns = (db: Db) => db`
  t.*, coalesce((
    select json_agg(json_build_object('id', l.id, 'name', l.name, 'color', l.color, 'created_at', l.created_at) order by l.name)
    from inbox_thread_labels tl join inbox_labels l on l.id = tl.label_id where tl.thread_id = t.id), '[]'::json) as labels`;

export async function listThreads(db: Db, workspaceId: string, q: ThreadListQuery) {
  const search = q.search?.trim().toLowerCase();
  const where = db`
    where t.workspace_id = ${workspaceId}
      and ${q.archived ? db`t.archived_at is not null` : db`t.archived_at is null`}
      ${q.channel ? db`and t.channel = ${q.channel}` : db``}
      ${q.unread !== undefined ? db`and t.unread = ${q.unread}` : db``}
      ${q.needs_reply !== undefined ? db`and t.needs_reply = ${q.needs_reply}` : db``}
      ${q.label_id ? db`and exists (select 1 from inbox_thread_labels tl where tl.thread_id = t.id and tl.label_id = ${q.label_id})` : db``}
      ${search ? db`and (strpos(lower(coalesce(t.contact_name, '') || ' ' || coalesce(t.contact_email, '') || ' ' || coalesce(t.contact_profile_url, '') || ' ' || coalesce(t.subject, '')), ${search}) > 0)` : db``}`;
  const rows = await db<ThreadRow[]>`
    select ${threadColumns(db)} from inbox_threads t ${where}
    order by coalesce(t.last_message_at, t.created_at) desc, t.id desc limit ${q.limit} offset ${q.offset}`;
  const [count] = await db<{ total: number }[]>`select count(*)::int as total from inbox_threads t ${where}`;
  const total = count!.total;
  const next = q.offset + rows.length;
  return { threads: rows.map(toThread), total, next_offset: next < total ? next : null };
}

export async function findThread(db: Db, workspaceId: string, threadId: string): Promise<ThreadRow | null> {
  const [row] = await db<ThreadRow[]>`select ${threadColumns(db)} from inbox_threads t where t.id = ${threadId} and t.workspace_id = ${workspaceId}`;
  return row ?? null;
}

export async function threadMessages(db: Db, threadId: string): Promise<MessageRow[]> {
  return db<MessageRow[]>`select * from inbox_messages where thread_id = ${threadId} order by occurred_at, created_at, id`;
}

export async function readThreadDetail(db: Db, workspaceId: string, threadId: string) {
  const thread = await findThread(db, workspaceId, threadId);
  if (!thread) return null;
  return { ...toThread(thread), messages: (await threadMessages(db, threadId)).map(toMessage) };
}

export async function updateThread(db: Db, workspaceId: string, threadId: string, patch: { unread?: boolean; archived?: boolean }) {
  const rows = await db`
    update inbox_threads set
      unread = coalesce(${patch.unread ?? null}::boolean, unread),
      archived_at = case when ${patch.archived ?? null}::boolean is null then archived_at
                         when ${patch.archived ?? null}::boolean then coalesce(archived_at, now()) else null end,
      updated_at = now()
    where id = ${threadId} and workspace_id = ${workspaceId} returning id`;
  return rows.length === 1 ? findThread(db, workspaceId, threadId) : null;
}

// Labels

export async function listLabels(db: Db, workspaceId: string): Promise<Label[]> {
  return (await db<LabelRow[]>`select * from inbox_labels where workspace_id = ${workspaceId} order by lower(name), id`).map(toLabel);
}

export async function getLabel(db: Db, workspaceId: string, labelId: string): Promise<Label | null> {
  const [row] = await db<LabelRow[]>`select * from inbox_labels where id = ${labelId} and workspace_id = ${workspaceId}`;
  return row ? toLabel(row) : null;
}

/** null when the name is taken. */
export async function createLabel(db: Db, workspaceId: string, input: { name: string; color: string | null }): Promise<Label | null> {
  const [row] = await db<LabelRow[]>`
    insert into inbox_labels (workspace_id, name, color) values (${workspaceId}, ${input.name}, ${input.color})
    on conflict (workspace_id, name) do nothing returning *`;
  return row ? toLabel(row) : null;
}

/** 'missing', 'taken', or the label. */
export async function updateLabel(db: Db, workspaceId: string, labelId: string, input: { name?: string; color?: string | null }): Promise<Label | 'missing' | 'taken'> {
  const current = await getLabel(db, workspaceId, labelId);
  if (!current) return 'missing';
  const name = input.name ?? current.name;
  if (name !== current.name) {
    const [taken] = await db`select 1 from inbox_labels where workspace_id = ${workspaceId} and name = ${name} and id <> ${labelId}`;
    if (taken) return 'taken';
  }
  const color = input.color === undefined ? current.color : input.color;
  const [row] = await db<LabelRow[]>`update inbox_labels set name = ${name}, color = ${color} where id = ${labelId} returning *`;
  return toLabel(row!);
}

export async function deleteLabel(db: Db, workspaceId: string, labelId: string): Promise<boolean> {
  return (await db`delete from inbox_labels where id = ${labelId} and workspace_id = ${workspaceId} returning id`).length === 1;
}

export async function labelThread(db: Db, threadId: string, labelId: string, on: boolean) {
  if (on) await db`insert into inbox_thread_labels (thread_id, label_id) values (${threadId}, ${labelId}) on conflict do nothing`;
  else await db`delete from inbox_thread_labels where thread_id = ${threadId} and label_id = ${labelId}`;
}

// Settings

export interface SettingsRow {
  webhook_secret: string | null;
  webhook_secret_rotated_at: Date | null;
  reply_from_address: string | null;
  reply_from_name: string | null;
}

export async function readSettings(db: Db, workspaceId: string): Promise<SettingsRow> {
  const [row] = await db<SettingsRow[]>`select * from inbox_settings where workspace_id = ${workspaceId}`;
  return row ?? { webhook_secret: null, webhook_secret_rotated_at: null, reply_from_address: null, reply_from_name: null };
}

export const toSettings = (s: SettingsRow) => ({
  webhook_path: '/inbox/inbound-email/',
  webhook_secret_set: s.webhook_secret !== null,
  webhook_secret_rotated_at: iso(s.webhook_secret_rotated_at),
  reply_from_address: s.reply_from_address,
  reply_from_name: s.reply_from_name,
});

export async function updateSettings(db: Db, workspaceId: string, patch: { reply_from_address?: string | null; reply_from_name?: string | null }) {
  const address = patch.reply_from_address === undefined ? null : patch.reply_from_address?.toLowerCase() ?? null;
  await db`
    insert into inbox_settings (workspace_id, reply_from_address, reply_from_name) values (${workspaceId}, ${address}, ${patch.reply_from_name ?? null})
    on conflict (workspace_id) do update set
      reply_from_address = case when ${patch.reply_from_address !== undefined} then excluded.reply_from_address else inbox_settings.reply_from_address end,
      reply_from_name = case when ${patch.reply_from_name !== undefined} then excluded.reply_from_name else inbox_settings.reply_from_name end,
      updated_at = now()`;
  return readSettings(db, workspaceId);
}

export async function rotateWebhookSecret(db: Db, workspaceId: string) {
  const secret = `whsec_${randomBytes(32).toString('base64url')}`;
  const [row] = await db<{ rotated_at: Date }[]>`
    insert into inbox_settings (workspace_id, webhook_secret, webhook_secret_rotated_at) values (${workspaceId}, ${secret}, now())
    on conflict (workspace_id) do update set webhook_secret = excluded.webhook_secret, webhook_secret_rotated_at = now(), updated_at = now()
    returning webhook_secret_rotated_at as rotated_at`;
  return { secret, rotated_at: row!.rotated_at.toISOString() };
}

// The people behind threads (endpoint 7 and the bulk action)

/** The selected threads' contacts grouped into people; ids of other workspaces count for nothing. */
export async function peopleOfThreads(db: Db | Sql, workspaceId: string, threadIds: string[]) {
  const rows = await db<{ contact_email: string | null; contact_profile_url: string | null; sequence_contact_id: string | null }[]>`
    select contact_email, contact_profile_url, sequence_contact_id from inbox_threads
    where workspace_id = ${workspaceId} and id = any(${[...new Set(threadIds)]}::uuid[])`;
  const counted = countPeople(rows.map((r) => ({ email: r.contact_email, profileUrl: r.contact_profile_url })));
  return { ...counted, sequenceContactIds: rows.map((r) => r.sequence_contact_id).filter((id): id is string => id !== null) };
}

// ---------------------------------------------------------------------------------------------
// Replies, suggestions and bulk do-not-contact: SQL around a send or a model call.

export interface InboxServiceDeps {
  sql: Sql;
  temporal: { client: Client; taskQueue: string };
  mailer: Mailer | null;
  chatModel: ChatModel | null;
}

const replySubject = (subject: string | null) => (subject ? (/^re:/i.test(subject) ? subject : `Re: ${subject}`) : '(no subject)');

async function messageByExternalId(db: Db, workspaceId: string, externalId: string): Promise<MessageRow | null> {
  const [row] = await db<MessageRow[]>`select * from inbox_messages where workspace_id = ${workspaceId} and external_id = ${externalId}`;
  return row ?? null;
}

async function messageById(db: Db, id: string): Promise<MessageRow> {
  const [row] = await db<MessageRow[]>`select * from inbox_messages where id = ${id}`;
  return row!;
}

/**
 * Replies on the thread's channel. Email: the outbound row with its Message-ID is committed
 * ('sending') before the mail server is asked, so a retry (the same idempotency key) sends that
 * same Message-ID again at most, and a reply already sent is answered as it is. pnet: a
 * send_message step for the thread's sender account (manual mode puts it on the Tasks page).
 */
export async function sendReply(
  deps: InboxServiceDeps,
  workspaceId: string,
  threadId: string,
  input: { body: string; idempotencyKey?: string; sentBy: string | null },
): Promise<{ message: MessageRow; created: boolean }> {
  const { sql } = deps;
  const thread = await findThread(sql, workspaceId, threadId);
  if (!thread) throw notFound('Thread');
  const token = input.idempotencyKey
    ? createHash('sha256').update(`${workspaceId}:${threadId}:${input.idempotencyKey}`).digest('hex').slice(0, 32)
    : randomUUID();

  if (thread.channel === 'pnet') {
    const externalId = `pnet-reply:${token}`;
    const known = await messageByExternalId(sql, workspaceId, externalId);
    if (known) return { message: known, created: false };
    if (!thread.pnet_account_id || !thread.contact_profile_url) throw new ApiError('conflict', 'This conversation has no sender account to reply through.');
    const runMode = await accountRunMode(sql, workspaceId, thread.pnet_account_id);
    if (!runMode) throw new ApiError('conflict', 'The sender account of this conversation is gone.');
    const step = await insertStep(
      sql,
      workspaceId,
      {
        account_id: thread.pnet_account_id,
        params: { kind: 'send_message', profile_url: `https://${thread.contact_profile_url}`, body: input.body },
        contact_key: null,
        sequence_id: null,
        run_before: null,
        test: false,
      },
      runMode,
    );
    const saved = await sql.begin(async (tx) => {
      const m = await insertMessage(tx, {
        workspaceId, threadId, direction: 'outbound', kind: 'sent', body: input.body, externalId, occurredAt: new Date(),
        deliveryStatus: 'queued', sentBy: input.sentBy, browserStepId: step.id,
      });
      await refreshThread(tx, threadId, false);
      await tx`update inbox_threads set unread = false where id = ${threadId}`;
      return m;
    });
    await startStepWorkflow({ ...deps.temporal, sql }, step);
    return { message: await messageById(sql, saved.id), created: true };
  }

  if (!thread.contact_email) throw new ApiError('conflict', 'This conversation has no email address to reply to.');
  const settings = await readSettings(sql, workspaceId);
  const from = thread.our_address ?? settings.reply_from_address;
  if (!from) throw new ApiError('conflict', 'No address to reply from: set `reply_from_address` in PATCH /inbox/settings/.');
  if (!deps.mailer) throw new ApiError('unavailable', 'No mail server is configured here (SMTP_URL); replies cannot be sent.');
  const messageId = `<reply.${token}@${from.split('@')[1]}>`;
  const existing = await messageByExternalId(sql, workspaceId, messageId);
  if (existing?.delivery_status === 'sent') return { message: existing, created: false };
  const history = await threadMessages(sql, threadId);
  const previous = [...history].reverse().find((m) => m.external_id && m.external_id !== messageId && m.delivery_status !== 'failed' && m.delivery_status !== 'sending');
  const references = previous ? [...previous.reference_ids, previous.external_id!].slice(-20) : [];
  const subject = replySubject(thread.subject);
  const saved = await sql.begin(async (tx) => {
    const m = await insertMessage(tx, {
      workspaceId, threadId, direction: 'outbound', kind: 'sent', fromEmail: from, toEmail: thread.contact_email, subject, body: input.body,
      externalId: messageId, occurredAt: new Date(), inReplyTo: previous?.external_id ?? null, referenceIds: references,
      deliveryStatus: 'sending', sentBy: input.sentBy,
    });
    await refreshThread(tx, threadId, false);
    await tx`update inbox_threads set unread = false where id = ${threadId}`;
    return m;
  });
  const row = await messageById(sql, saved.id);
  try {
    await deps.mailer.send({
      messageId, from: { name: settings.reply_from_name, address: from }, to: thread.contact_email, subject, text: row.body,
      inReplyTo: row.in_reply_to, references: row.reference_ids,
    });
  } catch (err) {
    await sql`update inbox_messages set delivery_status = 'failed', delivery_error = ${String((err as Error).message).slice(0, 500)} where id = ${row.id} and delivery_status <> 'sent'`;
    throw new ApiError('bad_gateway', `The mail server did not take the reply: ${String((err as Error).message).slice(0, 200)}. Retry with the same idempotency_key.`);
  }
  await sql`update inbox_messages set delivery_status = 'sent', delivery_error = null where id = ${row.id}`;
  return { message: await messageById(sql, row.id), created: !saved.duplicate };
}

interface SuggestionRow {
  id: string;
  thread_id: string;
  message_id: string;
  status: Suggestion['status'];
  subject: string | null;
  body: string;
  model_key: string;
  credits_charged: number;
  edited: boolean;
  sent_message_id: string | null;
  decided_at: Date | null;
  created_at: Date;
}

export const toSuggestion = (r: SuggestionRow): Suggestion => ({
  id: r.id,
  thread_id: r.thread_id,
  message_id: r.message_id,
  status: r.status,
  subject: r.subject,
  body: r.body,
  model_key: r.model_key,
  credits_charged: r.credits_charged,
  edited: r.edited,
  sent_message_id: r.sent_message_id,
  decided_at: iso(r.decided_at),
  created_at: r.created_at.toISOString(),
});

async function suggestionFor(db: Db, messageId: string): Promise<SuggestionRow | null> {
  const [row] = await db<SuggestionRow[]>`select * from inbox_suggestions where message_id = ${messageId}`;
  return row ?? null;
}

/**
 * A suggested reply to the thread's last inbound reply, one per message (asking again answers the
 * same one). A model-written one costs `suggestionPriceCredits`, held before the call, charged
 * with the insert, released if the call fails; the local template writer is free.
 */
export async function suggestReply(deps: InboxServiceDeps, workspaceId: string, threadId: string): Promise<{ suggestion: Suggestion; created: boolean }> {
  const { sql } = deps;
  const thread = await findThread(sql, workspaceId, threadId);
  if (!thread) throw notFound('Thread');
  const history = await threadMessages(sql, threadId);
  const answering = [...history].reverse().find((m) => m.direction === 'inbound' && m.kind === 'reply');
  if (!answering) throw new ApiError('conflict', 'This conversation has no reply from the contact to answer.');
  const known = await suggestionFor(sql, answering.id);
  if (known) return { suggestion: toSuggestion(known), created: false };
  const context: SuggestionContext = {
    channel: thread.channel,
    contactName: thread.contact_name,
    subject: thread.subject,
    messages: history.filter((m) => m.kind === 'reply' || m.kind === 'sent').map((m) => ({ direction: m.direction, body: m.body })),
    answering: answering.body,
  };
  const id = randomUUID();
  const insert = (db: Db, draft: SuggestionDraft, credits: number) => db<SuggestionRow[]>`
    insert into inbox_suggestions (id, workspace_id, thread_id, message_id, subject, body, model_key, credits_charged)
    values (${id}, ${workspaceId}, ${threadId}, ${answering.id}, ${draft.subject}, ${draft.body.replace(/\u0000/g, '')}, ${draft.modelKey}, ${credits})
    on conflict (message_id) do nothing returning *`;
  const model = deps.chatModel;
  if (!model) {
    const [row] = await insert(sql, templateSuggestion(context), 0);
    return row ? { suggestion: toSuggestion(row), created: true } : { suggestion: toSuggestion((await suggestionFor(sql, answering.id))!), created: false };
  }
  const causeKey = `inbox-suggestion:${id}`;
  const hold = await sql.begin((tx) => holdCredits(tx, { workspaceId, amount: suggestionPriceCredits, causeKey }));
  let draft: SuggestionDraft;
  try {
    draft = await modelSuggestion(model, context);
  } catch (err) {
    await sql.begin((tx) => releaseHold(tx, hold.id));
    throw new ApiError('bad_gateway', `The model could not write a suggestion: ${String((err as Error).message).slice(0, 200)}`);
  }
  const row = await sql.begin(async (tx) => {
    const [made] = await insert(tx, draft, suggestionPriceCredits);
    // Someone else's suggestion for this message landed first: this one is not kept, nor charged.
    if (made) await chargeHold(tx, hold.id);
    else await releaseHold(tx, hold.id);
    return made ?? (await suggestionFor(tx, answering.id))!;
  });
  return { suggestion: toSuggestion(row), created: row.id === id };
}

export async function listSuggestions(db: Db, workspaceId: string, q: { status: Suggestion['status']; thread_id?: string; limit: number }) {
  const rows = await db<SuggestionRow[]>`
    select * from inbox_suggestions where workspace_id = ${workspaceId} and status = ${q.status}
      ${q.thread_id ? db`and thread_id = ${q.thread_id}` : db``}
    order by created_at desc, id limit ${q.limit}`;
  return rows.map(toSuggestion);
}

export async function readSuggestion(db: Db, workspaceId: string, suggestionId: string): Promise<SuggestionRow | null> {
  const [row] = await db<SuggestionRow[]>`select * from inbox_suggestions where id = ${suggestionId} and workspace_id = ${workspaceId}`;
  return row ?? null;
}

/** Sends the suggestion (or the person's edit of it) as a reply; only a pending one. */
export async function approveSuggestion(deps: InboxServiceDeps, workspaceId: string, suggestionId: string, edit: string | undefined, actor: string | null) {
  const current = await readSuggestion(deps.sql, workspaceId, suggestionId);
  if (!current) throw notFound('Suggestion');
  if (current.status !== 'pending') throw new ApiError('conflict', `The suggestion is already ${current.status}; nothing changed.`);
  const body = edit ?? current.body;
  // The key makes a retried approval send the same Message-ID, never a second reply.
  const { message } = await sendReply(deps, workspaceId, current.thread_id, { body, idempotencyKey: `suggestion.${suggestionId}`, sentBy: actor });
  const [row] = await deps.sql<SuggestionRow[]>`
    update inbox_suggestions set status = 'approved', sent_message_id = ${message.id}, edited = ${body !== current.body},
      body = ${body}, decided_by = ${actor}, decided_at = now()
    where id = ${suggestionId} and status = 'pending' returning *`;
  return { suggestion: toSuggestion(row ?? (await readSuggestion(deps.sql, workspaceId, suggestionId))!), message: toMessage(message) };
}

export async function dismissSuggestion(db: Db, workspaceId: string, suggestionId: string, actor: string | null): Promise<Suggestion> {
  const [row] = await db<SuggestionRow[]>`
    update inbox_suggestions set status = 'dismissed', decided_by = ${actor}, decided_at = now()
    where id = ${suggestionId} and workspace_id = ${workspaceId} and status = 'pending' returning *`;
  if (row) return toSuggestion(row);
  const current = await readSuggestion(db, workspaceId, suggestionId);
  if (!current) throw notFound('Suggestion');
  throw new ApiError('conflict', `The suggestion is already ${current.status}; nothing changed.`);
}

/**
 * Bulk do-not-contact: every email of the selected people goes on the list, and every one of
 * them (email or not) gets a stop row, so their current sequences stop at the next check.
 */
export async function bulkDoNotContact(sql: Sql, workspaceId: string, threadIds: string[], options: { reason: string | null; createdBy: string | null }) {
  return sql.begin(async (tx) => {
    const { people, withoutEmail, sequenceContactIds } = await peopleOfThreads(tx, workspaceId, threadIds);
    const emails = [...new Set(people.flatMap((p) => p.emails))];
    const profileUrls = [...new Set(people.flatMap((p) => p.profileUrls))];
    const listed = await addEntries(tx, workspaceId, emails.map((value) => ({ kind: 'email' as const, value })), {
      reason: options.reason, source: 'inbox_bulk', createdBy: options.createdBy,
    });
    const reason = 'inbox_bulk_do_not_contact';
    await tx`
      insert into contact_stops (workspace_id, email, profile_url, sequence_contact_id, reason, created_by)
      select ${workspaceId}::uuid, e, null::text, null::uuid, ${reason}::text, ${options.createdBy}::text from unnest(${emails}::text[]) as e
      union all select ${workspaceId}::uuid, null, p, null, ${reason}, ${options.createdBy} from unnest(${profileUrls}::text[]) as p
      union all select ${workspaceId}::uuid, null, null, c, ${reason}, ${options.createdBy} from unnest(${sequenceContactIds}::uuid[]) as c`;
    return {
      result: { people: people.length, without_email: withoutEmail, added: listed.added, already_listed: listed.existing, stopped: people.length },
      wake: { emails, profileUrls, sequenceContactIds },
    };
  });
}

// IMAP mailboxes

interface MailboxRow {
  id: string;
  workspace_id: string;
  address: string;
  host: string;
  port: number;
  secure: boolean;
  username: string;
  folder: string;
  poll_seconds: number;
  enabled: boolean;
  uid_validity: number | null;
  last_uid: number;
  messages_recorded: number;
  last_polled_at: Date | null;
  last_error: string | null;
  created_at: Date;
}

export const toMailbox = (r: MailboxRow): Mailbox => ({
  id: r.id,
  address: r.address,
  host: r.host,
  port: r.port,
  secure: r.secure,
  username: r.username,
  folder: r.folder,
  poll_seconds: r.poll_seconds,
  enabled: r.enabled,
  uid_validity: r.uid_validity,
  last_uid: r.last_uid,
  messages_recorded: r.messages_recorded,
  last_polled_at: iso(r.last_polled_at),
  last_error: r.last_error,
  workflow_id: mailboxPollWorkflowId(r.id),
  created_at: r.created_at.toISOString(),
});

const mailboxColumns = (db: Db) => db`id, workspace_id, address, host, port, secure, username, folder, poll_seconds, enabled, uid_validity, last_uid,
  messages_recorded, last_polled_at, last_error, created_at`;

/** null when the workspace already reads that folder of that user on that host. */
export async function createMailbox(db: Db, workspaceId: string, m: MailboxCreate): Promise<Mailbox | null> {
  const [row] = await db<MailboxRow[]>`
    insert into inbox_mailboxes (workspace_id, address, host, port, secure, username, password, folder, poll_seconds)
    values (${workspaceId}, ${m.address.toLowerCase()}, ${m.host.toLowerCase()}, ${m.port}, ${m.secure}, ${m.username}, ${m.password}, ${m.folder}, ${m.poll_seconds})
    on conflict (workspace_id, host, username, folder) do nothing
    returning ${mailboxColumns(db)}`;
  return row ? toMailbox(row) : null;
}

export async function listMailboxes(db: Db, workspaceId: string): Promise<Mailbox[]> {
  return (await db<MailboxRow[]>`select ${mailboxColumns(db)} from inbox_mailboxes where workspace_id = ${workspaceId} order by created_at, id`).map(toMailbox);
}

export async function getMailbox(db: Db, workspaceId: string, mailboxId: string): Promise<Mailbox | null> {
  const [row] = await db<MailboxRow[]>`select ${mailboxColumns(db)} from inbox_mailboxes where id = ${mailboxId} and workspace_id = ${workspaceId}`;
  return row ? toMailbox(row) : null;
}

/** 'missing', 'taken', or the mailbox. Another host, user or folder starts the cursor again. */
export async function updateMailbox(db: Db, workspaceId: string, mailboxId: string, p: MailboxUpdate): Promise<Mailbox | 'missing' | 'taken'> {
  const current = await getMailbox(db, workspaceId, mailboxId);
  if (!current) return 'missing';
  const host = p.host?.toLowerCase() ?? current.host;
  const username = p.username ?? current.username;
  const folder = p.folder ?? current.folder;
  const moved = host !== current.host || username !== current.username || folder !== current.folder;
  try {
    const [row] = await db<MailboxRow[]>`
      update inbox_mailboxes set host = ${host}, username = ${username}, folder = ${folder}, port = ${p.port ?? current.port},
        secure = ${p.secure ?? current.secure}, password = coalesce(${p.password ?? null}, password),
        poll_seconds = ${p.poll_seconds ?? current.poll_seconds}, enabled = ${p.enabled ?? current.enabled},
        uid_validity = ${moved ? null : current.uid_validity}, last_uid = ${moved ? 0 : current.last_uid}, last_error = null, updated_at = now()
      where id = ${mailboxId} and workspace_id = ${workspaceId}
      returning ${mailboxColumns(db)}`;
    return row ? toMailbox(row) : 'missing';
  } catch (err) {
    if ((err as { code?: string }).code === '23505') return 'taken';
    throw err;
  }
}

export async function deleteMailbox(db: Db, workspaceId: string, mailboxId: string): Promise<boolean> {
  return (await db`delete from inbox_mailboxes where id = ${mailboxId} and workspace_id = ${workspaceId} returning id`).length === 1;
}

/** Starts the mailbox's polling workflow, or asks the running one to read now. */
export async function wakeMailbox(client: Client, taskQueue: string, mailbox: { id: string; workspaceId: string }): Promise<void> {
  await client.workflow.signalWithStart(mailboxPollWorkflow, {
    taskQueue,
    workflowId: mailboxPollWorkflowId(mailbox.id),
    args: [{ mailboxId: mailbox.id, workspaceId: mailbox.workspaceId }],
    signal: pollMailboxNowSignal,
    typedSearchAttributes: [{ key: WorkspaceIdKey, value: mailbox.workspaceId }],
  });
}
