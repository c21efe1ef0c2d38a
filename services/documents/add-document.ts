/**
 * Adding a business-context document (operationIds uploadBusinessDocument, generateBusinessDocument,
 * decision 035): the row committed `pending`, then its processing started; and the document as the
 * API shows it.
 */
import { ApiError } from '../../domain/shared/errors.js';
import type { BusinessDocument } from '../../domain/documents/documents.js';
import { insertDocument, type DocumentRecord, type NewDocument } from '../../store/documents/documents.js';
import type { ServiceDeps } from '../deps.js';
import { startDocumentRun } from './document-client.js';

/** The document as the API shows it. */
export const shownDocument = (
  { workspace_id: _w, run: _r, summary_source: _s, ...doc }: DocumentRecord,
  inBudget = true,
): BusinessDocument => ({ ...doc, in_prompt_budget: inBudget });

/** The 409 of a workspace at max_documents. */
export const documentsFull = (max: number) =>
  new ApiError(
    'conflict',
    `The workspace keeps at most ${max} business-context documents (max_documents); delete one before adding another.`,
  );

/** A document committed `pending` (409 at max_documents), then its processing started. */
export async function addDocument(
  { sql, temporal }: Pick<ServiceDeps, 'sql' | 'temporal'>,
  maxDocuments: number,
  workspaceId: string,
  input: NewDocument,
): Promise<BusinessDocument> {
  const inserted = await insertDocument(sql, workspaceId, input, maxDocuments);
  if (inserted === 'full') throw documentsFull(maxDocuments);
  await startDocumentRun(temporal.client, temporal.taskQueue, inserted, sql);
  return shownDocument(inserted);
}
