/**
 * Chat attachments (interface spec: Chat attachment pages): the upload row, its extracted pages
 * (written once, in the transaction that makes it ready) and the page read that stops at `limit`
 * pages or at a byte size. A person reaches an attachment through its conversation, as they reach
 * the conversation: a member their own, a workspace admin every member's, nothing of another
 * workspace. The assistant's turn reads by workspace (it has found the conversation already); the
 * extraction goes by id.
 */
import type { Db } from '../../db/sql.js';
import type { Reader } from './conversations.js';
import type {
  AttachmentKind,
  AttachmentStatus,
  ChatAttachment,
  ChatAttachmentPagesResponse,
} from '../../domain/assistant/attachments.js';

interface AttachmentRow {
  id: string;
  workspace_id: string;
  conversation_id: string;
  filename: string;
  kind: AttachmentKind;
  byte_size: number;
  page_count: number | null;
  status: AttachmentStatus;
  error: string | null;
  created_at: Date;
}

/** An attachment as the API shows it, with its workspace (the workflow's search attribute). */
export type AttachmentRecord = ChatAttachment & { workspace_id: string };

const columns = [
  'id',
  'workspace_id',
  'conversation_id',
  'filename',
  'kind',
  'byte_size',
  'page_count',
  'status',
  'error',
  'created_at',
];

const toAttachment = (r: AttachmentRow): AttachmentRecord => ({
  id: r.id,
  workspace_id: r.workspace_id,
  conversation_id: r.conversation_id,
  filename: r.filename,
  kind: r.kind,
  byte_size: r.byte_size,
  page_count: r.page_count,
  status: r.status,
  error: r.error,
  created_at: r.created_at.toISOString(),
});

/** The conversations `reader` may see (`c` is assistant_conversations), as the conversation routes judge them. */
const readableBy = (db: Db, reader: Reader) =>
  reader.admin ? db`true` : db`c.member_id is not distinct from ${reader.memberId}`;

/** Whether the reader may see the conversation (attachments go only to those, and are listed only from them). */
export async function conversationReadable(db: Db, reader: Reader, conversationId: string): Promise<boolean> {
  const [row] = await db`
    select 1 from assistant_conversations c
    where c.id = ${conversationId} and c.workspace_id = ${reader.workspaceId} and ${readableBy(db, reader)}`;
  return row !== undefined;
}

export interface NewAttachment {
  conversationId: string;
  filename: string;
  contentType: string;
  kind: AttachmentKind;
  content: Buffer;
}

/** The upload by the reader, `pending`, committed before its text is read; undefined when the reader cannot see the conversation. */
export async function insertAttachment(
  db: Db,
  reader: Reader,
  input: NewAttachment,
): Promise<AttachmentRecord | undefined> {
  const [row] = await db<AttachmentRow[]>`
    insert into chat_attachments (workspace_id, conversation_id, member_id, filename, content_type, kind, byte_size, content)
    select ${reader.workspaceId}, c.id, ${reader.memberId}, ${input.filename}, ${input.contentType}, ${input.kind}, ${input.content.length}, ${input.content}
    from assistant_conversations c
    where c.id = ${input.conversationId} and c.workspace_id = ${reader.workspaceId} and ${readableBy(db, reader)}
    returning ${db(columns)}`;
  return row ? toAttachment(row) : undefined;
}

/** An attachment the reader may see (through its conversation); undefined for any other id. */
export async function readableAttachment(db: Db, reader: Reader, id: string): Promise<AttachmentRecord | undefined> {
  const [row] = await db<AttachmentRow[]>`
    select ${db(columns.map((name) => `a.${name}`))} from chat_attachments a
    join assistant_conversations c on c.id = a.conversation_id
    where a.id = ${id} and a.workspace_id = ${reader.workspaceId} and ${readableBy(db, reader)}`;
  return row ? toAttachment(row) : undefined;
}

export async function getAttachment(db: Db, workspaceId: string, id: string): Promise<AttachmentRecord | undefined> {
  const [row] = await db<
    AttachmentRow[]
  >`select ${db(columns)} from chat_attachments where id = ${id} and workspace_id = ${workspaceId}`;
  return row ? toAttachment(row) : undefined;
}

/** A conversation's attachments, oldest first. */
export async function listAttachments(
  db: Db,
  workspaceId: string,
  conversationId: string,
): Promise<AttachmentRecord[]> {
  const rows = await db<AttachmentRow[]>`
    select ${db(columns)} from chat_attachments
    where conversation_id = ${conversationId} and workspace_id = ${workspaceId}
    order by created_at, id`;
  return rows.map(toAttachment);
}

/** What the extraction needs: the bytes while the attachment is pending. */
export interface AttachmentForExtraction {
  id: string;
  kind: AttachmentKind;
  status: AttachmentStatus;
  content: Buffer | null;
  page_count: number | null;
  error: string | null;
}

export async function attachmentForExtraction(db: Db, id: string): Promise<AttachmentForExtraction | undefined> {
  const [row] = await db<
    AttachmentForExtraction[]
  >`select id, kind, status, content, page_count, error from chat_attachments where id = ${id}`;
  return row;
}

/**
 * Writes the pages and makes the attachment ready, dropping its bytes, in one transaction; a
 * retry after it committed changes nothing. Answers the page count as stored.
 */
export async function finishAttachment(
  db: Db,
  id: string,
  pages: readonly string[],
): Promise<{ status: AttachmentStatus; page_count: number | null; error: string | null } | undefined> {
  const indexes = pages.map((_, i) => i);
  const [row] = await db<{ status: AttachmentStatus; page_count: number | null; error: string | null }[]>`
    with ready as (
      update chat_attachments set status = 'ready', page_count = ${pages.length}, content = null, ready_at = now()
      where id = ${id} and status = 'pending'
      returning id
    ), written as (
      insert into chat_attachment_pages (attachment_id, page_index, text)
      select ready.id, p.page_index, p.text
      from ready, unnest(${indexes}::int[], ${pages as string[]}::text[]) as p (page_index, text)
      on conflict do nothing
    )
    select coalesce((select 'ready' from ready), status) as status,
           coalesce((select ${pages.length}::int from ready), page_count) as page_count,
           error
    from chat_attachments where id = ${id}`;
  return row;
}

/** Records why the file could not be read and drops its bytes; an attachment already settled keeps its state. */
export async function failAttachment(db: Db, id: string, error: string): Promise<void> {
  await db`
    update chat_attachments set status = 'failed', error = ${error}, content = null
    where id = ${id} and status = 'pending'`;
}

/**
 * Pages `offset` onward, at most `limit`, stopping before the page that would take the read's
 * text past `bytesMax` (UTF-8), but always at least one page. `next_offset` is where the next
 * read starts, null when this one reaches the last page.
 */
export async function readAttachmentPages(
  db: Db,
  attachment: { id: string; filename: string; page_count: number },
  offset: number,
  limit: number,
  bytesMax: number,
): Promise<ChatAttachmentPagesResponse> {
  const end = {
    attachment_id: attachment.id,
    filename: attachment.filename,
    offset,
    page_count: attachment.page_count,
  };
  if (offset >= attachment.page_count) return { ...end, pages: [], next_offset: null };
  const rows = await db<{ page_index: number; text: string }[]>`
    with wanted as (
      select page_index, sum(text_bytes) over (order by page_index) as running
      from chat_attachment_pages
      where attachment_id = ${attachment.id} and page_index >= ${offset} and page_index < ${offset + limit}
    )
    select p.page_index, p.text
    from wanted w join chat_attachment_pages p on p.attachment_id = ${attachment.id} and p.page_index = w.page_index
    where w.running <= ${bytesMax} or w.page_index = ${offset}
    order by p.page_index`;
  const last = offset + rows.length;
  return { ...end, pages: rows.map((r) => r.text), next_offset: last < attachment.page_count ? last : null };
}
