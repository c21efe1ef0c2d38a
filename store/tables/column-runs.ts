import { recordWorkspaceEvent, withinTransaction } from '../notifications/outbox.js';
import { writeFormulaCells } from './cells.js';
import { loadColumns } from './columns.js';
import type { Db } from '../../db/sql.js';
import {
  type ColumnRunStatus,
  type EnrichmentValue,
  type StoredEnrichmentConfig,
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
  /** The assistant card's hold that paid for this run ahead, if one did. */
  funding_hold_id: string | null;
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

export const terminal: ReadonlySet<ColumnRunStatus> = terminalRunStatuses;
export const runCauseKey = (runId: string, rowId: string) => `column-run:${runId}:${rowId}`;

export const processedOf = (
  r: Pick<RunRecord, 'rows_done' | 'rows_empty' | 'rows_failed' | 'rows_skipped' | 'rows_kept'>,
) => r.rows_done + r.rows_empty + r.rows_failed + r.rows_skipped + r.rows_kept;
export const percentOf = (r: RunRecord) =>
  Math.min(100, Math.floor((processedOf(r) * 100) / Math.max(1, r.rows_total)));

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
  const columns = await db<
    { id: string; parent_column_id: string | null; config: StoredEnrichmentConfig & { output?: string } }[]
  >`
    select id, parent_column_id, config from table_columns where id = ${run.column_id} or parent_column_id = ${run.column_id} order by position`;
  const parent = columns.find((c) => c.id === run.column_id);
  if (!parent) return null;
  const children = columns.filter((c) => c.parent_column_id === run.column_id && typeof c.config.output === 'string');
  return {
    run,
    config: {
      provider: parent.config.provider,
      inputs: parent.config.inputs ?? {},
      outputs: parent.config.outputs ?? [],
      options: parent.config.options ?? {},
    },
    group: [parent.id, ...children.map((c) => c.id)],
    outputOf: new Map(children.map((c) => [c.id, c.config.output!])),
  };
}

export const brief = (text: string) => (text.length > 1000 ? `${text.slice(0, 997)}...` : text);

/** Each mapped input's value: an input column's from the row, a computed column's once done. */
export async function readInputs(
  db: Db,
  ctx: RunContext,
  rowId: string,
): Promise<{ cells: Cells; inputs: Map<string, CellValue> } | null> {
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
  const value = (id: string): CellValue =>
    Object.hasOwn(row.cells, id) ? (row.cells[id] ?? null) : (computed.get(id) ?? null);
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

export async function count(
  db: Db,
  runId: string,
  field: 'rows_done' | 'rows_empty' | 'rows_failed' | 'rows_skipped',
  credits = 0,
) {
  await db`update column_runs set ${db(field)} = ${db(field)} + 1, credits_charged = credits_charged + ${credits} where id = ${runId}`;
}

export async function holdOf(db: Db, workspaceId: string, causeKey: string): Promise<string | undefined> {
  const [hold] = await db<
    { id: string }[]
  >`select id from credit_holds where workspace_id = ${workspaceId} and cause_key = ${causeKey}`;
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
  to: {
    state: 'done' | 'error' | 'skipped';
    values: Record<string, EnrichmentValue> | null;
    error: string | null;
    cost: number;
  },
): Promise<boolean> {
  const [parentId] = ctx.group;
  const field = (values: Record<string, EnrichmentValue>, name: string) =>
    Object.hasOwn(values, name) ? values[name]! : null;
  const parentValue = to.values
    ? Object.fromEntries(ctx.config.outputs.map((name) => [name, field(to.values!, name)]))
    : null;
  const writes = ctx.group.map((id) => ({
    column_id: id,
    value: id === parentId ? parentValue : to.values ? field(to.values, ctx.outputOf.get(id)!) : null,
    cost: id === parentId ? to.cost : 0,
  }));
  const moved = await db<{ column_id: string }[]>`
    update table_cells c set state = ${to.state}, value = x.value, error = ${to.error}, cost = x.cost, previous = null, updated_at = now()
    from jsonb_to_recordset(${db.json(writes)}) as x (column_id uuid, value jsonb, cost int)
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
  if (end.hold)
    await (end.hold.action === 'charge' ? chargeHold(db, end.hold.id, end.hold.amount) : releaseHold(db, end.hold.id));
  if (!end.count) return;
  await count(db, ctx.run.id, end.count.field, end.count.credits);
  await recomputeReaders(db, ctx, rowId);
}

/**
 * Ends the run as decided: its status (and error, unless none is given), then the cells it never
 * reached get back what they held (or say why they hold nothing), and the cells still running err.
 */
export async function endRun(db: Db, runId: string, end: Extract<RunEndingDecision, { kind: 'end' }>) {
  const [ended] = await db<RunRecord[]>`
    update column_runs set status = ${end.status}, error = coalesce(${end.error}, error), finished_at = now(),
      rows_total = case when ${end.status} = 'completed' then rows_claimed else rows_total end
    where id = ${runId} returning *`;
  if (ended) await recordColumnRunFinished(db, ended);
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

// ---------------------------------------------------------------------------------------------
// The run record as the API sees it: starting a run, reading and listing runs, asking one to stop,
// and auto_run's "rows were added"

/** The table's default for keeping existing results; undefined when the table is not there (or deleted). */
export async function findRunTable(
  db: Db,
  workspaceId: string,
  tableId: string,
): Promise<{ keep_existing_results: boolean } | undefined> {
  const [table] = await db<{ keep_existing_results: boolean }[]>`
    select keep_existing_results from tables where workspace_id = ${workspaceId} and id = ${tableId} and deleted_at is null`;
  return table;
}

export interface RunColumn {
  kind: string;
  parent_column_id: string | null;
  name: string;
  provider: string | null;
}

/** The column a run would compute, with its provider. */
export async function findRunColumn(db: Db, tableId: string, columnId: string): Promise<RunColumn | undefined> {
  const [column] = await db<RunColumn[]>`
      select kind, parent_column_id, name, config ->> 'provider' as provider from table_columns
      where id = ${columnId} and table_id = ${tableId}`;
  return column;
}

/** The rows a run would go over: the table's, or those of `rowIds` that it has. */
export async function countRunRows(db: Db, tableId: string, rowIds: string[] | null): Promise<number> {
  const [counted] = await db<{ n: number }[]>`
      select count(*)::int as n from table_rows where table_id = ${tableId} ${rowIds ? db`and id = any(${rowIds}::uuid[])` : db``}`;
  return counted!.n;
}

/** A manual run, queued; undefined when the column has a run going already (one per column, a partial unique index). */
export async function insertManualRun(
  db: Db,
  run: {
    workspaceId: string;
    tableId: string;
    columnId: string;
    provider: string;
    rowIds: string[] | null;
    keepExistingResults: boolean;
    rowsTotal: number;
    fundingHoldId?: string | null;
  },
): Promise<RunRecord | undefined> {
  const [inserted] = await db<RunRecord[]>`
      insert into column_runs (workspace_id, table_id, column_id, provider, trigger, scope, row_ids, keep_existing_results, rows_total, funding_hold_id)
      values (${run.workspaceId}, ${run.tableId}, ${run.columnId}, ${run.provider}, 'manual', ${run.rowIds ? 'rows' : 'all'}, ${run.rowIds},
              ${run.keepExistingResults}, ${run.rowsTotal}, ${run.fundingHoldId ?? null})
      on conflict (column_id) where status in ('queued', 'running') do nothing
      returning *`;
  return inserted;
}

/** The id of the column's run going (queued or running), if any. */
export async function findGoingRunId(db: Db, columnId: string): Promise<string | undefined> {
  const [going] = await db<
    { id: string }[]
  >`select id from column_runs where column_id = ${columnId} and status in ('queued', 'running')`;
  return going?.id;
}

/** queued -> failed: a run whose workflow could not be started would otherwise wait forever. */
export async function failUnstartedRun(db: Db, runId: string) {
  await db`
      update column_runs set status = 'failed', error = 'The run could not be started; try again.', finished_at = now()
      where id = ${runId} and status = 'queued'`;
}

/** One run of the table, within the workspace. */
export async function findTableRun(
  db: Db,
  workspaceId: string,
  tableId: string,
  runId: string,
): Promise<RunRecord | undefined> {
  const [run] = await db<
    RunRecord[]
  >`select * from column_runs where id = ${runId} and table_id = ${tableId} and workspace_id = ${workspaceId}`;
  return run;
}

export async function tableHasColumn(db: Db, tableId: string, columnId: string): Promise<boolean> {
  const [column] = await db`select 1 from table_columns where id = ${columnId} and table_id = ${tableId}`;
  return Boolean(column);
}

/** The table's runs, newest first; of one column, and only those going (or only those not) when asked. */
export async function listTableRuns(
  db: Db,
  workspaceId: string,
  tableId: string,
  query: { columnId?: string; active?: boolean; limit: number },
): Promise<RunRecord[]> {
  const going = db`status in ('queued', 'running', 'cancelling')`;
  return db<RunRecord[]>`
    select * from column_runs
    where workspace_id = ${workspaceId} and table_id = ${tableId}
      ${query.columnId ? db`and column_id = ${query.columnId}` : db``}
      ${query.active === undefined ? db`` : query.active ? db`and ${going}` : db`and not ${going}`}
    order by created_at desc, id desc limit ${query.limit}`;
}

/** queued or running -> cancelling; undefined when the run was neither. */
export async function markRunCancelling(db: Db, runId: string): Promise<RunRecord | undefined> {
  const [marked] = await db<RunRecord[]>`
    update column_runs set status = 'cancelling', cancel_requested_at = now()
    where id = ${runId} and status in ('queued', 'running') returning *`;
  return marked;
}

/** The table's enrichment columns, in order, when the table runs them on new rows (auto_run). */
export async function listAutoRunColumns(
  db: Db,
  workspaceId: string,
  tableId: string,
): Promise<{ id: string; provider: string; keep_existing_results: boolean }[]> {
  return db<{ id: string; provider: string; keep_existing_results: boolean }[]>`
      select c.id, c.config ->> 'provider' as provider, t.keep_existing_results
      from tables t join table_columns c on c.table_id = t.id
      where t.id = ${tableId} and t.workspace_id = ${workspaceId} and t.auto_run and t.deleted_at is null
        and c.kind = 'enrichment' and c.parent_column_id is null
      order by c.position`;
}

/**
 * An auto run of the new rows, or the column's going run woken: its `wakes` count moves, so it
 * cannot finish without looking again, and it sweeps the rows with no cell yet.
 */
export async function startOrWakeAutoRun(
  db: Db,
  run: {
    workspaceId: string;
    tableId: string;
    columnId: string;
    provider: string;
    keepExistingResults: boolean;
    added: number;
  },
): Promise<RunRecord> {
  const [started] = await db<RunRecord[]>`
        insert into column_runs (workspace_id, table_id, column_id, provider, trigger, scope, keep_existing_results, sweep_new_rows, cursor_done, rows_total)
        values (${run.workspaceId}, ${run.tableId}, ${run.columnId}, ${run.provider}, 'auto', 'new_rows', ${run.keepExistingResults}, true, true, ${run.added})
        on conflict (column_id) where status in ('queued', 'running') do update set
          wakes = column_runs.wakes + 1, sweep_new_rows = true, rows_total = column_runs.rows_total + excluded.rows_total
        returning *`;
  return started!;
}

// ---------------------------------------------------------------------------------------------
// The run's workflow: beginning, claiming batches of rows, and reading the run under its lock

/** queued -> running (started_at kept from a first start); undefined when the run was not queued. */
export async function beginRun(db: Db, runId: string): Promise<RunRecord | undefined> {
  const [started] = await db<RunRecord[]>`
        update column_runs set status = 'running', started_at = coalesce(started_at, now())
        where id = ${runId} and status = 'queued' returning *`;
  return started;
}

export async function findRun(db: Db, runId: string): Promise<RunRecord | undefined> {
  const [run] = await db<RunRecord[]>`select * from column_runs where id = ${runId}`;
  return run;
}

/** Any going status -> failed with the reason; undefined when the run had finished already. */
export async function failGoingRun(db: Db, runId: string, error: string): Promise<RunRecord | undefined> {
  return withinTransaction(db, async (tx) => {
    const [failed] = await tx<RunRecord[]>`
          update column_runs set status = 'failed', error = ${error}, finished_at = now()
          where id = ${runId} and status in ('queued', 'running', 'cancelling') returning *`;
    if (failed) await recordColumnRunFinished(tx, failed);
    return failed;
  });
}

/** A run that ended (completed, cancelled or failed) is a workspace event, in the transaction that ends it. */
async function recordColumnRunFinished(db: Db, run: RunRecord): Promise<void> {
  await recordWorkspaceEvent(db, {
    workspaceId: run.workspace_id,
    type: 'column_run.finished',
    payload: {
      run_id: run.id,
      table_id: run.table_id,
      column_id: run.column_id,
      status: run.status,
      error: run.error ?? null,
    },
  });
}

/** The whole run record under its row lock. */
export async function lockRunRecord(db: Db, runId: string): Promise<RunRecord | undefined> {
  const [run] = await db<RunRecord[]>`select * from column_runs where id = ${runId} for update`;
  return run;
}

/** Whether the table is deleted; undefined when it is gone altogether. */
export async function findTableDeleted(db: Db, tableId: string): Promise<{ deleted: boolean } | undefined> {
  const [table] = await db<
    { deleted: boolean }[]
  >`select deleted_at is not null as deleted from tables where id = ${tableId}`;
  return table;
}

/** The table was deleted: the run is asked to stop. */
export async function cancelRunForDeletedTable(db: Db, runId: string) {
  await db`update column_runs set status = 'cancelling', error = 'The table was deleted.', cancel_requested_at = now() where id = ${runId}`;
}

/** A row a batch picked, with the run column's cell as it is (state null: no cell). */
export interface PickedRow {
  id: string;
  seq: number;
  state: string | null;
  has_value: boolean;
}

/** The next rows of the run's scope after the cursor, in row order. */
export async function pickScopeRows(db: Db, run: RunRecord, cursor: number, limit: number): Promise<PickedRow[]> {
  return db<PickedRow[]>`
            select r.id, r.seq, c.state, c.value is not null and c.value <> 'null'::jsonb as has_value
            from table_rows r left join table_cells c on c.column_id = ${run.column_id} and c.row_id = r.id
            where r.table_id = ${run.table_id} and r.seq > ${cursor}
              ${run.scope === 'rows' ? db`and r.id = any(${run.row_ids ?? []}::uuid[])` : db``}
            order by r.seq limit ${limit}`;
}

/** The first rows with no cell of the run's column yet (rows added while the run went). */
export async function pickNewRows(db: Db, run: RunRecord, limit: number): Promise<PickedRow[]> {
  return db<PickedRow[]>`
            select r.id, r.seq, null as state, false as has_value from table_rows r
            where r.table_id = ${run.table_id}
              and not exists (select 1 from table_cells c where c.column_id = ${run.column_id} and c.row_id = r.id)
            order by r.seq limit ${limit}`;
}

/** The group's cells of these rows become pending, owned by the run. */
export async function pendRowCells(db: Db, runId: string, group: string[], rowIds: string[]) {
  // What a settled cell held is kept aside, so a run that stops before the row puts it back.
  await db`
            insert into table_cells (column_id, row_id, state, value, error, cost, run_id)
            select g.id, r.id, 'pending', null, null, 0, ${runId}
            from unnest(${group}::uuid[]) as g (id) cross join unnest(${rowIds}::uuid[]) as r (id)
            on conflict (column_id, row_id) do update set
              previous = case when table_cells.state in ('done', 'error', 'skipped')
                then jsonb_build_object('state', table_cells.state, 'value', table_cells.value, 'error', table_cells.error, 'cost', table_cells.cost)
                else table_cells.previous end,
              state = 'pending', value = null, error = null, cost = 0, run_id = excluded.run_id, updated_at = now()`;
}

/** The cursor moved past a batch, and the batch counted (claimed, kept, and the rows known). */
export async function advanceRunCursor(
  db: Db,
  runId: string,
  batch: { cursor: number; cursorDone: boolean; picked: number; kept: number },
): Promise<RunRecord> {
  const [updated] = await db<RunRecord[]>`
          update column_runs set cursor_seq = ${batch.cursor}, cursor_done = ${batch.cursorDone},
            rows_claimed = rows_claimed + ${batch.picked}, rows_kept = rows_kept + ${batch.kept},
            rows_total = greatest(rows_total, rows_claimed + ${batch.picked})
          where id = ${runId} returning *`;
  return updated!;
}
