/** Reading and marking the inbox's threads and their messages (what the inbox routes and replies use). */
import type { Db } from '../../db/sql.js';
import type { Message, Thread, ThreadListQuery } from '../../domain/inbox/inbox.js';

export interface ThreadRow {
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

export const iso = (d: Date | null) => (d ? d.toISOString() : null);

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
  const [row] = await db<
    ThreadRow[]
  >`select ${threadColumns(db)} from inbox_threads t where t.id = ${threadId} and t.workspace_id = ${workspaceId}`;
  return row ?? null;
}

export async function threadMessages(db: Db, threadId: string): Promise<MessageRow[]> {
  return db<
    MessageRow[]
  >`select * from inbox_messages where thread_id = ${threadId} order by occurred_at, created_at, id`;
}

/** Sets unread and archived as asked (an absent field keeps its value); false when the thread is not the workspace's. */
export async function patchThread(
  db: Db,
  workspaceId: string,
  threadId: string,
  patch: { unread?: boolean; archived?: boolean },
): Promise<boolean> {
  const rows = await db`
    update inbox_threads set
      unread = coalesce(${patch.unread ?? null}::boolean, unread),
      archived_at = case when ${patch.archived ?? null}::boolean is null then archived_at
                         when ${patch.archived ?? null}::boolean then coalesce(archived_at, now()) else null end,
      updated_at = now()
    where id = ${threadId} and workspace_id = ${workspaceId} returning id`;
  return rows.length === 1;
}

/** Our reply answers the thread: it no longer reads as unread. */
export async function markThreadRead(db: Db, threadId: string): Promise<void> {
  await db`update inbox_threads set unread = false where id = ${threadId}`;
}

/** The contacts of the selected threads of the workspace (ids of other workspaces match nothing). */
export async function threadContacts(db: Db, workspaceId: string, threadIds: string[]) {
  return db<{ contact_email: string | null; contact_profile_url: string | null; sequence_contact_id: string | null }[]>`
    select contact_email, contact_profile_url, sequence_contact_id from inbox_threads
    where workspace_id = ${workspaceId} and id = any(${[...new Set(threadIds)]}::uuid[])`;
}

export async function messageByExternalId(db: Db, workspaceId: string, externalId: string): Promise<MessageRow | null> {
  const [row] = await db<
    MessageRow[]
  >`select * from inbox_messages where workspace_id = ${workspaceId} and external_id = ${externalId}`;
  return row ?? null;
}

export async function messageById(db: Db, id: string): Promise<MessageRow> {
  const [row] = await db<MessageRow[]>`select * from inbox_messages where id = ${id}`;
  return row!;
}

/** The mail server refused the reply; one it already took stays sent. */
export async function markDeliveryFailed(db: Db, messageId: string, error: string): Promise<void> {
  await db`update inbox_messages set delivery_status = 'failed', delivery_error = ${error} where id = ${messageId} and delivery_status <> 'sent'`;
}

export async function markDeliverySent(db: Db, messageId: string): Promise<void> {
  await db`update inbox_messages set delivery_status = 'sent', delivery_error = null where id = ${messageId}`;
}
