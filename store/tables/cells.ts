/**
 * Computed cells (table_cells): one record per row of a computed column with its state, value,
 * error and cost. Formula cells are written here whenever a row or a formula changes, so the
 * grid reads, filters and sorts them like any other cell.
 */
import type { Db } from '../../db/sql.js';
import { evaluateRow, planFor, type FormulaPlan } from '../../domain/tables/formula.js';
import { computedKinds, type CellValue, type Cells } from '../../domain/tables/tables.js';
import type { TableColumns } from './columns.js';

/** Rows a formula pass reads at a time: three batches at most are in memory (read, computed, written). */
const batchSize = 5000;

/** Cells to write, column-wise: each array has one entry per cell. */
interface CellWrites {
  columnIds: string[];
  rowIds: string[];
  states: ('done' | 'error')[];
  /** The value as JSON text; null for an empty value or an error. */
  values: (string | null)[];
  errors: (string | null)[];
}

/** Values of other computed columns (not formulas) that formulas read: their value once done. */
async function computedInputs(
  db: Db,
  columns: TableColumns,
  plan: FormulaPlan,
  rowIds: string[],
): Promise<Map<string, CellValue>> {
  const wanted = new Set(plan.order.flatMap((f) => f.compiled.refs));
  const ids = columns.list
    .filter((c) => wanted.has(c.id) && computedKinds.has(c.kind) && c.kind !== 'formula')
    .map((c) => c.id);
  if (ids.length === 0 || rowIds.length === 0) return new Map();
  const rows = await db<{ column_id: string; row_id: string; value: CellValue }[]>`
    select column_id, row_id, value from table_cells
    where column_id = any(${ids}::uuid[]) and row_id = any(${rowIds}::uuid[]) and state = 'done'`;
  return new Map(rows.map((r) => [`${r.row_id}:${r.column_id}`, r.value]));
}

/** Evaluates the formulas of `plan` on each row and lists the cells of the columns in `only` (all when omitted). */
function evaluateCells(
  plan: FormulaPlan,
  rows: { id: string; cells: Cells }[],
  others: Map<string, CellValue>,
  only?: Set<string>,
): CellWrites {
  const writes: CellWrites = { columnIds: [], rowIds: [], states: [], values: [], errors: [] };
  for (const row of rows) {
    const read =
      others.size === 0
        ? (id: string) => row.cells[id] ?? null
        : (id: string) => row.cells[id] ?? others.get(`${row.id}:${id}`) ?? null;
    for (const [columnId, outcome] of evaluateRow(plan, read)) {
      if (only && !only.has(columnId)) continue;
      writes.columnIds.push(columnId);
      writes.rowIds.push(row.id);
      writes.states.push(outcome.state);
      writes.values.push(outcome.state === 'done' && outcome.value !== null ? JSON.stringify(outcome.value) : null);
      writes.errors.push(outcome.state === 'error' ? outcome.error : null);
    }
  }
  return writes;
}

/**
 * Stores cells, created or replaced. The cells travel as one array per field: Postgres reads a
 * uuid or text array faster than one JSON document of records (which it parses, then takes apart).
 * `fresh`: the cells' columns were created in this transaction, so none has a cell to replace
 * (no other transaction can see the column to write one) and the insert skips the conflict check.
 */
function storeCells(db: Db, writes: CellWrites, fresh = false) {
  return db`
    insert into table_cells (column_id, row_id, state, value, error, cost)
    select x.column_id, x.row_id, x.state, x.value::jsonb, x.error, 0
    from unnest(${writes.columnIds}::uuid[], ${writes.rowIds}::uuid[], ${writes.states}::text[], ${writes.values}::text[], ${writes.errors}::text[])
      as x (column_id, row_id, state, value, error)
    ${
      fresh
        ? db``
        : db`on conflict (column_id, row_id) do update set
      state = excluded.state, value = excluded.value, error = excluded.error, cost = 0, updated_at = now()`
    }`;
}

/** Computes the formula cells of these rows (all formula columns, or only `only`) and stores them. */
export async function writeFormulaCells(
  db: Db,
  columns: TableColumns,
  rows: { id: string; cells: Cells }[],
  only?: Set<string>,
) {
  const plan = only ? planFor(columns.plan, only) : columns.plan;
  if (plan.order.length === 0 || rows.length === 0) return;
  const others = await computedInputs(
    db,
    columns,
    plan,
    rows.map((r) => r.id),
  );
  const writes = evaluateCells(plan, rows, others, only);
  if (writes.rowIds.length > 0) await storeCells(db, writes);
}

/** A query whose failure is read later: marked handled now so an early failure is not an unhandled rejection. */
function started<T>(query: Promise<T>): Promise<T> {
  query.catch(() => {});
  return query;
}

/**
 * Computes formula columns again over every row of the table, a batch at a time, in the caller's
 * transaction. The change feed gets one `column_recomputed` event per column instead of an event
 * per thousand cells: the cell triggers stay quiet while `app.column_pass` is on.
 *
 * The pass is pipelined on the transaction's connection: the next batch's read is sent before
 * this batch's write, so Postgres stores batch N while this process computes batch N+1 (on the
 * other core). Rows are read with only the input cells the formulas use. `fresh`: the columns
 * were created in this transaction and have no cells yet.
 */
export async function recomputeFormulas(
  db: Db,
  tableId: string,
  columns: TableColumns,
  options: { columnIds: Set<string>; fresh?: boolean },
) {
  const only = new Set([...options.columnIds].filter((id) => columns.byId.get(id)?.kind === 'formula'));
  if (only.size === 0) return;
  const plan = planFor(columns.plan, only);
  const used = new Set(plan.order.flatMap((f) => f.compiled.refs));
  const unused = columns.list.filter((c) => !computedKinds.has(c.kind) && !used.has(c.id)).map((c) => c.id);
  const read = (after: number) =>
    started(db<{ id: string; seq: number; cells: Cells }[]>`
      select id, seq, cells - ${unused}::text[] as cells from table_rows
      where table_id = ${tableId} and seq > ${after} order by seq limit ${batchSize}`);

  await db`select set_config('app.column_pass', 'on', true)`;
  let writing: Promise<unknown> = Promise.resolve();
  try {
    for (let next = read(0); ;) {
      const rows = await next;
      if (rows.length === 0) break;
      next = read(rows[rows.length - 1]!.seq);
      const others = await computedInputs(
        db,
        columns,
        plan,
        rows.map((r) => r.id),
      );
      const writes = evaluateCells(plan, rows, others, only);
      await writing; // one write in flight: memory stays at a few batches whatever the row count
      writing = started(storeCells(db, writes, options.fresh));
    }
    await writing;
  } catch (error) {
    // A failed write aborts the transaction and every query queued after it: report the write's own error.
    await writing;
    throw error;
  }
  await db`select set_config('app.column_pass', 'off', true)`;
  await db`select table_column_recomputed(${tableId}, ${[...only]}::uuid[])`;
}
