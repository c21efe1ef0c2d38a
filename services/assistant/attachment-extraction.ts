/**
 * A chat attachment's text, read once (workflows/assistant/chat-attachment.ts): the upload's pages
 * extracted and stored, or why it cannot be read. A file the extractor refuses (encrypted, damaged,
 * an archive past its limits, past the time or memory limit) is a non-retryable failure of type
 * `unreadableFileFailure`; an attachment already settled answers as it stands, so a retry is safe.
 */
import type { Sql } from '../../db/sql.js';
import { nonRetryable } from '../../domain/shared/errors.js';
import { ExtractionRefused, type DocumentExtractor } from '../../integrations/documents/extractor.js';
import { attachmentForExtraction, failAttachment, finishAttachment } from '../../store/assistant/attachments.js';
import {
  unreadableFileFailure,
  type ChatAttachmentOutcome,
} from '../../workflows/assistant/chat-attachment.contract.js';
import type { WhileBeating } from '../documents/document-run.js';

export interface AttachmentExtractionDeps {
  sql: Sql;
  extractor: DocumentExtractor;
}

export async function extractChatAttachment(
  { sql, extractor }: AttachmentExtractionDeps,
  attachmentId: string,
  whileBeating: WhileBeating,
): Promise<ChatAttachmentOutcome> {
  const row = await attachmentForExtraction(sql, attachmentId);
  if (!row) throw nonRetryable('The attachment is gone.', 'not_found');
  if (row.status === 'ready') return { status: 'ready', pageCount: row.page_count ?? 0 };
  if (row.status === 'failed') return { status: 'failed', error: row.error ?? 'The file could not be read.' };
  if (!row.content) throw nonRetryable('The attachment has no content to read.', unreadableFileFailure);
  let pages: string[];
  // Alive while the file is read, so a worker that dies mid-file is noticed within the heartbeat timeout.
  try {
    pages = (await whileBeating(() => extractor.extract(row.kind, row.content!))).pages;
  } catch (error) {
    if (error instanceof ExtractionRefused) throw nonRetryable(error.message, unreadableFileFailure);
    throw error;
  }
  const stored = await finishAttachment(sql, attachmentId, pages);
  if (stored?.status === 'failed') return { status: 'failed', error: stored.error ?? 'The file could not be read.' };
  return { status: 'ready', pageCount: stored?.page_count ?? pages.length };
}

/** Records why the attachment cannot be read (the workflow's last word on a failed extraction). */
export async function failChatAttachment(
  { sql }: Pick<AttachmentExtractionDeps, 'sql'>,
  attachmentId: string,
  error: string,
) {
  await failAttachment(sql, attachmentId, error);
}
