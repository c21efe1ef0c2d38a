/**
 * Conversations and their messages. A member reads their own conversations; a workspace admin
 * reads every member's. Nothing of another workspace is ever found (404).
 */
import type { Db, Sql } from '../../db/sql.js';
import type { StreamPart } from '../../domain/assistant/stream.js';
import { appendParts } from './parts.js';
import type { Conversation, Message } from '../../domain/assistant/assistant.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import { defaultConversationTitle } from '../../domain/assistant/assistant.js';

/** Who asks: their workspace, the member (null for a key without one) and whether they see everyone's. */
export interface Reader {
  workspaceId: string;
  memberId: string | null;
  admin: boolean;
}

interface ConversationRow {
  id: string;
  title: string;
  member_id: string | null;
  archived_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const toConversation = (r: ConversationRow): Conversation => ({
  id: r.id,
  title: r.title,
  member_id: r.member_id,
  archived: r.archived_at !== null,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
});

const readable = (db: Db, reader: Reader) =>
  reader.admin ? db`true` : db`member_id is not distinct from ${reader.memberId}`;

export async function createConversation(db: Db, reader: Reader, title: string): Promise<Conversation> {
  const [row] = await db<ConversationRow[]>`
    insert into assistant_conversations (workspace_id, member_id, title) values (${reader.workspaceId}, ${reader.memberId}, ${title})
    returning id, title, member_id, archived_at, created_at, updated_at`;
  return toConversation(row!);
}

export async function findConversation(db: Db, reader: Reader, conversationId: string): Promise<Conversation> {
  const [row] = await db<ConversationRow[]>`
    select id, title, member_id, archived_at, created_at, updated_at from assistant_conversations
    where id = ${conversationId} and workspace_id = ${reader.workspaceId} and ${readable(db, reader)}`;
  if (!row) throw notFound('Conversation');
  return toConversation(row);
}

export async function listConversations(
  db: Db,
  reader: Reader,
  q: { archived: boolean; allMembers: boolean; limit: number; offset: number },
): Promise<{ conversations: Conversation[]; total_count: number }> {
  const who = reader.admin && q.allMembers ? db`true` : db`member_id is not distinct from ${reader.memberId}`;
  const where = db`workspace_id = ${reader.workspaceId} and ${who} and (archived_at is not null) = ${q.archived}`;
  const rows = await db<ConversationRow[]>`
    select id, title, member_id, archived_at, created_at, updated_at from assistant_conversations
    where ${where} order by updated_at desc, id limit ${q.limit} offset ${q.offset}`;
  const [count] = await db<{ n: number }[]>`select count(*)::int as n from assistant_conversations where ${where}`;
  return { conversations: rows.map(toConversation), total_count: count?.n ?? 0 };
}

export async function updateConversation(
  db: Db,
  reader: Reader,
  conversationId: string,
  patch: { title?: string | undefined; archived?: boolean | undefined },
): Promise<Conversation> {
  const [row] = await db<ConversationRow[]>`
    update assistant_conversations set
      title = coalesce(${patch.title ?? null}, title),
      archived_at = case when ${patch.archived ?? null}::boolean is null then archived_at
                         when ${patch.archived ?? null}::boolean then coalesce(archived_at, now()) else null end,
      updated_at = now()
    where id = ${conversationId} and workspace_id = ${reader.workspaceId} and ${readable(db, reader)}
    returning id, title, member_id, archived_at, created_at, updated_at`;
  if (!row) throw notFound('Conversation');
  return toConversation(row);
}

interface MessageRow {
  id: string;
  conversation_id: string;
  role: 'user' | 'assistant';
  content: string;
  status: Message['status'];
  error: string | null;
  proposal_ids: string[];
  created_at: Date;
}

const toMessage = (r: MessageRow): Message => ({ ...r, created_at: r.created_at.toISOString() });

/** A conversation's messages, oldest first; an assistant message still streaming reads its text so far. */
export async function listMessages(db: Db, conversationId: string): Promise<Message[]> {
  const rows = await db<MessageRow[]>`
    select m.id, m.conversation_id, m.role,
      case when m.status = 'streaming'
        then coalesce((select string_agg(p.part->>'delta', '' order by p.seq) from assistant_message_parts p
                       where p.message_id = m.id and p.part->>'type' = 'text-delta'), '')
        else m.content end as content,
      m.status, m.error,
      coalesce((select array_agg(c.id order by c.position) from assistant_proposals c where c.message_id = m.id), '{}') as proposal_ids,
      m.created_at
    from assistant_messages m where m.conversation_id = ${conversationId}
    order by m.position`;
  return rows.map(toMessage);
}

export interface TurnMessages {
  userMessageId: string;
  assistantMessageId: string;
}

/**
 * The question and its answer's row (streaming) with the stream's `start` event, written together
 * so an answer always has its question; one statement, which also finds the conversation (404
 * when the reader may not read it, 409 when it is archived) and titles it from its first question.
 */
export async function insertTurn(
  db: Db,
  reader: Reader,
  conversationId: string,
  content: string,
  newTitle: string,
): Promise<TurnMessages> {
  const [row] = await db<
    { found: boolean; archived: boolean; title: string | null; user_id: string | null; assistant_id: string | null }[]
  >`
    with conversation as (
      select id, archived_at, title from assistant_conversations
      where id = ${conversationId} and workspace_id = ${reader.workspaceId} and ${readable(db, reader)}
    ), question as (
      insert into assistant_messages (workspace_id, conversation_id, role, member_id, content, status, completed_at)
      select ${reader.workspaceId}, id, 'user', ${reader.memberId}, ${content}, 'complete', now() from conversation where archived_at is null
      returning id
    ), answer as (
      insert into assistant_messages (workspace_id, conversation_id, role, content, status)
      select ${reader.workspaceId}, ${conversationId}, 'assistant', '', 'streaming' from question
      returning id
    ), started as (
      -- The stream's first event is written with the answer's row, so a client's first byte never waits on the turn.
      insert into assistant_message_parts (message_id, seq, part)
      select id, 1, jsonb_build_object('type', 'start', 'messageId', id) from answer
    ), touched as (
      update assistant_conversations c set updated_at = now(),
        title = case when c.title = ${defaultConversationTitle} then ${newTitle} else c.title end
      from question where c.id = ${conversationId}
    )
    select exists (select 1 from conversation) as found, exists (select 1 from conversation where archived_at is not null) as archived,
      (select id from question) as user_id, (select id from answer) as assistant_id`;
  if (!row?.found) throw notFound('Conversation');
  if (row.archived) throw new ApiError('conflict', 'This conversation is archived: unarchive it to ask more.');
  return { userMessageId: row.user_id!, assistantMessageId: row.assistant_id! };
}

/** The message of an answer, for the stream's reconnect: found only through a conversation the reader may read. */
export async function findAnswer(
  db: Db,
  reader: Reader,
  conversationId: string,
  messageId: string,
): Promise<{ id: string; status: Message['status'] }> {
  await findConversation(db, reader, conversationId);
  const [row] = await db<{ id: string; status: Message['status'] }[]>`
    select id, status from assistant_messages where id = ${messageId} and conversation_id = ${conversationId} and role = 'assistant'`;
  if (!row) throw notFound('Message');
  return row;
}

/** What the model reads of the conversation: the finished messages before this answer, oldest first. */
export async function conversationHistory(
  db: Db,
  assistantMessageId: string,
  maxMessages: number,
): Promise<{ role: 'user' | 'assistant'; content: string }[]> {
  const rows = await db<{ role: 'user' | 'assistant'; content: string }[]>`
    select role, content from (
      select m.role, m.content, m.position from assistant_messages m
      join assistant_messages a on a.id = ${assistantMessageId} and a.conversation_id = m.conversation_id
      where m.position < a.position and m.status = 'complete' and m.content <> ''
      order by m.position desc limit ${maxMessages}
    ) recent order by position`;
  return rows;
}

/** Context of an answer for its turn: whose conversation, in which workspace. */
export async function answerContext(db: Db, assistantMessageId: string) {
  const [row] = await db<
    { workspace_id: string; conversation_id: string; member_id: string | null; status: Message['status'] }[]
  >`
    select m.workspace_id, m.conversation_id, c.member_id, m.status
    from assistant_messages m join assistant_conversations c on c.id = m.conversation_id
    where m.id = ${assistantMessageId}`;
  return row;
}

/** Ends an answer: complete with its text, or failed with why. Compare-and-set on streaming. */
export async function endAnswer(
  db: Db,
  messageId: string,
  end: { status: 'complete' | 'failed'; content: string; error: string | null; modelKey: string | null },
) {
  await db`
    update assistant_messages set status = ${end.status}, content = ${end.content}, error = ${end.error},
      model_key = ${end.modelKey}, completed_at = now()
    where id = ${messageId} and status = 'streaming'`;
}

export async function memberDisplayName(db: Db, memberId: string): Promise<string | null> {
  const [row] = await db<{ display_name: string }[]>`select display_name from members where id = ${memberId}`;
  return row?.display_name ?? null;
}

/** Ends a streaming answer once: its last part and its row together; an answer already ended is left as it is. */
export async function closeAnswer(
  sql: Sql,
  messageId: string,
  last: StreamPart,
  end: Parameters<typeof endAnswer>[2],
): Promise<void> {
  await sql.begin(async (tx) => {
    const [still] =
      await tx`select 1 from assistant_messages where id = ${messageId} and status = 'streaming' for update`;
    if (!still) return;
    await appendParts(tx, messageId, [last]);
    await endAnswer(tx, messageId, end);
  });
}

/** Ends an answer whose turn could not be started, with an error event the stream shows. */
export async function failAnswer(sql: Sql, messageId: string, why: string): Promise<void> {
  await closeAnswer(
    sql,
    messageId,
    { type: 'error', errorText: why },
    { status: 'failed', content: '', error: why, modelKey: null },
  );
}
