/**
 * Column runs as the API sees them: the run record (Postgres is the truth for status, counts and
 * progress), starting one, asking one to stop, and auto_run's "rows were added" that starts a run
 * or wakes the one going. One going run per column is a partial unique index, so two row adds at
 * once end with one run, and a run finishing at the same moment as a row add either sees the
 * add (its finish compares `wakes`) or lets a new run take the rows.
 *
 * Below them, a run's work as its workflow (`column-run/<run id>`) does it through
 * activities/tables/column-runs.ts, each step a guarded statement so a retried activity changes
 * nothing twice. Cells move pending -> running -> done/error/skipped by compare-and-set on their
 * state and on the run that claimed them (table_cells.run_id), so a cancelled or superseded run
 * can never write over a newer one. Credits: a hold per row as it starts (cause key unique per run
 * and row), charged in the transaction that stores a result, returned for an empty result or a
 * failure.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import type { Db, Sql } from '../../db/sql.js';
import {
  EnrichmentError,
  type ColumnRun,
  type ColumnRunCreate,
  type ColumnRunListQuery,
  type ColumnRunStatus,
  type EnrichmentOutcome,
} from '../../domain/tables/enrichments.js';
import {
  afterBatch,
  batchSource,
  decideRowOutcome,
  decideRunEnding,
  splitBatch,
  type CellOutcome,
  type RowSnapshot,
  type RunEnding,
} from '../../domain/tables/column-run-outcome.js';
import type { CellValue } from '../../domain/tables/tables.js';
import { ApiError, nonRetryable, notFound, retryable } from '../../domain/shared/errors.js';
import type { ServiceDeps } from '../deps.js';
import {
  cancelColumnRunSignal,
  columnRunWorkflowId,
  rowsAddedSignal,
} from '../../workflows/tables/column-run.contract.js';
import { signalColumnRun, startColumnRun } from './column-run-client.js';
import {
  advanceRunCursor,
  beginRun,
  brief,
  cancelRunForDeletedTable,
  claimRowCells,
  count,
  countRunRows,
  endRun,
  failGoingRun,
  failUnstartedRun,
  findGoingRunId,
  findRun,
  findRunColumn,
  findRunTable,
  findTableDeleted,
  findTableRun,
  holdOf,
  holdRowCredits,
  insertManualRun,
  listAutoRunColumns,
  listTableRuns,
  loadContext,
  lockRun,
  lockRunRecord,
  lockRunRow,
  markRunCancelling,
  pendRowCells,
  percentOf,
  pickNewRows,
  pickScopeRows,
  processedOf,
  readInputs,
  recomputeReaders,
  releaseRowHold,
  releaseRunHolds,
  runCauseKey,
  settleCells,
  settleRow,
  skipRow,
  startOrWakeAutoRun,
  tableHasColumn,
  terminal,
  unclaimRowCells,
  type ColumnRunPlan,
  type PickedRow,
  type RunBatch,
  type RunRecord,
} from '../../store/tables/column-runs.js';
import type { TemporalHandle } from '../deps.js';

const finished = new Set(['completed', 'cancelled', 'failed']);
const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function toColumnRun(r: RunRecord): ColumnRun {
  const processed = processedOf(r);
  const progress = r.rows_total === 0 ? (finished.has(r.status) ? 1 : 0) : Math.min(1, processed / r.rows_total);
  return {
    id: r.id,
    table_id: r.table_id,
    column_id: r.column_id,
    provider: r.provider,
    status: r.status,
    trigger: r.trigger,
    scope: r.scope,
    keep_existing_results: r.keep_existing_results,
    rows_total: r.rows_total,
    rows_processed: processed,
    rows_done: r.rows_done,
    rows_empty: r.rows_empty,
    rows_failed: r.rows_failed,
    rows_skipped: r.rows_skipped,
    rows_kept: r.rows_kept,
    credits_charged: r.credits_charged,
    progress: Math.round(progress * 1000) / 1000,
    error: r.error,
    workflow_id: columnRunWorkflowId(r.id),
    created_at: r.created_at.toISOString(),
    started_at: iso(r.started_at),
    cancel_requested_at: iso(r.cancel_requested_at),
    finished_at: iso(r.finished_at),
  };
}

async function requireTableRow(db: Db, workspaceId: string, tableId: string) {
  const table = await findRunTable(db, workspaceId, tableId);
  if (!table) throw notFound('Table');
  return table;
}

/** Records a manual run of an enrichment column and starts its workflow. */
export async function createColumnRun(
  sql: Sql,
  temporal: TemporalHandle,
  providers: EnrichmentProviders,
  target: { workspaceId: string; tableId: string; columnId: string },
  body: ColumnRunCreate,
  /** An assistant card's hold that pays for the run ahead (its rows then hold nothing themselves). */
  options: { fundingHoldId?: string } = {},
): Promise<RunRecord> {
  const run = await sql.begin(async (tx) => {
    const table = await requireTableRow(tx, target.workspaceId, target.tableId);
    const column = await findRunColumn(tx, target.tableId, target.columnId);
    if (!column) throw notFound('Column');
    if (column.kind !== 'enrichment' || column.parent_column_id !== null || !column.provider) {
      throw new ApiError(
        'conflict',
        `"${column.name}" is not an enrichment column; only enrichment columns run (output columns run with their enrichment).`,
      );
    }
    if (!providers.get(column.provider))
      throw new ApiError('conflict', `The provider ${column.provider} is not available in this environment.`);
    const rowIds = body.row_ids ? [...new Set(body.row_ids.map((id) => id.toLowerCase()))] : null;
    const rowsTotal = await countRunRows(tx, target.tableId, rowIds);
    const inserted = await insertManualRun(tx, {
      workspaceId: target.workspaceId,
      tableId: target.tableId,
      columnId: target.columnId,
      provider: column.provider,
      rowIds,
      keepExistingResults: body.keep_existing_results ?? table.keep_existing_results,
      rowsTotal,
      fundingHoldId: options.fundingHoldId ?? null,
    });
    if (!inserted) {
      const going = await findGoingRunId(tx, target.columnId);
      throw new ApiError(
        'conflict',
        `A run of "${column.name}" is already going (${going ?? 'just started'}); cancel it or wait for it to finish.`,
      );
    }
    return inserted;
  });
  try {
    await startColumnRun(temporal, run);
  } catch (error) {
    // The record is committed first; without its workflow it would wait forever, so it fails here.
    await failUnstartedRun(sql, run.id);
    throw error;
  }
  return run;
}

export async function getColumnRun(db: Db, workspaceId: string, tableId: string, runId: string): Promise<RunRecord> {
  await requireTableRow(db, workspaceId, tableId);
  const run = await findTableRun(db, workspaceId, tableId, runId);
  if (!run) throw notFound('Run');
  return run;
}

export async function listColumnRuns(
  db: Db,
  workspaceId: string,
  tableId: string,
  query: ColumnRunListQuery & { columnId?: string },
): Promise<RunRecord[]> {
  await requireTableRow(db, workspaceId, tableId);
  if (query.columnId && !(await tableHasColumn(db, tableId, query.columnId))) throw notFound('Column');
  return listTableRuns(db, workspaceId, tableId, {
    columnId: query.columnId,
    active: query.active,
    limit: query.limit,
  });
}

/**
 * Marks the run `cancelling` and tells its workflow (signal-with-start, so a run whose start was
 * lost still ends). Asking again while it stops answers the run as it is; a finished run is 409.
 */
export async function cancelColumnRun(
  sql: Sql,
  temporal: TemporalHandle,
  workspaceId: string,
  tableId: string,
  runId: string,
): Promise<RunRecord> {
  const current = await getColumnRun(sql, workspaceId, tableId, runId);
  if (finished.has(current.status))
    throw new ApiError('conflict', `The run is already ${current.status}; nothing changed.`);
  const marked = await markRunCancelling(sql, runId);
  const run = marked ?? (await getColumnRun(sql, workspaceId, tableId, runId));
  if (finished.has(run.status)) throw new ApiError('conflict', `The run is already ${run.status}; nothing changed.`);
  await signalColumnRun(temporal.client, temporal.taskQueue, run, cancelColumnRunSignal);
  return run;
}

/**
 * auto_run: rows were added to the table. Each enrichment column gets a run of its new rows, or
 * its going run is woken (its `wakes` count moves, so it cannot finish without looking again).
 * The rows are already committed, so a failure here is logged, never answered: the next add, or
 * a manual run, picks the rows up.
 */
export async function runNewRows(
  deps: { sql: Sql; temporal: TemporalHandle; enrichmentProviders?: EnrichmentProviders; log: FastifyBaseLogger },
  workspaceId: string,
  tableId: string,
  added: number,
): Promise<void> {
  if (added <= 0) return;
  try {
    const columns = await listAutoRunColumns(deps.sql, workspaceId, tableId);
    for (const column of columns) {
      if (!deps.enrichmentProviders?.get(column.provider)) continue;
      const run = await startOrWakeAutoRun(deps.sql, {
        workspaceId,
        tableId,
        columnId: column.id,
        provider: column.provider,
        keepExistingResults: column.keep_existing_results,
        added,
      });
      await signalColumnRun(deps.temporal.client, deps.temporal.taskQueue, run, rowsAddedSignal);
    }
  } catch (err) {
    deps.log.warn({ err, tableId }, 'auto_run could not start or wake a column run');
  }
}

// ---- A run's work, as its workflow does it ----

/** What a run's work reaches: the database, and the enrichment providers as the worker holds them. */
type RunWorkDeps = Pick<ServiceDeps, 'sql'> & { enrichmentProviders: EnrichmentProviders };

/** queued -> running, and what the workflow needs to pace the rows; a finished run says so. */
export async function beginColumnRun({ sql, enrichmentProviders }: RunWorkDeps, runId: string): Promise<ColumnRunPlan> {
  const started = await beginRun(sql, runId);
  const run = started ?? (await findRun(sql, runId));
  if (!run) return { state: 'finished', status: 'gone' };
  if (terminal.has(run.status)) return { state: 'finished', status: run.status };
  const provider = enrichmentProviders.get(run.provider);
  if (!provider) {
    // The worker's environment lost the provider (a key removed): nothing can be computed.
    const failed = await failGoingRun(sql, runId, `The provider ${run.provider} is not available in this environment.`);
    return { state: 'finished', status: failed?.status ?? run.status };
  }
  return {
    state: 'running',
    status: run.status,
    provider: run.provider,
    concurrency: provider.info.concurrency,
    timeoutSeconds: provider.info.timeout_seconds,
  };
}

/**
 * The next rows, in row order: first a pass over the run's scope by a cursor, then (when rows
 * were added while it went) the rows with no cell yet. Rows whose result is kept are counted
 * and left alone; the others' cells become pending for this run.
 */
export async function claimRunBatch(
  { sql }: Pick<ServiceDeps, 'sql'>,
  { runId, limit }: { runId: string; limit: number },
): Promise<RunBatch> {
  return sql.begin(async (tx): Promise<RunBatch> => {
    const run = await lockRunRecord(tx, runId);
    if (!run || terminal.has(run.status)) return { rowIds: [], exhausted: true, wakes: 0, progress: 0, stop: 'gone' };
    const table = await findTableDeleted(tx, run.table_id);
    if (!table || table.deleted) {
      await cancelRunForDeletedTable(tx, runId);
      return { rowIds: [], exhausted: true, wakes: run.wakes, progress: percentOf(run), stop: 'cancelled' };
    }
    if (run.status === 'cancelling')
      return { rowIds: [], exhausted: true, wakes: run.wakes, progress: percentOf(run), stop: 'cancelled' };

    const source = batchSource(run);
    const picked: PickedRow[] =
      source === 'scope'
        ? await pickScopeRows(tx, run, run.cursor_seq, limit)
        : source === 'new_rows'
          ? await pickNewRows(tx, run, limit)
          : [];
    const { cursor, cursorDone, exhausted } = afterBatch(run, source, picked, limit);
    const { kept, toRun } = splitBatch(picked, run.keep_existing_results);
    if (toRun.length > 0) {
      const ctx = await loadContext(tx, runId);
      if (!ctx) return { rowIds: [], exhausted: true, wakes: run.wakes, progress: 0, stop: 'gone' };
      await pendRowCells(tx, runId, ctx.group, toRun);
    }
    const updated = await advanceRunCursor(tx, runId, { cursor, cursorDone, picked: picked.length, kept: kept.length });
    return { rowIds: toRun, exhausted, wakes: updated.wakes, progress: percentOf(updated), stop: null };
  });
}

/**
 * One row: hold, call the provider (with `signal`, the activity's cancellation), store the result
 * and settle the hold. Provider failures throw (the workflow's retry policy decides).
 */
export async function runEnrichmentCell(
  { sql, enrichmentProviders }: RunWorkDeps,
  { runId, rowId }: { runId: string; rowId: string },
  signal: () => AbortSignal,
): Promise<CellOutcome> {
  const ctx = await loadContext(sql, runId);
  if (!ctx) return 'gone';
  const provider = enrichmentProviders.get(ctx.run.provider);
  if (!provider)
    throw nonRetryable(
      `The provider ${ctx.run.provider} is not available in this environment.`,
      'provider_unavailable',
    );
  const workspaceId = ctx.run.workspace_id;
  const causeKey = runCauseKey(runId, rowId);
  const required = provider.info.inputs.filter((f) => f.required).map((f) => f.name);

  // The claim, the inputs and the hold commit before the provider's call.
  type Started = { snap: RowSnapshot; inputs: Map<string, CellValue> } | { outcome: CellOutcome };
  const started = await sql.begin(async (tx): Promise<Started> => {
    // The run row first, then cells: the order every run transaction takes its locks in (the
    // change feed's triggers lock the table when a cell is written).
    let snap: RowSnapshot = {
      price: provider.info.price_credits,
      prepaid: ctx.run.funding_hold_id !== null,
      required,
      run: (await lockRun(tx, runId)) ?? null,
    };
    let inputs = new Map<string, CellValue>();
    for (;;) {
      const d = decideRowOutcome(snap);
      switch (d.kind) {
        case 'claim':
          snap = { ...snap, claimed: await claimRowCells(tx, ctx, rowId) };
          continue;
        case 'read_inputs': {
          const read = await readInputs(tx, ctx, rowId);
          if (read) inputs = read.inputs;
          snap = { ...snap, inputs: read?.inputs ?? null };
          continue;
        }
        case 'hold':
          snap = { ...snap, held: await holdRowCredits(tx, workspaceId, d.amount, causeKey) };
          continue;
        case 'call':
          return { snap, inputs };
        case 'skip':
          await skipRow(tx, ctx, rowId, d);
          return { outcome: d.outcome };
        case 'unclaim':
          await unclaimRowCells(tx, ctx, rowId);
          return { outcome: d.outcome };
        case 'end':
          return { outcome: d.outcome };
        default:
          throw new Error(`Unexpected ${d.kind} before the provider's call`);
      }
    }
  });
  if ('outcome' in started) return started.outcome;

  let result: EnrichmentOutcome;
  try {
    result = await provider.run(
      { inputs: started.inputs, options: new Map(Object.entries(ctx.config.options)) },
      signal(),
    );
  } catch (error) {
    const failure =
      error instanceof EnrichmentError
        ? error
        : new EnrichmentError(brief((error as Error).message ?? String(error)), true);
    if (!failure.retryable) throw nonRetryable(brief(failure.message), 'provider_refused');
    throw retryable(brief(failure.message), 'provider_failed');
  }

  // The result is stored and the hold settled (charged, or released for an empty result) in one transaction.
  return sql.begin(async (tx): Promise<CellOutcome> => {
    await lockRunRow(tx, runId);
    let snap: RowSnapshot = { ...started.snap, result };
    for (;;) {
      const d = decideRowOutcome(snap);
      switch (d.kind) {
        case 'store':
          snap = {
            ...snap,
            settled: await settleCells(tx, ctx, rowId, ['running'], {
              state: 'done',
              values: d.values,
              error: null,
              cost: d.cost,
            }),
          };
          continue;
        case 'read_hold':
          snap = { ...snap, holdId: (await holdOf(tx, workspaceId, causeKey)) ?? null };
          continue;
        case 'settle':
          await settleRow(tx, ctx, rowId, d);
          return d.outcome;
        default:
          throw new Error(`Unexpected ${d.kind} after the provider's call`);
      }
    }
  });
}

/** A row whose provider failed for good (retries spent, or refused): the cell errs and its credits go back. */
export async function failEnrichmentCell(
  { sql }: Pick<ServiceDeps, 'sql'>,
  { runId, workspaceId, rowId, error }: { runId: string; workspaceId: string; rowId: string; error: string },
): Promise<void> {
  const ctx = await loadContext(sql, runId);
  await sql.begin(async (tx) => {
    await lockRunRow(tx, runId);
    if (
      ctx &&
      (await settleCells(tx, ctx, rowId, ['pending', 'running'], {
        state: 'error',
        values: null,
        error: brief(error),
        cost: 0,
      }))
    ) {
      await count(tx, runId, 'rows_failed');
      await recomputeReaders(tx, ctx, rowId);
    }
    await releaseRowHold(tx, workspaceId, runId, rowId);
  });
}

/**
 * Ends the run. `completed` only while no row add woke it since its last claim (`wakes`);
 * otherwise it answers not finished and the workflow claims again. Cells the run never reached
 * get back what they held (or say why they hold nothing), and any hold of the run still open
 * is returned.
 */
export async function finishColumnRun(
  { sql }: Pick<ServiceDeps, 'sql'>,
  input: { runId: string; workspaceId: string; outcome: RunEnding; wakes?: number; reason?: string },
): Promise<{ finished: boolean; status: ColumnRunStatus | 'gone' }> {
  return sql.begin(async (tx) => {
    const run = await lockRunRecord(tx, input.runId);
    const decision = decideRunEnding({
      run: run ?? null,
      outcome: input.outcome,
      wakes: input.wakes,
      reason: input.reason,
    });
    if (decision.kind === 'not_yet') return { finished: false, status: decision.status };
    if (decision.kind === 'end') await endRun(tx, input.runId, decision);
    await releaseRunHolds(tx, input.workspaceId, input.runId);
    return { finished: true, status: decision.status };
  });
}
