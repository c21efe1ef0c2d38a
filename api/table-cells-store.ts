/**
 * Computed cells (table_cells): one record per row of a computed column with its state, value,
 * error and cost. Formula cells are written here whenever a row or a formula changes, so the
 * grid reads, filters and sorts them like any other cell.
 */
import type { Db } from '../db/sql.js';
import { evaluateRow } from '../domain/formula.js';
import { computedKinds, type CellValue, type Cells } from '../domain/tables.js';
import type { TableColumns } from './table-columns-store.js';

/** Rows a formula pass reads at a time. */
const batchSize = 5000;

interface CellWrite {
  column_id: string;
  row_id: string;
  state: 'done' | 'error';
  value: CellValue;
  error: string | null;
}

/** Values of other computed columns (not formulas) that formulas read: their value once done. */
async function computedInputs(db: Db, columns: TableColumns, rowIds: string[]): Promise<Map<string, CellValue>> {
  const wanted = new Set(columns.plan.order.flatMap((f) => f.compiled.refs));
  const ids = columns.list.filter((c) => wanted.has(c.id) && computedKinds.has(c.kind) && c.kind !== 'formula').map((c) => c.id);
  if (ids.length === 0 || rowIds.length === 0) return new Map();
  const rows = await db<{ column_id: string; row_id: string; value: CellValue }[]>`
    select column_id, row_id, value from table_cells
    where column_id = any(${ids}::uuid[]) and row_id = any(${rowIds}::uuid[]) and state = 'done'`;
  return new Map(rows.map((r) => [`${r.row_id}:${r.column_id}`, r.value]));
}

/** Computes the formula cells of these rows (all formula columns, or only `only`) and stores them. */
export async function writeFormulaCells(db: Db, columns: TableColumns, rows: { id: string; cells: Cells }[], only?: Set<string>) {
  if (columns.plan.order.length === 0 || rows.length === 0) return;
  const others = await computedInputs(db, columns, rows.map((r) => r.id));
  const writes: CellWrite[] = [];
  for (const row of rows) {
    const outcomes = evaluateRow(columns.plan, (id) => row.cells[id] ?? others.get(`${row.id}:${id}`) ?? null);
    for (const [columnId, outcome] of outcomes) {
      if (only && !only.has(columnId)) continue;
      writes.push({
        column_id: columnId,
        row_id: row.id,
        state: outcome.state,
        value: outcome.state === 'done' ? outcome.value : null,
        error: outcome.state === 'error' ? outcome.error : null,
      });
    }
  }
  if (writes.length === 0) return;
  await db`
    insert into table_cells (column_id, row_id, state, value, error, cost)
    select x.column_id, x.row_id, x.state, x.value, x.error, 0
    from jsonb_to_recordset(${db.json(writes as never)}) as x (column_id uuid, row_id uuid, state text, value jsonb, error text)
    on conflict (column_id, row_id) do update set
      state = excluded.state, value = excluded.value, error = excluded.error, cost = 0, updated_at = now()`;
}

/**
 * Computes formula columns again over every row of the table, a batch at a time, in the caller's
 * transaction. The change feed gets one `column_recomputed` event per column instead of an event
 * per thousand cells: the cell triggers stay quiet while `app.column_pass` is on.
 */
export async function recomputeFormulas(db: Db, tableId: string, columns: TableColumns, options: { columnIds: Set<string> }) {
  const only = new Set([...options.columnIds].filter((id) => columns.byId.get(id)?.kind === 'formula'));
  if (only.size === 0) return;
  await db`select set_config('app.column_pass', 'on', true)`;
  for (let after = 0; ; ) {
    const rows = await db<{ id: string; seq: number; cells: Cells }[]>`
      select id, seq, cells from table_rows where table_id = ${tableId} and seq > ${after} order by seq limit ${batchSize}`;
    if (rows.length === 0) break;
    await writeFormulaCells(db, columns, rows, only);
    after = rows[rows.length - 1]!.seq;
  }
  await db`select set_config('app.column_pass', 'off', true)`;
  await db`select table_column_recomputed(${tableId}, ${[...only]}::uuid[])`;
}
