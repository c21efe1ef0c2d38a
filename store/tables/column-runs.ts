import { writeFormulaCells } from './cells.js';
import { loadColumns } from './columns.js';
import type { Db } from '../../db/sql.js';
import {
    type ColumnRunStatus, type EnrichmentValue,
    type StoredEnrichmentConfig
} from '../../domain/tables/enrichments.js';
import { dependentsOf } from '../../domain/tables/formula.js';
import type { CellValue, Cells } from '../../domain/tables/tables.js';
import { ApiError } from '../../domain/shared/errors.js';
import { terminalRunStatuses, type RowEnd, type RunEndingDecision } from '../../domain/tables/column-run-outcome.js';
import { chargeHold, holdCredits, releaseHold } from '../platform/credits.js';

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

export type { CellOutcome, RunEnding } from '../../domain/tables/column-run-outcome.js';

export const terminal: ReadonlySet<ColumnRunStatus> = terminalRunStatuses;
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


// ---------------------------------------------------------------------------------------------
// The statements that apply a row's and a run's decisions (domain/tables/column-run-outcome.ts)

/** The run's status under its row lock: the order every run transaction takes its locks in (the run, then cells). */
export async function lockRun(db: Db, runId: string): Promise<{ status: ColumnRunStatus } | undefined> {
  const [run] = await db<{ status: ColumnRunStatus }[]>`select status from column_runs where id = ${runId} for update`;
  return run;
}

/** The run's row lock alone, before a row's result or failure is stored. */
export async function lockRunRow(db: Db, runId: string) {
  await db`select 1 from column_runs where id = ${runId} for update`;
}

/** pending or running -> running, this run's cells only; true when the enrichment cell moved. */
export async function claimRowCells(db: Db, ctx: RunContext, rowId: string): Promise<boolean> {
  const moved = await db<{ column_id: string }[]>`
    update table_cells set state = 'running', updated_at = now()
    where column_id = any(${ctx.group}::uuid[]) and row_id = ${rowId} and run_id = ${ctx.run.id} and state in ('pending', 'running')
    returning column_id`;
  return moved.some((m) => m.column_id === ctx.run.column_id);
}

/** running -> pending (too few credits): the run's end puts the cells back. */
export async function unclaimRowCells(db: Db, ctx: RunContext, rowId: string) {
  await db`
    update table_cells set state = 'pending', updated_at = now()
    where column_id = any(${ctx.group}::uuid[]) and row_id = ${rowId} and run_id = ${ctx.run.id} and state = 'running'`;
}

/**
 * Holds the row's price; false when the balance falls short (decided in the hold's statement,
 * which takes credits only where they are, and writes nothing then).
 */
export async function holdRowCredits(db: Db, workspaceId: string, amount: number, causeKey: string): Promise<boolean> {
  try {
    // Settled by this run (charge, release, or its end), so the hold need not lapse on its own soon.
    await holdCredits(db, { workspaceId, amount, causeKey, ttlSeconds: 7 * 86_400 });
    return true;
  } catch (error) {
    if (!(error instanceof ApiError && error.code === 'insufficient_credits')) throw error;
    return false;
  }
}

/** A row with an empty required input: its cells are skipped (compare-and-set on running), counted, and formulas follow. */
export async function skipRow(db: Db, ctx: RunContext, rowId: string, end: Extract<RowEnd, { kind: 'skip' }>) {
  await settleCells(db, ctx, rowId, ['running'], { state: 'skipped', values: null, error: end.error, cost: 0 });
  await count(db, ctx.run.id, 'rows_skipped');
  await recomputeReaders(db, ctx, rowId);
}

/** A stored result's end: its hold charged or released, the run's count, and the formulas that read the cells. */
export async function settleRow(db: Db, ctx: RunContext, rowId: string, end: Extract<RowEnd, { kind: 'settle' }>) {
  if (end.hold) await (end.hold.action === 'charge' ? chargeHold(db, end.hold.id, end.hold.amount) : releaseHold(db, end.hold.id));
  if (!end.count) return;
  await count(db, ctx.run.id, end.count.field, end.count.credits);
  await recomputeReaders(db, ctx, rowId);
}

/**
 * Ends the run as decided: its status (and error, unless none is given), then the cells it never
 * reached get back what they held (or say why they hold nothing), and the cells still running err.
 */
export async function endRun(db: Db, runId: string, end: Extract<RunEndingDecision, { kind: 'end' }>) {
  await db`
    update column_runs set status = ${end.status}, error = coalesce(${end.error}, error), finished_at = now(),
      rows_total = case when ${end.status} = 'completed' then rows_claimed else rows_total end
    where id = ${runId}`;
  const ctx = await loadContext(db, runId);
  if (!ctx) return;
  await db`
    update table_cells set state = previous ->> 'state', value = nullif(previous -> 'value', 'null'::jsonb), error = previous ->> 'error',
      cost = coalesce((previous ->> 'cost')::int, 0), previous = null, updated_at = now()
    where column_id = any(${ctx.group}::uuid[]) and run_id = ${runId} and state = 'pending' and previous is not null`;
  await db`
    update table_cells set state = 'skipped', error = ${end.skipReason}, updated_at = now()
    where column_id = any(${ctx.group}::uuid[]) and run_id = ${runId} and state = 'pending'`;
  await db`
    update table_cells set state = 'error', error = 'The run ended while this row was running.', updated_at = now()
    where column_id = any(${ctx.group}::uuid[]) and run_id = ${runId} and state = 'running'`;
}

/** Every hold of the run still open is returned. */
export async function releaseRunHolds(db: Db, workspaceId: string, runId: string) {
  const open = await db<{ id: string }[]>`
    select id from credit_holds
    where workspace_id = ${workspaceId} and status = 'held' and cause_key like ${`column-run:${runId}:%`}`;
  for (const hold of open) await releaseHold(db, hold.id);
}
