/**
 * A business-context document's processing run (workflows/documents/document.ts, whose activities
 * in activities/documents/documents.ts hand each step here): take it to processing, read and chunk
 * its text, summarise it and make it ready, or record why it failed. Every write is guarded by
 * (status, run) in the store, so a retry or a stale run changes nothing; each records its step once
 * (by name) in the row and returns it to the workflow.
 *
 * A document that cannot be read throws `DocumentUnreadable` (the run fails with its message); a
 * drive that did not answer (rate limited, or failed) throws its `CloudDriveReadError`, to be
 * tried again.
 */
import {
  chunkChars,
  chunkStepDetail,
  chunkText,
  detectDocumentKind,
  extractStepDetail,
  keepsEditedSummary,
  kindContentTypes,
  kindOfContentType,
  step,
  summaryModelAttempts,
  type DocumentStep,
} from '../../domain/documents/documents.js';
import { ChatModelError, type ChatModel } from '../../integrations/chat-model.js';
import type { Integrations } from '../../integrations/config.js';
import type { DocumentExtractor } from '../../integrations/documents/extractor.js';
import {
  appendStep,
  beginRun,
  failRun,
  finishRun,
  readChunks,
  recordDriveFile,
  saveChunks,
} from '../../store/documents/documents.js';
import { CloudDriveReadError, readDriveFile } from '../cloud-drive/drive.js';
import type { ServiceDeps } from '../deps.js';
import { DocumentUnreadable, readDocumentText } from './read-text.js';
import { summariseText } from './summarise.js';

/** The run a step belongs to. */
export interface DocumentRun {
  documentId: string;
  run: number;
}

/** Runs the slow part of a step (a read, the model's summary) with the activity's heartbeat around it. */
export type WhileBeating = <T>(work: () => Promise<T>) => Promise<T>;

const unbeaten: WhileBeating = (work) => work();

/** What reading a document needs: the extractor's threads, and the cloud drive a `cloud_drive` document is read from, with the largest file read. */
export type ReadDeps = Pick<ServiceDeps, 'sql'> & {
  extractor: DocumentExtractor;
  drive?: { integrations: Pick<Integrations, 'cloudDrive' | 'secretsKeys'>; maxBytes: number } | undefined;
};

/** Pending → processing for this run; false when the run is over or a newer one replaced it. */
export async function beginDocumentRun({ sql }: Pick<ServiceDeps, 'sql'>, { documentId, run }: DocumentRun) {
  return (await beginRun(sql, documentId, run)) !== null;
}

/**
 * Reads the file's text (or, on a re-read whose bytes are gone, the text kept from before), cuts
 * it into chunks and stores them; `continue` is false when the run is over.
 */
export async function readAndChunkDocument(
  deps: ReadDeps,
  { documentId, run }: DocumentRun,
  whileBeating: WhileBeating = unbeaten,
): Promise<{ continue: boolean; steps: DocumentStep[] }> {
  const { sql } = deps;
  const doc = await beginRun(sql, documentId, run);
  if (!doc) return { continue: false, steps: [] };
  const started = new Date();
  let text: string;
  let detail: string;
  let content = doc.content;
  let contentType = doc.content_type;
  if (doc.source === 'cloud_drive' && doc.drive_file_id) {
    // Read from the drive at every run: a re-read sees the file as it is now.
    if (!deps.drive) throw new DocumentUnreadable('The cloud drive cannot be read from this process.');
    try {
      const file = await readDriveFile(sql, deps.drive.integrations, doc.workspace_id, doc.drive_file_id, {
        maxBytes: deps.drive.maxBytes,
      });
      const kind = detectDocumentKind(file.content.subarray(0, 1024), file.name, file.contentType);
      if (typeof kind !== 'string') throw new DocumentUnreadable(`"${file.name}": ${kind.refused}`);
      content = file.content;
      contentType = kindContentTypes[kind];
      await recordDriveFile(sql, documentId, run, {
        name: file.name,
        contentType,
        size: file.content.length,
        webViewLink: file.webViewLink,
      });
    } catch (error) {
      // A drive that did not answer is tried again; any other refusal of the drive is final.
      if (error instanceof CloudDriveReadError && error.reason !== 'rate_limited' && error.reason !== 'failed')
        throw new DocumentUnreadable(error.message);
      throw error;
    }
  }
  if (content) {
    const kind = kindOfContentType(contentType);
    if (!kind)
      throw new DocumentUnreadable(
        `Files of type ${contentType} are not read; upload a PDF, DOCX, Markdown, plain text or HTML file.`,
      );
    ({ text, detail } = await whileBeating(() => readDocumentText(kind, content, deps.extractor)));
  } else {
    text = (await readChunks(sql, documentId)).join('');
    detail = 'the text kept from the last read';
    if (!text)
      throw new DocumentUnreadable(
        'The uploaded file is no longer kept and no text was read from it before; upload the file again.',
      );
  }
  if (!text.trim()) {
    throw new DocumentUnreadable(
      'The document has no text to read (a scanned PDF holds only images); upload a version with selectable text.',
    );
  }
  const read = step('extract', extractStepDetail(detail, text.length), started, new Date());
  const chunkStarted = new Date();
  const chunks = chunkText(text, chunkChars);
  if (!(await saveChunks(sql, documentId, run, chunks))) return { continue: false, steps: [] };
  const chunked = step('chunk', chunkStepDetail(chunks.length), chunkStarted, new Date());
  await appendStep(sql, documentId, run, read);
  await appendStep(sql, documentId, run, chunked);
  return { continue: true, steps: [read, chunked] };
}

/**
 * Writes the summary (unless a person's edit is kept) and makes the document ready, once; `ready`
 * is false when the run is over. `attempt` is this try's number: a chat model that keeps failing
 * fails the run from the last one on, as one that refuses does at once. `chatModel` is read at the
 * call, so the model configured now is the one asked.
 */
export async function summariseDocument(
  deps: Pick<ServiceDeps, 'sql'> & { chatModel: () => ChatModel | null },
  { documentId, run, attempt }: DocumentRun & { attempt: number },
  whileBeating: WhileBeating = unbeaten,
): Promise<{ ready: boolean; steps: DocumentStep[] }> {
  const { sql } = deps;
  const doc = await beginRun(sql, documentId, run);
  if (!doc) return { ready: false, steps: [] };
  const started = new Date();
  let summary: { text: string; source: string } | null = null;
  let detail: string;
  if (keepsEditedSummary(doc)) {
    detail = 'kept the summary edited by hand (re-read without regenerate_summary)';
  } else {
    const chunks = await readChunks(sql, documentId);
    try {
      const written = await whileBeating(() => summariseText(chunks, deps.chatModel()));
      if (!written)
        throw new DocumentUnreadable(
          'No summary could be written: the document has no sentences to summarise. Upload a document with prose, or write the summary by hand.',
        );
      summary = written;
      detail = written.detail;
    } catch (error) {
      if (error instanceof ChatModelError && (!error.retryable || attempt >= summaryModelAttempts)) {
        throw new DocumentUnreadable(
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
}

/** Records why the run failed, once; nothing when the run is over already. */
export async function failDocumentRun(
  { sql }: Pick<ServiceDeps, 'sql'>,
  { documentId, run, error }: DocumentRun & { error: string },
): Promise<{ steps: DocumentStep[] }> {
  const now = new Date();
  const failed = step('failed', error, now, now);
  // The step goes in while the run is still processing, then the status.
  await appendStep(sql, documentId, run, failed);
  const row = await failRun(sql, documentId, run, error);
  return { steps: row ? [failed] : [] };
}
