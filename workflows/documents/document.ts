/**
 * Processes one business-context document (decision 035; the interface spec's Reference document
 * status): pending → processing, its text read and cut into chunks, a summary written (by the chat
 * model, or the local extract), then ready; or failed with a reason a person can act on. Each
 * activity records its step in the row; the same steps are this workflow's query `steps` and its
 * memo, for the Temporal UI. Every write is guarded by (status, run), so a worker killed anywhere
 * finishes the run exactly once.
 */
import { ActivityFailure, ApplicationFailure, proxyActivities, setHandler, upsertMemo } from '@temporalio/workflow';
import type { DocumentActivities } from '../../activities/documents/documents.js';
import type { DocumentStep } from '../../domain/documents/documents.js';
import {
  documentStepsQuery,
  unreadableDocumentFailure,
  type DocumentInput,
  type DocumentOutcome,
} from './document.contract.js';

const { readDocumentText, summariseDocument } = proxyActivities<DocumentActivities>({
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: '30 seconds',
  retry: {
    initialInterval: '1 second',
    maximumInterval: '10 seconds',
    maximumAttempts: 3,
    nonRetryableErrorTypes: [unreadableDocumentFailure],
  },
});
const { beginDocumentRun, failDocumentRun } = proxyActivities<DocumentActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 10 },
});

function unreadableReason(error: unknown): string | null {
  if (
    error instanceof ActivityFailure &&
    error.cause instanceof ApplicationFailure &&
    error.cause.type === unreadableDocumentFailure
  ) {
    return error.cause.message;
  }
  return null;
}

export async function documentWorkflow(input: DocumentInput): Promise<DocumentOutcome> {
  const steps: DocumentStep[] = [];
  setHandler(documentStepsQuery, () => steps);
  const record = (done: DocumentStep[]) => {
    steps.push(...done);
    upsertMemo({ steps: steps.map((s) => `${s.name} (${s.duration_ms} ms)${s.detail ? `: ${s.detail}` : ''}`) });
  };
  const args = { documentId: input.documentId, run: input.run };
  try {
    const begun = await beginDocumentRun(args);
    if (!begun) return { status: 'superseded' };
    const read = await readDocumentText(args);
    record(read.steps);
    if (!read.continue) return { status: 'superseded' };
    const summarised = await summariseDocument(args);
    record(summarised.steps);
    return summarised.ready ? { status: 'ready' } : { status: 'superseded' };
  } catch (error) {
    const reason = unreadableReason(error);
    const message =
      reason ?? 'The document could not be processed because of an internal error; re-read it, or upload it again.';
    const failed = await failDocumentRun({ ...args, error: message });
    record(failed.steps);
    if (reason !== null) return { status: 'failed', error: reason };
    throw error;
  }
}
