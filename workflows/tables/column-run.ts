/**
 * A column run: an enrichment column computed over rows (id `column-run/<run id>`). The run
 * record in Postgres is the truth (status, cursor, counts); the workflow claims rows a batch at a
 * time, keeps at most the provider's concurrency of rows in flight, lets each row's activity retry
 * within its own timeout, and ends the row in error (credits back) once retries are spent. A
 * cancel signal stops new rows from starting; the rows in flight finish, and the rows never
 * reached get back what they held. It continues as new between batches before its history grows
 * past a few thousand events.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  TimeoutFailure,
  continueAsNew,
  proxyActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { ColumnRunActivities } from '../../activities/tables/column-runs.js';
import type { ColumnRunStatus } from '../../domain/tables/enrichments.js';
import { ColumnRunProgressKey, ColumnRunStatusKey } from '../shared/search-attributes.js';
import {
  cancelColumnRunSignal,
  columnRunStateQuery,
  rowsAddedSignal,
  type ColumnRunInput,
  type ColumnRunView,
} from './column-run.contract.js';

const defaultBatchSize = 50;
/** A batch of 50 rows adds at most a few hundred events, so histories stay near 2,000. */
const defaultHistoryLimit = 1500;

const runs = proxyActivities<ColumnRunActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

function failureMessage(error: unknown): string {
  if (error instanceof ActivityFailure) {
    if (error.cause instanceof TimeoutFailure) return 'The provider did not answer in time.';
    if (error.cause instanceof ApplicationFailure && error.cause.message) return error.cause.message;
    return error.cause?.message ?? error.message;
  }
  return error instanceof Error ? error.message : String(error);
}

export async function columnRunWorkflow(input: ColumnRunInput): Promise<ColumnRunView> {
  const batchSize = input.batchSize ?? defaultBatchSize;
  const historyLimit = input.historyLimit ?? defaultHistoryLimit;
  const view: ColumnRunView = {
    runId: input.runId,
    status: 'starting',
    rowsStarted: 0,
    inFlight: 0,
    batches: 0,
    continued: input.continued ?? 0,
    rowsAddedSignals: 0,
    stopping: null,
    progress: 0,
  };
  setHandler(cancelColumnRunSignal, () => {
    view.stopping ??= 'cancelled';
  });
  setHandler(rowsAddedSignal, () => {
    view.rowsAddedSignals += 1;
  });
  setHandler(columnRunStateQuery, () => view);
  // Only where the starter set them: the time-skipping test server has no such attributes.
  const tracked = workflowInfo().typedSearchAttributes.get(ColumnRunStatusKey) !== undefined;
  const show = (status: ColumnRunStatus | 'gone') => {
    view.status = status;
    if (tracked && status !== 'gone') {
      upsertSearchAttributes([
        { key: ColumnRunStatusKey, value: status },
        { key: ColumnRunProgressKey, value: view.progress },
      ]);
    }
  };

  const plan = await runs.beginColumnRun({ runId: input.runId });
  if (plan.state === 'finished') {
    show(plan.status);
    return view;
  }
  show(plan.status);

  // One call's limit plus room for the guarded writes around it; retried twice, then the cell errs.
  const cells = proxyActivities<ColumnRunActivities>({
    startToCloseTimeout: `${plan.timeoutSeconds + 30} seconds`,
    retry: {
      initialInterval: '1 second',
      backoffCoefficient: 2,
      maximumAttempts: 3,
      nonRetryableErrorTypes: ['provider_refused', 'provider_unavailable'],
    },
  });

  const runRow = async (rowId: string) => {
    view.rowsStarted += 1;
    view.inFlight += 1;
    try {
      const outcome = await cells.runEnrichmentCell({ runId: input.runId, rowId });
      if (outcome === 'no_credits') view.stopping ??= 'out_of_credits';
      if (outcome === 'cancelled') view.stopping ??= 'cancelled';
    } catch (error) {
      await runs.failEnrichmentCell({
        runId: input.runId,
        workspaceId: input.workspaceId,
        rowId,
        error: failureMessage(error),
      });
    } finally {
      view.inFlight -= 1;
    }
  };

  let claims = 0;
  while (view.stopping === null) {
    // After at least one claim, so an execution always gets somewhere before it hands over.
    if (claims > 0 && (workflowInfo().historyLength >= historyLimit || workflowInfo().continueAsNewSuggested)) {
      await continueAsNew<typeof columnRunWorkflow>({ ...input, continued: view.continued + 1 });
    }
    const batch = await runs.claimRunBatch({ runId: input.runId, limit: batchSize });
    claims += 1;
    if (tracked && batch.progress !== view.progress)
      upsertSearchAttributes([{ key: ColumnRunProgressKey, value: batch.progress }]);
    view.progress = batch.progress;
    if (batch.stop) {
      view.stopping ??= batch.stop;
      break;
    }
    if (batch.rowIds.length === 0) {
      if (!batch.exhausted) continue; // every row of the batch kept its result
      const end = await runs.finishColumnRun({
        runId: input.runId,
        workspaceId: input.workspaceId,
        outcome: 'completed',
        wakes: batch.wakes,
      });
      if (end.finished) {
        view.progress = 100;
        show(end.status);
        return view;
      }
      continue; // rows were added since the claim: take them too
    }
    view.batches += 1;
    const queue = [...batch.rowIds];
    const lanes = Math.min(plan.concurrency, queue.length);
    await Promise.all(
      Array.from({ length: lanes }, async () => {
        while (view.stopping === null && queue.length > 0) await runRow(queue.shift()!);
      }),
    );
  }

  const stopping = view.stopping;
  const end = await runs.finishColumnRun({
    runId: input.runId,
    workspaceId: input.workspaceId,
    outcome: stopping === 'out_of_credits' ? 'failed' : 'cancelled',
    ...(stopping === 'out_of_credits' ? { reason: 'The workspace ran out of credits.' } : {}),
  });
  show(end.status);
  return view;
}
