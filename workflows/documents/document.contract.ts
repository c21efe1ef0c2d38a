/** The business-context document workflow's contract (workflows/documents/document.ts): its id, input, query and outcome. */
import { defineQuery } from '@temporalio/workflow';
import type { DocumentStep } from '../../domain/documents/documents.js';

/** One workflow id per document: a re-read starts the next run under the same id. */
export const documentWorkflowId = (documentId: string) => `document/${documentId}`;

export interface DocumentInput {
  documentId: string;
  workspaceId: string;
  /** The processing run this workflow does; every write it makes is guarded by it. */
  run: number;
}

/** How the run ended; `superseded` when it found the run over already (a retry) or replaced by a newer one. */
export type DocumentOutcome = { status: 'ready' } | { status: 'failed'; error: string } | { status: 'superseded' };

/** The steps this run has done, as the document's `steps` shows them (also in the memo, `steps`). */
export const documentStepsQuery = defineQuery<DocumentStep[]>('steps');

/** The ApplicationFailure type of a file that cannot be read or summarised: never retried, recorded as the error. */
export const unreadableDocumentFailure = 'unprocessable';
