/**
 * Queries of a table's rows: single and bulk writes (each bulk row answered on its own), and the
 * grid read with filters and sorts on any column, input or computed. Every write computes the
 * row's formula cells in the same transaction and keeps the table's row_count.
 */
import { randomUUID } from 'node:crypto';
import type { Db, Sql } from '../../db/sql.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import {
  CellsSchema,
  type BulkRowResult,
  type CellValue,
  type Cells,
  type ComputedCell,
  type Filter,
  type Row,
  type RowListQuery,
  type Sort,
} from '../../domain/tables/tables.js';
import { writeFormulaCells } from './cells.js';
import { isComputed, loadColumns, type ColumnRecord, type TableColumns } from './columns.js';
import { resolveGrid, type Grid } from './views.js';
import { requireTable } from './tables.js';

export interface RowRecord {
  id: string;
  table_id: string;
  cells: Cells;
  computed: Record<string, ComputedCell>;
  created_at: Date;
  updated_at: Date;
}

/** A row with its computed cells gathered from table_cells. */
export const rowSelect = (db: Db) => db`
  select r.id, r.table_id, r.cells, r.created_at, r.updated_at,
    coalesce((select jsonb_object_agg(c.column_id::text, jsonb_build_object('state', c.state, 'value', c.value, 'error', c.error, 'cost', c.cost))
              from table_cells c where c.row_id = r.id), '{}'::jsonb) as computed
  from table_rows r`;

/** The computed cells of these rows, by row id. */
async function computedOf(db: Db, rowIds: string[]): Promise<Map<string, RowRecord['computed']>> {
  if (rowIds.length === 0) return new Map();
  const found = await db<{ row_id: string; computed: RowRecord['computed'] }[]>`
    select c.row_id, jsonb_object_agg(c.column_id::text, jsonb_build_object('state', c.state, 'value', c.value, 'error', c.error, 'cost', c.cost)) as computed
    from table_cells c where c.row_id = any(${rowIds}::uuid[]) group by c.row_id`;
  return new Map(found.map((r) => [r.row_id, r.computed]));
}

/** Only cells of columns the table has now. */
export function toRow(r: RowRecord, columns: TableColumns): Row {
  const cells: Cells = {};
  for (const [id, value] of Object.entries(r.cells)) if (columns.byId.has(id) && value !== null) cells[id] = value;
  const computed: Record<string, ComputedCell> = {};
  for (const [id, cell] of Object.entries(r.computed)) {
    if (columns.byId.has(id))
      computed[id] = { state: cell.state, value: cell.value ?? null, error: cell.error ?? null, cost: cell.cost };
  }
  return {
    id: r.id,
    table_id: r.table_id,
    cells,
    computed,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}

// ---------------------------------------------------------------------------------------------
// Writing cells

/** Why these cells cannot be written to the table, or null. Keys are normalised to lower case. */
function cellProblem(columns: TableColumns, cells: Cells): string | null {
  for (const key of Object.keys(cells)) {
    const column = columns.byId.get(key.toLowerCase());
    if (!column) return `The table has no column ${key}.`;
    if (isComputed(column)) return `"${column.name}" is a ${column.kind} column; its cells are computed, not written.`;
  }
  return null;
}

const normalise = (cells: Cells): Cells =>
  Object.fromEntries(Object.entries(cells).map(([k, v]) => [k.toLowerCase(), v]));
const withoutEmpty = (cells: Cells): Record<string, Exclude<CellValue, null>> =>
  Object.fromEntries(Object.entries(cells).filter(([, v]) => v !== null)) as Record<string, Exclude<CellValue, null>>;

/** Inserts checked rows in order, computes their formula cells and counts them on the table. */
export async function insertRows(
  db: Db,
  workspaceId: string,
  tableId: string,
  columns: TableColumns,
  rows: Cells[],
): Promise<string[]> {
  if (rows.length === 0) return [];
  const records = rows.map((cells, n) => ({ id: randomUUID(), cells: withoutEmpty(cells), n }));
  await db`
    insert into table_rows (id, workspace_id, table_id, cells)
    select x.id, ${workspaceId}, ${tableId}, x.cells
    from jsonb_to_recordset(${db.json(records)}) as x (id uuid, cells jsonb, n int)
    order by x.n`;
  await writeFormulaCells(db, columns, records);
  await db`update tables set row_count = row_count + ${rows.length}, updated_at = now() where id = ${tableId}`;
  return records.map((r) => r.id);
}

async function readRow(db: Db, tableId: string, rowId: string): Promise<RowRecord | undefined> {
  const [row] = await db<RowRecord[]>`${rowSelect(db)} where r.table_id = ${tableId} and r.id = ${rowId}`;
  return row;
}

export async function createRow(sql: Sql, workspaceId: string, tableId: string, cells: Cells): Promise<Row> {
  return sql.begin(async (tx) => {
    await requireTable(tx, workspaceId, tableId, 'share');
    const columns = await loadColumns(tx, tableId);
    const problem = cellProblem(columns, cells);
    if (problem) throw new ApiError('conflict', problem);
    const [id] = await insertRows(tx, workspaceId, tableId, columns, [normalise(cells)]);
    return toRow((await readRow(tx, tableId, id!))!, columns);
  });
}

export async function getRow(db: Db, workspaceId: string, tableId: string, rowId: string): Promise<Row> {
  await requireTable(db, workspaceId, tableId);
  const columns = await loadColumns(db, tableId);
  const row = await readRow(db, tableId, rowId);
  if (!row) throw notFound('Row');
  return toRow(row, columns);
}

/** Merges cells into rows (null empties a cell) and computes their formulas again; returns the ids found. */
async function mergeCells(
  db: Db,
  tableId: string,
  columns: TableColumns,
  updates: { id: string; cells: Cells }[],
): Promise<Set<string>> {
  if (updates.length === 0) return new Set();
  const payload = updates.map((u) => ({
    id: u.id,
    set: withoutEmpty(u.cells),
    clear: Object.entries(u.cells)
      .filter(([, v]) => v === null)
      .map(([k]) => k),
  }));
  const changed = await db<{ id: string; cells: Cells }[]>`
    update table_rows r set
      cells = (r.cells || x.set) - coalesce(array(select jsonb_array_elements_text(x.clear)), '{}'),
      updated_at = now()
    from jsonb_to_recordset(${db.json(payload)}) as x (id uuid, set jsonb, clear jsonb)
    where r.table_id = ${tableId} and r.id = x.id
    returning r.id, r.cells`;
  await writeFormulaCells(db, columns, changed);
  return new Set(changed.map((r) => r.id));
}

export async function updateRow(
  sql: Sql,
  workspaceId: string,
  tableId: string,
  rowId: string,
  cells: Cells,
): Promise<Row> {
  return sql.begin(async (tx) => {
    await requireTable(tx, workspaceId, tableId, 'share');
    const columns = await loadColumns(tx, tableId);
    if (!(await readRow(tx, tableId, rowId))) throw notFound('Row');
    const problem = cellProblem(columns, cells);
    if (problem) throw new ApiError('conflict', problem);
    await mergeCells(tx, tableId, columns, [{ id: rowId, cells: normalise(cells) }]);
    return toRow((await readRow(tx, tableId, rowId))!, columns);
  });
}

async function removeRows(db: Db, tableId: string, ids: string[]): Promise<Set<string>> {
  const deleted = await db<
    { id: string }[]
  >`delete from table_rows where table_id = ${tableId} and id = any(${ids}::uuid[]) returning id`;
  if (deleted.length > 0)
    await db`update tables set row_count = row_count - ${deleted.length}, updated_at = now() where id = ${tableId}`;
  return new Set(deleted.map((r) => r.id));
}

export async function deleteRow(sql: Sql, workspaceId: string, tableId: string, rowId: string): Promise<boolean> {
  return sql.begin(async (tx) => {
    await requireTable(tx, workspaceId, tableId, 'share');
    return (await removeRows(tx, tableId, [rowId])).size > 0;
  });
}

// ---------------------------------------------------------------------------------------------
// Bulk: each row is checked alone, the good ones are written together

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The row's cells if they are values the table can take, else why not. */
function checkRow(columns: TableColumns, raw: Record<string, unknown>): { cells: Cells } | { problem: string } {
  const parsed = CellsSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length > 0 ? `cells.${issue.path.join('.')}` : 'cells';
    return { problem: `${where}: ${issue.message}` };
  }
  const problem = cellProblem(columns, parsed.data);
  return problem ? { problem } : { cells: normalise(parsed.data) };
}

const summary = (results: BulkRowResult[]) => {
  const succeeded = results.filter(
    (r) => r.status === 'created' || r.status === 'updated' || r.status === 'deleted',
  ).length;
  return { results, succeeded, failed: results.length - succeeded };
};

export async function bulkCreateRows(
  sql: Sql,
  workspaceId: string,
  tableId: string,
  rows: { cells: Record<string, unknown> }[],
) {
  return sql.begin(async (tx) => {
    await requireTable(tx, workspaceId, tableId, 'share');
    const columns = await loadColumns(tx, tableId);
    const checked = rows.map((r) => checkRow(columns, r.cells));
    const good = checked.flatMap((c) => ('cells' in c ? [c.cells] : []));
    const ids = await insertRows(tx, workspaceId, tableId, columns, good);
    let next = 0;
    return summary(
      checked.map((c, index): BulkRowResult =>
        'cells' in c
          ? { index, id: ids[next++]!, status: 'created', detail: null }
          : { index, id: null, status: 'rejected', detail: c.problem },
      ),
    );
  });
}

export async function bulkUpdateRows(
  sql: Sql,
  workspaceId: string,
  tableId: string,
  rows: { id: string; cells: Record<string, unknown> }[],
) {
  return sql.begin(async (tx) => {
    await requireTable(tx, workspaceId, tableId, 'share');
    const columns = await loadColumns(tx, tableId);
    const seen = new Set<string>();
    const checked = rows.map((r) => {
      if (!uuidPattern.test(r.id)) return { problem: 'id: not a row id (a UUID)' };
      const id = r.id.toLowerCase();
      if (seen.has(id)) return { problem: 'The same row appears earlier in this request.' };
      seen.add(id);
      const cells = checkRow(columns, r.cells);
      return 'cells' in cells ? { id, cells: cells.cells } : cells;
    });
    const found = await mergeCells(
      tx,
      tableId,
      columns,
      checked.flatMap((c) => ('id' in c ? [c] : [])),
    );
    return summary(
      checked.map((c, index): BulkRowResult => {
        if (!('id' in c))
          return {
            index,
            id: uuidPattern.test(rows[index]!.id) ? rows[index]!.id : null,
            status: 'rejected',
            detail: c.problem,
          };
        return found.has(c.id)
          ? { index, id: c.id, status: 'updated', detail: null }
          : { index, id: c.id, status: 'not_found', detail: 'Row not found.' };
      }),
    );
  });
}

export async function bulkDeleteRows(sql: Sql, workspaceId: string, tableId: string, rowIds: string[]) {
  return sql.begin(async (tx) => {
    await requireTable(tx, workspaceId, tableId, 'share');
    const valid = rowIds.filter((id) => uuidPattern.test(id)).map((id) => id.toLowerCase());
    const deleted = await removeRows(tx, tableId, [...new Set(valid)]);
    const answered = new Set<string>();
    return summary(
      rowIds.map((raw, index): BulkRowResult => {
        if (!uuidPattern.test(raw)) return { index, id: null, status: 'rejected', detail: 'Not a row id (a UUID).' };
        const id = raw.toLowerCase();
        if (deleted.has(id) && !answered.has(id)) {
          answered.add(id);
          return { index, id, status: 'deleted', detail: null };
        }
        return {
          index,
          id,
          status: 'not_found',
          detail: answered.has(id) ? 'The same row appears earlier in this request.' : 'Row not found.',
        };
      }),
    );
  });
}

// ---------------------------------------------------------------------------------------------
// The grid: filters and sorts on any column

/** Same bound as cell_number() in SQL, so an operand that reads as a number always casts. */
const numberPattern = /^ *[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,3})? *$/;

/** A cell's JSON value in SQL: from the row for an input column, from table_cells (once done) for a computed one. */
function valueOf(db: Db, column: ColumnRecord) {
  return isComputed(column)
    ? db`(select c.value from table_cells c where c.column_id = ${column.id}::uuid and c.row_id = r.id and c.state = 'done')`
    : db`(r.cells -> ${column.id}::text)`;
}

function condition(db: Db, column: ColumnRecord, filter: Filter) {
  const v = valueOf(db, column);
  const text = db`lower(coalesce(cell_text(${v}), ''))`;
  const operand = filter.value.toLowerCase();
  const numeric = numberPattern.test(filter.value);
  const equal = numeric
    ? db`(${text} = ${operand} or cell_number(${v}) = ${filter.value}::numeric)`
    : db`(${text} = ${operand})`;
  const compare = (op: 'gt' | 'gte' | 'lt' | 'lte') => {
    const lhs = numeric ? db`cell_number(${v})` : db`lower(cell_text(${v}))`;
    const rhs = numeric ? db`${filter.value}::numeric` : db`${operand}::text`;
    const sign = { gt: db`>`, gte: db`>=`, lt: db`<`, lte: db`<=` }[op];
    return db`coalesce(${lhs} ${sign} ${rhs}, false)`;
  };
  switch (filter.op) {
    case 'eq':
      return equal;
    case 'neq':
      return db`not ${equal}`;
    case 'contains':
      return db`strpos(${text}, ${operand}) > 0`;
    case 'not_contains':
      return db`strpos(${text}, ${operand}) = 0`;
    case 'starts_with':
      return db`starts_with(${text}, ${operand})`;
    case 'ends_with':
      return db`right(${text}, char_length(${operand})) = ${operand}`;
    case 'is_empty':
      return db`${text} = ''`;
    case 'is_not_empty':
      return db`${text} <> ''`;
    default:
      return compare(filter.op);
  }
}

/** The grid's condition on rows (`true` without filters). */
export function gridWhere(db: Db, columns: TableColumns, grid: Grid) {
  const parts = grid.filters.map((f) => condition(db, columns.byId.get(f.column_id)!, f));
  if (parts.length === 0) return db`true`;
  const joiner = grid.filterMode === 'all' ? db`and` : db`or`;
  return parts.slice(1).reduce((all, part) => db`${all} ${joiner} ${part}`, db`(${parts[0]!})`);
}

/** `order by`: empty cells last whichever way; numbers in order before text (case ignored); then insertion order. */
export function gridOrder(db: Db, columns: TableColumns, sorts: Sort[]) {
  const keys = sorts.map((s) => {
    const v = valueOf(db, columns.byId.get(s.column_id)!);
    const empty = db`(coalesce(cell_text(${v}), '') = '')`;
    return s.direction === 'desc'
      ? db`${empty}, cell_number(${v}) desc nulls last, lower(cell_text(${v})) desc`
      : db`${empty}, cell_number(${v}) asc nulls last, lower(cell_text(${v})) asc`;
  });
  return db`order by ${keys.reduce((all, key) => db`${all} ${key},`, db``)} r.seq`;
}

/** The grid's rows through a cursor, `batchSize` rows at a time: the query runs as it is read. */
export function gridRowsCursor(
  sql: Sql,
  tableId: string,
  columns: TableColumns,
  grid: Grid,
  batchSize: number,
): AsyncIterable<RowRecord[]> {
  return sql<RowRecord[]>`
      ${rowSelect(sql)} where r.table_id = ${tableId} and ${gridWhere(sql, columns, grid)}
      ${gridOrder(sql, columns, grid.sorts)}`.cursor(batchSize);
}

export async function listRows(db: Db, workspaceId: string, tableId: string, query: RowListQuery) {
  await requireTable(db, workspaceId, tableId);
  const columns = await loadColumns(db, tableId);
  const grid = await resolveGrid(db, tableId, columns, query);
  const where = gridWhere(db, columns, grid);
  // The page's rows first, their computed cells after: gathered in the same select, the cells of
  // every row an offset skips would be gathered too (a page deep in a 100k-row grid took seconds).
  const page = await db<Omit<RowRecord, 'computed'>[]>`
    select r.id, r.table_id, r.cells, r.created_at, r.updated_at from table_rows r
    where r.table_id = ${tableId} and ${where}
    ${gridOrder(db, columns, grid.sorts)}
    limit ${query.limit} offset ${query.offset}`;
  const computed = await computedOf(
    db,
    page.map((r) => r.id),
  );
  const rows = page.map((r): RowRecord => ({ ...r, computed: computed.get(r.id) ?? {} }));
  // Unfiltered, the count is the table's own (kept in the row-writing transactions).
  const [count] = grid.filters.length
    ? await db<{ n: number }[]>`select count(*)::int as n from table_rows r where r.table_id = ${tableId} and ${where}`
    : await db<{ n: number }[]>`select row_count as n from tables where id = ${tableId}`;
  return {
    rows: rows.map((r) => toRow(r, columns)),
    total_count: count!.n,
    limit: query.limit,
    offset: query.offset,
    column_ids: grid.columnIds,
  };
}
