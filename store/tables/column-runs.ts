import { writeFormulaCells } from './cells.js';
import { loadColumns } from './columns.js';
import type { Db } from '../../db/sql.js';
import {
    type ColumnRunStatus, type EnrichmentValue,
    type StoredEnrichmentConfig
} from '../../domain/tables/enrichments.js';
import { dependentsOf } from '../../domain/tables/formula.js';
import type { CellValue, Cells } from '../../domain/tables/tables.js';
import { releaseHold } from '../platform/credits.js';

export interface RunRecord {
  id: string;
  workspace_id: string;
  table_id: string;
  column_id: string;
  provider: string;
  status: ColumnRunStatus;
  trigger: 'manual' | 'auto';
  scope: 'all' | 'rows' | 'new_rows';
  row_ids: string[] | null;
  keep_existing_results: boolean;
  sweep_new_rows: boolean;
  wakes: number;
  cursor_seq: number;
  cursor_done: boolean;
  rows_total: number;
  rows_claimed: number;
  rows_done: number;
  rows_empty: number;
  rows_failed: number;
  rows_skipped: number;
  rows_kept: number;
  credits_charged: number;
  error: string | null;
  created_at: Date;
  started_at: Date | null;
  cancel_requested_at: Date | null;
  finished_at: Date | null;
}

export type ColumnRunPlan =
  | { state: 'finished'; status: ColumnRunStatus | 'gone' }
  | { state: 'running'; status: ColumnRunStatus; provider: string; concurrency: number; timeoutSeconds: number };

export interface RunBatch {
  /** Rows to run now; their cells are pending, owned by this run. */
  rowIds: string[];
  /** No row is left to claim: with no rows, the run may finish (if `wakes` is still the count). */
  exhausted: boolean;
  wakes: number;
  /** Rows processed out of the rows known, in percent. */
  progress: number;
  /** The run was asked to stop (cancel, table deleted) or its record is gone. */
  stop: 'cancelled' | 'gone' | null;
}

/** How a row's activity ended. `no_credits` and `cancelled` leave the cell pending for the run's end. */
export type CellOutcome = 'done' | 'empty' | 'skipped' | 'gone' | 'no_credits' | 'cancelled';

export type RunEnding = 'completed' | 'cancelled' | 'failed';

export const terminal: ReadonlySet<ColumnRunStatus> = new Set(['completed', 'cancelled', 'failed']);
export const runCauseKey = (runId: string, rowId: string) => `column-run:${runId}:${rowId}`;

export const processedOf = (r: Pick<RunRecord, 'rows_done' | 'rows_empty' | 'rows_failed' | 'rows_skipped' | 'rows_kept'>) =>
  r.rows_done + r.rows_empty + r.rows_failed + r.rows_skipped + r.rows_kept;
export const percentOf = (r: RunRecord) => Math.min(100, Math.floor((processedOf(r) * 100) / Math.max(1, r.rows_total)));

export interface RunContext {
  run: RunRecord;
  config: StoredEnrichmentConfig;
  /** The enrichment column first, then its output columns. */
  group: string[];
  outputOf: Map<string, string>;
}

export async function loadContext(db: Db, runId: string): Promise<RunContext | null> {
  const [run] = await db<RunRecord[]>`select * from column_runs where id = ${runId}`;
  if (!run) return null;
  const columns = await db<{ id: string; parent_column_id: string | null; config: StoredEnrichmentConfig & { output?: string } }[]>`
    select id, parent_column_id, config from table_columns where id = ${run.column_id} or parent_column_id = ${run.column_id} order by position`;
  const parent = columns.find((c) => c.id === run.column_id);
  if (!parent) return null;
  const children = columns.filter((c) => c.parent_column_id === run.column_id && typeof c.config.output === 'string');
  return {
    run,
    config: { provider: parent.config.provider, inputs: parent.config.inputs ?? {}, outputs: parent.config.outputs ?? [], options: parent.config.options ?? {} },
    group: [parent.id, ...children.map((c) => c.id)],
    outputOf: new Map(children.map((c) => [c.id, c.config.output!])),
  };
}

export const isEmpty = (v: CellValue | undefined) => v === null || v === undefined || (typeof v === 'string' && v.trim() === '');
export const brief = (text: string) => (text.length > 1000 ? `${text.slice(0, 997)}...` : text);

/** Each mapped input's value: an input column's from the row, a computed column's once done. */
export async function readInputs(db: Db, ctx: RunContext, rowId: string): Promise<{ cells: Cells; inputs: Map<string, CellValue> } | null> {
  const [row] = await db<{ cells: Cells }[]>`select cells from table_rows where id = ${rowId}`;
  if (!row) return null;
  const mapped = Object.entries(ctx.config.inputs);
  const computedIds = mapped.map(([, id]) => id).filter((id) => !Object.hasOwn(row.cells, id));
  const computed = new Map<string, CellValue>();
  if (computedIds.length > 0) {
    const done = await db<{ column_id: string; value: CellValue }[]>`
      select column_id, value from table_cells where column_id = any(${computedIds}::uuid[]) and row_id = ${rowId} and state = 'done'`;
    for (const c of done) computed.set(c.column_id, c.value);
  }
  const value = (id: string): CellValue => (Object.hasOwn(row.cells, id) ? (row.cells[id] ?? null) : (computed.get(id) ?? null));
  return { cells: row.cells, inputs: new Map(mapped.map(([name, id]) => [name, value(id)])) };
}

/** Formulas that read the enrichment's cells follow them. */
export async function recomputeReaders(db: Db, ctx: RunContext, rowId: string) {
  const columns = await loadColumns(db, ctx.run.table_id);
  if (columns.plan.order.length === 0) return;
  const affected = dependentsOf(columns.plan, ctx.group);
  if (![...affected].some((id) => columns.byId.get(id)?.kind === 'formula')) return;
  const [row] = await db<{ id: string; cells: Cells }[]>`select id, cells from table_rows where id = ${rowId}`;
  if (row) await writeFormulaCells(db, columns, [row], affected);
}

export async function count(db: Db, runId: string, field: 'rows_done' | 'rows_empty' | 'rows_failed' | 'rows_skipped', credits = 0) {
  await db`update column_runs set ${db(field)} = ${db(field)} + 1, credits_charged = credits_charged + ${credits} where id = ${runId}`;
}

export async function holdOf(db: Db, workspaceId: string, causeKey: string): Promise<string | undefined> {
  const [hold] = await db<{ id: string }[]>`select id from credit_holds where workspace_id = ${workspaceId} and cause_key = ${causeKey}`;
  return hold?.id;
}

export async function releaseRowHold(db: Db, workspaceId: string, runId: string, rowId: string) {
  const holdId = await holdOf(db, workspaceId, runCauseKey(runId, rowId));
  if (holdId) await releaseHold(db, holdId);
}

/** The cells of one row in the group, moved from `from` to a settled state; true when the enrichment cell moved. */
export async function settleCells(
  db: Db,
  ctx: RunContext,
  rowId: string,
  from: string[],
  to: { state: 'done' | 'error' | 'skipped'; values: Record<string, EnrichmentValue> | null; error: string | null; cost: number },
): Promise<boolean> {
  const [parentId] = ctx.group;
  const field = (values: Record<string, EnrichmentValue>, name: string) => (Object.hasOwn(values, name) ? values[name]! : null);
  const parentValue = to.values ? Object.fromEntries(ctx.config.outputs.map((name) => [name, field(to.values!, name)])) : null;
  const writes = ctx.group.map((id) => ({
    column_id: id,
    value: id === parentId ? parentValue : to.values ? field(to.values, ctx.outputOf.get(id)!) : null,
    cost: id === parentId ? to.cost : 0,
  }));
  const moved = await db<{ column_id: string }[]>`
    update table_cells c set state = ${to.state}, value = x.value, error = ${to.error}, cost = x.cost, previous = null, updated_at = now()
    from jsonb_to_recordset(${db.json(writes as never)}) as x (column_id uuid, value jsonb, cost int)
    where c.column_id = x.column_id and c.row_id = ${rowId} and c.run_id = ${ctx.run.id} and c.state = any(${from}::text[])
    returning c.column_id`;
  return moved.some((m) => m.column_id === parentId);
}

