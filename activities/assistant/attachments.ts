/**
 * Activities of the chat-attachment workflow: extract an upload's text and store it once, or
 * record why it cannot be read. A file the extractor refuses (encrypted, damaged, an archive past
 * its limits, past the time or memory limit) is a non-retryable `unprocessable` failure.
 */
import { whileBeating } from '../shared/heartbeat.js';
import { ApplicationFailure } from '@temporalio/common';
import type { Sql } from '../../db/sql.js';
import { ExtractionRefused, type DocumentExtractor } from '../../integrations/documents/extractor.js';
import { attachmentForExtraction, failAttachment, finishAttachment } from '../../store/assistant/attachments.js';
import {
  unreadableFileFailure,
  type ChatAttachmentOutcome,
} from '../../workflows/assistant/chat-attachment.contract.js';

export function createChatAttachmentActivities({ sql, extractor }: { sql: Sql; extractor: DocumentExtractor }) {
  return {
    /** Reads the file and writes its pages; an attachment already settled answers as it stands (a retry). */
    async extractChatAttachment({ attachmentId }: { attachmentId: string }): Promise<ChatAttachmentOutcome> {
      const row = await attachmentForExtraction(sql, attachmentId);
      if (!row) throw ApplicationFailure.nonRetryable('The attachment is gone.', 'not_found');
      if (row.status === 'ready') return { status: 'ready', pageCount: row.page_count ?? 0 };
      if (row.status === 'failed') return { status: 'failed', error: row.error ?? 'The file could not be read.' };
      if (!row.content)
        throw ApplicationFailure.nonRetryable('The attachment has no content to read.', unreadableFileFailure);
      let pages: string[];
      // Alive while the file is read, so a worker that dies mid-file is noticed within the heartbeat timeout.
      try {
        pages = (await whileBeating(() => extractor.extract(row.kind, row.content!))).pages;
      } catch (error) {
        if (error instanceof ExtractionRefused)
          throw ApplicationFailure.nonRetryable(error.message, unreadableFileFailure);
        throw error;
      }
      const stored = await finishAttachment(sql, attachmentId, pages);
      if (stored?.status === 'failed')
        return { status: 'failed', error: stored.error ?? 'The file could not be read.' };
      return { status: 'ready', pageCount: stored?.page_count ?? pages.length };
    },

    async failChatAttachment({ attachmentId, error }: { attachmentId: string; error: string }): Promise<void> {
      await failAttachment(sql, attachmentId, error);
    },
  };
}
export type ChatAttachmentActivities = ReturnType<typeof createChatAttachmentActivities>;
