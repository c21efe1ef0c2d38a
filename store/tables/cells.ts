/**
 * Computed cells (table_cells): one record per row of a computed column with its state, value,
 * error and cost. Formula cells are written here whenever a row or a formula changes, so the
 * grid reads, filters and sorts them like any other cell.
 */
import { copyIn } from '../../db/copy-in.js';
import type { Db } from '../../db/sql.js';
import { evaluateRow, planFor, type FormulaPlan } from '../../domain/tables/formula.js';
import { computedKinds, type CellValue, type Cells } from '../../domain/tables/tables.js';
import type { TableColumns } from './columns.js';

/**
 * Rows a formula pass reads at a time: three batches at most are in memory (read, computed,
 * written). Larger batches sort more cells together for the index inserts (docs/decisions/060).
 */
const batchSize = 20_000;
/** Characters of COPY text sent at a time. */
const chunkChars = 1 << 16;

/** Cells to write, column-wise: each array has one entry per cell. */
interface CellWrites {
  columnIds: string[];
  rowIds: string[];
  states: ('done' | 'error')[];
  /** The value as JSON text; null for an empty value or an error. */
  values: (string | null)[];
  errors: (string | null)[];
}

/** Other computed columns (not formulas) that the formulas of `plan` read. */
function computedInputIds(columns: TableColumns, plan: FormulaPlan): string[] {
  const wanted = new Set(plan.order.flatMap((f) => f.compiled.refs));
  return columns.list
    .filter((c) => wanted.has(c.id) && computedKinds.has(c.kind) && c.kind !== 'formula')
    .map((c) => c.id);
}

/** Values of these computed columns (`computedInputIds`) in these rows: their value once done. */
async function computedInputs(db: Db, ids: string[], rowIds: string[]): Promise<Map<string, CellValue>> {
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
 */
function storeCells(db: Db, writes: CellWrites) {
  return db`
    insert into table_cells (column_id, row_id, state, value, error, cost)
    select x.column_id, x.row_id, x.state, x.value::jsonb, x.error, 0
    from unnest(${writes.columnIds}::uuid[], ${writes.rowIds}::uuid[], ${writes.states}::text[], ${writes.values}::text[], ${writes.errors}::text[])
      as x (column_id, row_id, state, value, error)
    on conflict (column_id, row_id) do update set
      state = excluded.state, value = excluded.value, error = excluded.error, cost = 0, updated_at = now()`;
}

/** A text as a field of COPY's text format (a JSON text has no raw tab or line break, only backslashes). */
const copyField = (text: string | null) =>
  text === null ? '\\N' : /[\\\t\n\r]/.test(text) ? text.replace(/[\\\t\n\r]/g, (c) => copyEscapes[c]!) : text;
const copyEscapes: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

/**
 * Stores the cells of columns created in this transaction: none has a cell to replace (no other
 * transaction can see the columns to write one), so they go in with `COPY`, which stores a
 * statement's records a page at a time and parses no arrays (docs/decisions/060). No other query
 * may run on the connection until it ends.
 */
async function copyCells(db: Db, writes: CellWrites) {
  const copy = await copyIn(db`copy table_cells (column_id, row_id, state, value, error, cost) from stdin`);
  let chunk = '';
  for (let i = 0; i < writes.rowIds.length; i += 1) {
    chunk += `${writes.columnIds[i]}\t${writes.rowIds[i]}\t${writes.states[i]}\t${copyField(writes.values[i] ?? null)}\t${copyField(writes.errors[i] ?? null)}\t0\n`;
    if (chunk.length >= chunkChars) {
      await copy.write(chunk);
      chunk = '';
    }
  }
  await copy.end(chunk);
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
    computedInputIds(columns, plan),
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

/** Cells by row id, as the indexes of table_cells hold them: a batch's index inserts then land near each other. */
const byRowId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * Computes formula columns again over every row of the table, a batch at a time, in the caller's
 * transaction. The change feed gets one `column_recomputed` event per column instead of an event
 * per thousand cells: the cell triggers stay quiet while `app.column_pass` is on.
 *
 * The pass is pipelined on the transaction's connection: the next batch's read is sent just
 * before this batch's write, so Postgres stores batch N while this process computes batch N+1 (on
 * the other core); nothing else is sent while a write is in flight (a COPY allows no other query).
 * Rows are read with only the input cells the formulas use, and locked `for key share` as a
 * foreign key would lock them: while the pass is on, the cells' reference trigger leaves their
 * rows to this lock (db/migrations/043_column_pass_row_locks.sql). `fresh`: the columns were
 * created in this transaction and have no cells yet, so the cells go in with `COPY`.
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
      where table_id = ${tableId} and seq > ${after} order by seq limit ${batchSize} for key share`);
  const inputIds = computedInputIds(columns, plan);
  const store = (writes: CellWrites): Promise<unknown> =>
    options.fresh ? copyCells(db, writes) : storeCells(db, writes);

  await db`select set_config('app.column_pass', 'on', true)`;
  let writing: Promise<unknown> = Promise.resolve();
  try {
    for (let next = read(0); ;) {
      const rows = await next;
      if (rows.length === 0) break;
      const after = rows[rows.length - 1]!.seq;
      rows.sort(byRowId);
      let others = new Map<string, CellValue>();
      if (inputIds.length > 0) {
        await writing; // a query of its own, which a COPY in flight would refuse
        others = await computedInputs(
          db,
          inputIds,
          rows.map((r) => r.id),
        );
      }
      const writes = evaluateCells(plan, rows, others, only);
      await writing; // one write in flight: memory stays at a few batches whatever the row count
      next = read(after);
      writing = started(store(writes));
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
