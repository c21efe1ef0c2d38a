/**
 * Reading a chat attachment's pages as text, as the API's readChatAttachmentPages and the
 * assistant's read_attachment tool (services/assistant/propose-card.ts) both do: they differ in
 * which attachments the caller sees and in how a refusal is told, not in the read.
 */
import { pageReadBytesMax, type ChatAttachmentPagesResponse } from '../../domain/assistant/attachments.js';
import { ApiError, ValidationRefusal, notFound } from '../../domain/shared/errors.js';
import { readableAttachment, readAttachmentPages, type AttachmentRecord } from '../../store/assistant/attachments.js';
import type { Reader } from '../../store/assistant/conversations.js';
import type { ServiceDeps } from '../deps.js';

/** The pages in the window, each read bounded by pageReadBytesMax; undefined while the text is unread (pending, failed). */
export async function readReadyAttachmentPages(
  { sql }: Pick<ServiceDeps, 'sql'>,
  attachment: AttachmentRecord,
  window: { offset: number; limit: number },
): Promise<ChatAttachmentPagesResponse | undefined> {
  if (attachment.status !== 'ready' || attachment.page_count === null) return undefined;
  return readAttachmentPages(
    sql,
    { id: attachment.id, filename: attachment.filename, page_count: attachment.page_count },
    window.offset,
    window.limit,
    pageReadBytesMax,
  );
}

/** readChatAttachmentPages: an attachment the reader sees (404 otherwise), 503 while it is read, 422 if it could not be. */
export async function readChatAttachmentPages(
  deps: Pick<ServiceDeps, 'sql'>,
  reader: Reader,
  attachmentId: string,
  window: { offset: number; limit: number },
): Promise<ChatAttachmentPagesResponse> {
  const attachment = await readableAttachment(deps.sql, reader, attachmentId);
  if (!attachment) throw notFound('Attachment');
  if (attachment.status === 'pending') {
    throw new ApiError('unavailable', "The attachment's text is still being read; try again shortly.", {
      'retry-after': '2',
    });
  }
  const read = await readReadyAttachmentPages(deps, attachment, window);
  if (!read) {
    throw new ValidationRefusal([
      {
        loc: ['path', 'attachment_id'],
        msg: `The file could not be read: ${attachment.error ?? 'unknown error'}`,
        type: 'unreadable_file',
        input: attachment.id,
      },
    ]);
  }
  return read;
}
