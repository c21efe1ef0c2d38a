/**
 * Activities of a business-context document's processing run (workflows/documents/document.ts):
 * doors to services/documents/document-run.ts. The slow reads heartbeat; a document that cannot be
 * read fails the run, and a drive that did not answer is retried.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { whileBeating } from '../shared/heartbeat.js';
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import type { ChatModel } from '../../integrations/chat-model.js';
import type { DocumentExtractor } from '../../integrations/documents/extractor.js';
import { CloudDriveReadError } from '../../services/cloud-drive/drive.js';
import {
  beginDocumentRun,
  failDocumentRun,
  readAndChunkDocument,
  summariseDocument,
  type DocumentRun,
} from '../../services/documents/document-run.js';
import { DocumentUnreadable } from '../../services/documents/read-text.js';
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

function attempt(): number {
  try {
    return Context.current().info.attempt;
  } catch {
    return 1;
  }
}

/** The services' refusals as the workflow's failures: an unreadable document ends the run, a drive that did not answer is retried. */
async function failures<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof DocumentUnreadable)
      throw ApplicationFailure.nonRetryable(error.message, unreadableDocumentFailure);
    if (error instanceof CloudDriveReadError) throw ApplicationFailure.retryable(error.message, 'drive_unavailable');
    throw error;
  }
}

export function createDocumentActivities(deps: DocumentActivityDeps) {
  return {
    beginDocumentRun: (run: DocumentRun) => beginDocumentRun(deps, run),
    readDocumentText: (run: DocumentRun) => failures(readAndChunkDocument(deps, run, whileBeating)),
    summariseDocument: (run: DocumentRun) =>
      failures(summariseDocument(deps, { ...run, attempt: attempt() }, whileBeating)),
    failDocumentRun: (failed: DocumentRun & { error: string }) => failDocumentRun(deps, failed),
  };
}
export type DocumentActivities = ReturnType<typeof createDocumentActivities>;
