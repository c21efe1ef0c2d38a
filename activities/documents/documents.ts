/**
 * Activities of a business-context document's processing run (workflows/documents/document.ts):
 * take it to processing, read and chunk its text, summarise it and make it ready, or record why
 * it failed. Every write is guarded by (status, run) in the store, so a retry or a stale run
 * changes nothing; each records its step once (by name) in the row and returns it to the workflow.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Sql } from '../../db/sql.js';
import { chunkChars, chunkText, kindOfContentType, step, type DocumentStep } from '../../domain/documents/documents.js';
import type { ChatModel } from '../../integrations/chat-model.js';
import { ChatModelError } from '../../integrations/chat-model.js';
import type { DocumentExtractor } from '../../integrations/documents/extractor.js';
import { DocumentUnreadable, readDocumentText } from '../../services/documents/read-text.js';
import { summariseText } from '../../services/documents/summarise.js';
import { appendStep, beginRun, failRun, finishRun, readChunks, saveChunks } from '../../store/documents/documents.js';
import { unreadableDocumentFailure } from '../../workflows/documents/document.contract.js';

export interface DocumentActivityDeps {
  sql: Sql;
  extractor: DocumentExtractor;
  /** Read at each call, so the model configured now is the one asked. */
  chatModel: () => ChatModel | null;
}

interface RunArgs {
  documentId: string;
  run: number;
}

function heartbeating(): NodeJS.Timeout | undefined {
  let context: Context;
  try {
    context = Context.current();
  } catch {
    return undefined;
  }
  return setInterval(() => context.heartbeat(), 5_000);
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
      if (doc.content) {
        const kind = kindOfContentType(doc.content_type);
        if (!kind) throw unreadable(`Files of type ${doc.content_type} are not read; upload a PDF, DOCX, Markdown, plain text or HTML file.`);
        const beat = heartbeating();
        try {
          ({ text, detail } = await readDocumentText(kind, doc.content, deps.extractor));
        } catch (error) {
          if (error instanceof DocumentUnreadable) throw unreadable(error.message);
          throw error;
        } finally {
          clearInterval(beat);
        }
      } else {
        text = (await readChunks(sql, documentId)).join('');
        detail = 'the text kept from the last read';
        if (!text) throw unreadable('The uploaded file is no longer kept and no text was read from it before; upload the file again.');
      }
      if (!text.trim()) {
        throw unreadable('The document has no text to read (a scanned PDF holds only images); upload a version with selectable text.');
      }
      const read = step('extract', `${detail}, ${text.length.toLocaleString('en-US')} characters`, started, new Date());
      const chunkStarted = new Date();
      const chunks = chunkText(text, chunkChars);
      if (!(await saveChunks(sql, documentId, run, chunks))) return { continue: false, steps: [] };
      const chunked = step('chunk', `${chunks.length} chunk${chunks.length === 1 ? '' : 's'} of at most ${chunkChars.toLocaleString('en-US')} characters`, chunkStarted, new Date());
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
        const beat = heartbeating();
        try {
          const written = await summariseText(chunks, deps.chatModel());
          if (!written) throw unreadable('No summary could be written: the document has no sentences to summarise. Upload a document with prose, or write the summary by hand.');
          summary = written;
          detail = written.detail;
        } catch (error) {
          if (error instanceof ChatModelError && (!error.retryable || attempt() >= 3)) {
            throw unreadable(`The chat model could not summarise the document (${error.message}); re-read it later, or write the summary by hand.`);
          }
          throw error;
        } finally {
          clearInterval(beat);
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
