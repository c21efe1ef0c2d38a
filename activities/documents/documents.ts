/**
 * Activities of a business-context document's processing run (workflows/documents/document.ts):
 * take it to processing, read and chunk its text, summarise it and make it ready, or record why
 * it failed. Every write is guarded by (status, run) in the store, so a retry or a stale run
 * changes nothing; each records its step once (by name) in the row and returns it to the workflow.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { whileBeating } from '../shared/heartbeat.js';
import type { Sql } from '../../db/sql.js';
import {
  chunkChars,
  chunkText,
  detectDocumentKind,
  kindContentTypes,
  kindOfContentType,
  step,
  type DocumentStep,
} from '../../domain/documents/documents.js';
import type { Integrations } from '../../integrations/config.js';
import { CloudDriveReadError, readDriveFile } from '../../services/cloud-drive/drive.js';
import type { ChatModel } from '../../integrations/chat-model.js';
import { ChatModelError } from '../../integrations/chat-model.js';
import type { DocumentExtractor } from '../../integrations/documents/extractor.js';
import { DocumentUnreadable, readDocumentText } from '../../services/documents/read-text.js';
import { summariseText } from '../../services/documents/summarise.js';
import {
  appendStep,
  beginRun,
  failRun,
  finishRun,
  readChunks,
  recordDriveFile,
  saveChunks,
} from '../../store/documents/documents.js';
import { unreadableDocumentFailure } from '../../workflows/documents/document.contract.js';

type DriveIntegrations = Pick<Integrations, 'cloudDrive' | 'secretsKeys'>;

export interface DocumentActivityDeps {
  sql: Sql;
  extractor: DocumentExtractor;
  /** Read at each call, so the model configured now is the one asked. */
  chatModel: () => ChatModel | null;
  /** The cloud drive a `cloud_drive` document is read from, and the largest file read. */
  drive?: { integrations: DriveIntegrations; maxBytes: number };
}

interface RunArgs {
  documentId: string;
  run: number;
}

function attempt(): number {
  try {
    return Context.current().info.attempt;
  } catch {
    return 1;
  }
}

const unreadable = (message: string) => ApplicationFailure.nonRetryable(message, unreadableDocumentFailure);

export function createDocumentActivities(deps: DocumentActivityDeps) {
  const { sql } = deps;
  return {
    /** Pending → processing for this run; false when the run is over or a newer one replaced it. */
    async beginDocumentRun({ documentId, run }: RunArgs): Promise<boolean> {
      return (await beginRun(sql, documentId, run)) !== null;
    },

    /** Reads the file's text (or, on a re-read whose bytes are gone, the text kept from before), cuts it into chunks and stores them. */
    async readDocumentText({ documentId, run }: RunArgs): Promise<{ continue: boolean; steps: DocumentStep[] }> {
      const doc = await beginRun(sql, documentId, run);
      if (!doc) return { continue: false, steps: [] };
      const started = new Date();
      let text: string;
      let detail: string;
      let content = doc.content;
      let contentType = doc.content_type;
      if (doc.source === 'cloud_drive' && doc.drive_file_id) {
        // Read from the drive at every run: a re-read sees the file as it is now.
        if (!deps.drive) throw unreadable('The cloud drive cannot be read from this process.');
        try {
          const file = await readDriveFile(sql, deps.drive.integrations, doc.workspace_id, doc.drive_file_id, {
            maxBytes: deps.drive.maxBytes,
          });
          const kind = detectDocumentKind(file.content.subarray(0, 1024), file.name, file.contentType);
          if (typeof kind !== 'string') throw unreadable(`"${file.name}": ${kind.refused}`);
          content = file.content;
          contentType = kindContentTypes[kind];
          await recordDriveFile(sql, documentId, run, {
            name: file.name,
            contentType,
            size: file.content.length,
            webViewLink: file.webViewLink,
          });
        } catch (error) {
          if (error instanceof CloudDriveReadError) {
            if (error.reason === 'rate_limited' || error.reason === 'failed')
              throw ApplicationFailure.retryable(error.message, 'drive_unavailable');
            throw unreadable(error.message);
          }
          throw error;
        }
      }
      if (content) {
        const kind = kindOfContentType(contentType);
        if (!kind)
          throw unreadable(
            `Files of type ${contentType} are not read; upload a PDF, DOCX, Markdown, plain text or HTML file.`,
          );
        try {
          ({ text, detail } = await whileBeating(() => readDocumentText(kind, content, deps.extractor)));
        } catch (error) {
          if (error instanceof DocumentUnreadable) throw unreadable(error.message);
          throw error;
        }
      } else {
        text = (await readChunks(sql, documentId)).join('');
        detail = 'the text kept from the last read';
        if (!text)
          throw unreadable(
            'The uploaded file is no longer kept and no text was read from it before; upload the file again.',
          );
      }
      if (!text.trim()) {
        throw unreadable(
          'The document has no text to read (a scanned PDF holds only images); upload a version with selectable text.',
        );
      }
      const read = step('extract', `${detail}, ${text.length.toLocaleString('en-US')} characters`, started, new Date());
      const chunkStarted = new Date();
      const chunks = chunkText(text, chunkChars);
      if (!(await saveChunks(sql, documentId, run, chunks))) return { continue: false, steps: [] };
      const chunked = step(
        'chunk',
        `${chunks.length} chunk${chunks.length === 1 ? '' : 's'} of at most ${chunkChars.toLocaleString('en-US')} characters`,
        chunkStarted,
        new Date(),
      );
      await appendStep(sql, documentId, run, read);
      await appendStep(sql, documentId, run, chunked);
      return { continue: true, steps: [read, chunked] };
    },

    /** Writes the summary (unless a person's edit is kept) and makes the document ready, once. */
    async summariseDocument({ documentId, run }: RunArgs): Promise<{ ready: boolean; steps: DocumentStep[] }> {
      const doc = await beginRun(sql, documentId, run);
      if (!doc) return { ready: false, steps: [] };
      const started = new Date();
      let summary: { text: string; source: string } | null = null;
      let detail: string;
      if (doc.summary_edited && !doc.regenerate_summary) {
        detail = 'kept the summary edited by hand (re-read without regenerate_summary)';
      } else {
        const chunks = await readChunks(sql, documentId);
        try {
          const written = await whileBeating(() => summariseText(chunks, deps.chatModel()));
          if (!written)
            throw unreadable(
              'No summary could be written: the document has no sentences to summarise. Upload a document with prose, or write the summary by hand.',
            );
          summary = written;
          detail = written.detail;
        } catch (error) {
          if (error instanceof ChatModelError && (!error.retryable || attempt() >= 3)) {
            throw unreadable(
              `The chat model could not summarise the document (${error.message}); re-read it later, or write the summary by hand.`,
            );
          }
          throw error;
        }
      }
      const done = step('summarise', detail, started, new Date());
      await appendStep(sql, documentId, run, done);
      const finished = await finishRun(sql, documentId, run, summary);
      if (!finished) return { ready: false, steps: [done] };
      return { ready: true, steps: [done] };
    },

    /** Records why the run failed, once; nothing when the run is over already. */
    async failDocumentRun({ documentId, run, error }: RunArgs & { error: string }): Promise<{ steps: DocumentStep[] }> {
      const now = new Date();
      const failed = step('failed', error, now, now);
      // The step goes in while the run is still processing, then the status.
      await appendStep(sql, documentId, run, failed);
      const row = await failRun(sql, documentId, run, error);
      return { steps: row ? [failed] : [] };
    },
  };
}
export type DocumentActivities = ReturnType<typeof createDocumentActivities>;
