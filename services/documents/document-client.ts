/** Starting a business-context document's processing run from the API (the row is committed `pending` first). */
import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { documentWorkflow } from '../../workflows/documents/document.js';
import { documentWorkflowId, type DocumentInput } from '../../workflows/documents/document.contract.js';
import { WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';
import type { Db } from '../../db/sql.js';
import { failRun } from '../../store/documents/documents.js';

/**
 * Starts the run's workflow. A workflow of an earlier run still closing (its document settled
 * already, which is what let the new run begin) is ended: its writes are guarded by its run, so it
 * can change nothing now. A retried start of the same run finds it started.
 */
export async function startDocumentRun(
  client: Client,
  taskQueue: string,
  document: { id: string; workspace_id: string; run: number },
  db?: Db,
): Promise<void> {
  const input: DocumentInput = { documentId: document.id, workspaceId: document.workspace_id, run: document.run };
  try {
    await client.workflow.start(documentWorkflow, {
      taskQueue,
      workflowId: documentWorkflowId(document.id),
      args: [input],
      workflowIdConflictPolicy: 'TERMINATE_EXISTING',
      typedSearchAttributes: [{ key: WorkspaceIdKey, value: document.workspace_id }],
      memo: { run: document.run },
    });
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return;
    // Never left pending with no workflow (a re-read would find it busy for ever): recorded failed, so it can be re-read.
    if (db)
      await failRun(
        db,
        document.id,
        document.run,
        'Processing could not be started (the workflow service did not answer); re-read the document.',
      ).catch(() => undefined);
    throw error;
  }
}
