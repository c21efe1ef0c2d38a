/**
 * An import run and a write-back (decision 042). Each works in chunks (an activity reads and lands
 * up to a few thousand records, committing the watermark or cursor with every page), so a retried
 * or repeated chunk adds nothing twice and the history stays small however many records there are.
 * A scheduled run is started by its import's Temporal Schedule.
 */
import { ActivityFailure, ApplicationFailure, proxyActivities, upsertMemo, uuid4 } from '@temporalio/workflow';
import type { CrmActivities } from '../../activities/sourcing/crm.js';
import {
  sourcingRefusedFailure,
  type ImportRunInput,
  type ImportRunOutcome,
  type WriteBackInput,
} from './imports.contract.js';

const { importChunk, writeBackChunkActivity } = proxyActivities<CrmActivities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '1 minute',
  retry: {
    initialInterval: '2 seconds',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: 10,
    nonRetryableErrorTypes: [sourcingRefusedFailure],
  },
});
const { beginImportRun, endImportRun, endWriteBack } = proxyActivities<CrmActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 20 },
});

const message = (error: unknown) =>
  error instanceof ActivityFailure && error.cause instanceof ApplicationFailure
    ? error.cause.message
    : 'The source could not be read after several tries; it is run again next time.';

export async function importRunWorkflow(input: ImportRunInput): Promise<ImportRunOutcome> {
  const runId = input.runId ?? uuid4();
  const begun = await beginImportRun({ importId: input.importId, runId, trigger: input.trigger });
  if (!begun) return { status: 'gone' };
  let read = 0;
  try {
    for (;;) {
      const chunk = await importChunk({ importId: input.importId, runId });
      read += chunk.read;
      upsertMemo({ progress: `${read} records read` });
      if (chunk.done) break;
    }
  } catch (error) {
    const why = message(error);
    await endImportRun({ runId, status: 'failed', error: why });
    return { status: 'failed', runId, error: why };
  }
  await endImportRun({ runId, status: 'succeeded', error: null });
  return { status: 'succeeded', runId };
}

export async function writeBackWorkflow(
  input: WriteBackInput,
): Promise<{ status: 'succeeded' | 'failed'; error?: string }> {
  try {
    for (;;) {
      const chunk = await writeBackChunkActivity({ writeBackId: input.writeBackId });
      upsertMemo({ progress: chunk.progress });
      if (chunk.done) break;
    }
  } catch (error) {
    const why = message(error);
    await endWriteBack({ writeBackId: input.writeBackId, status: 'failed', error: why });
    return { status: 'failed', error: why };
  }
  await endWriteBack({ writeBackId: input.writeBackId, status: 'succeeded', error: null });
  return { status: 'succeeded' };
}
