/**
 * Column runs as the API sees them: the run record (Postgres is the truth for status, counts and
 * progress), starting one, asking one to stop, and auto_run's "rows were added" that starts a run
 * or wakes the one going. One going run per column is a partial unique index, so two row adds at
 * once end with one run, and a run finishing at the same moment as a row add either sees the
 * add (its finish compares `wakes`) or lets a new run take the rows.
 */
import type { Client } from '@temporalio/client';
import type { FastifyBaseLogger } from 'fastify';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import type { Db, Sql } from '../../db/sql.js';
import type { ColumnRun, ColumnRunCreate, ColumnRunListQuery } from '../../domain/tables/enrichments.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import {
  cancelColumnRunSignal,
  columnRunWorkflowId,
  rowsAddedSignal,
} from '../../workflows/tables/column-run.contract.js';
import { signalColumnRun, startColumnRun } from './column-run-client.js';
import {
  countRunRows,
  failUnstartedRun,
  findGoingRunId,
  findRunColumn,
  findRunTable,
  findTableRun,
  insertManualRun,
  listAutoRunColumns,
  listTableRuns,
  markRunCancelling,
  processedOf,
  startOrWakeAutoRun,
  tableHasColumn,
  type RunRecord,
} from '../../store/tables/column-runs.js';

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

interface Temporal {
  client: Client;
  taskQueue: string;
}

async function requireTableRow(db: Db, workspaceId: string, tableId: string) {
  const table = await findRunTable(db, workspaceId, tableId);
  if (!table) throw notFound('Table');
  return table;
}

/** Records a manual run of an enrichment column and starts its workflow. */
export async function createColumnRun(
  sql: Sql,
  temporal: Temporal,
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
    await startColumnRun(temporal.client, temporal.taskQueue, run);
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
  temporal: Temporal,
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
  deps: { sql: Sql; temporal: Temporal; enrichmentProviders?: EnrichmentProviders; log: FastifyBaseLogger },
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
