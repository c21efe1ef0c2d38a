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
  countExactMax,
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

/** One part of the grid's order: a never-null expression and its direction (see gridKeys). */
interface KeyPart {
  sql: ReturnType<typeof valueOf>;
  desc: boolean;
  type: 'integer' | 'numeric' | 'text' | 'bigint';
}

/**
 * A sort's keys as three never-null parts, so a page can start after a row with one row comparison
 * (listRows' `after`) and an index can hold them: the cell's class (text first; of the empty ones,
 * "" before an absent cell ascending and after it descending, where `lower(cell_text(…))`'s nulls
 * fall), its number (±Infinity, which no cell reads as, puts text after every number), its text
 * with case ignored. Every part of a descending sort descends, so a one-way grid compares as one row.
 */
function sortParts(db: Db, column: ColumnRecord, desc: boolean): KeyPart[] {
  const v = valueOf(db, column);
  return [
    {
      sql: desc
        ? db`(case when cell_text(${v}) is null then 1 when cell_text(${v}) = '' then 0 else 2 end)`
        : db`(case when cell_text(${v}) is null then 2 when cell_text(${v}) = '' then 1 else 0 end)`,
      desc,
      type: 'integer',
    },
    {
      sql: desc ? db`coalesce(cell_number(${v}), '-Infinity')` : db`coalesce(cell_number(${v}), 'Infinity')`,
      desc,
      type: 'numeric',
    },
    { sql: db`coalesce(lower(cell_text(${v})), '')`, desc, type: 'text' },
  ];
}

/** The grid's order as parts, insertion order last (as `-seq` descending when every sort is descending). */
function gridKeys(db: Db, columns: TableColumns, sorts: Sort[]): KeyPart[] {
  const parts = sorts.flatMap((s) => sortParts(db, columns.byId.get(s.column_id)!, s.direction === 'desc'));
  const allDesc = parts.length > 0 && parts.every((p) => p.desc);
  return [
    ...parts,
    allDesc ? { sql: db`(-r.seq)`, desc: true, type: 'bigint' } : { sql: db`r.seq`, desc: false, type: 'bigint' },
  ];
}

const orderBy = (db: Db, parts: KeyPart[], alias?: (i: number) => string) =>
  db`order by ${parts
    .map((p, i) => db`${alias ? db.unsafe(alias(i)) : p.sql} ${p.desc ? db`desc` : db`asc`}`)
    .reduce((all, key, i) => (i === 0 ? key : db`${all}, ${key}`))}`;

/** `order by`: empty cells last whichever way; numbers in order before text (case ignored); then insertion order. */
export function gridOrder(db: Db, columns: TableColumns, sorts: Sort[]) {
  return orderBy(db, gridKeys(db, columns, sorts));
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

// ---------------------------------------------------------------------------------------------
// Paging a large grid (docs/decisions/059-grid-at-a-million-rows.md)

/** From this many rows a table gets an index per sorted input column and direction, built on demand. */
export const sortIndexMinRows = 20_000;
/** A sort index holds cells up to this many bytes (a btree entry holds about 2.7 kB); longer cells are read apart. */
const sortIndexCellBytes = 1000;

const sortSignature = (sorts: Sort[]) => sorts.map((s) => `${s.column_id}:${s.direction}`).join(',');
const keyPattern = {
  integer: /^[0-2]$/,
  numeric: /^-?([0-9]+(\.[0-9]+)?|Infinity)$/,
  bigint: /^-?[0-9]{1,18}$/,
  text: /^/,
} as const;

/** The opaque `next_cursor`: the last row's key values and the sorts they belong to. */
const encodeCursor = (keys: unknown[], sorts: Sort[]) =>
  Buffer.from(
    JSON.stringify({
      k: keys.map((k) => (typeof k === 'boolean' || typeof k === 'number' ? String(k) : k)),
      s: sortSignature(sorts),
    }),
  ).toString('base64url');

function decodeCursor(raw: string, parts: KeyPart[], sorts: Sort[]): string[] {
  let cursor: unknown = null;
  try {
    cursor = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    cursor = null;
  }
  const { k: keys, s: signature } = (cursor ?? {}) as { k?: unknown; s?: unknown };
  if (typeof signature === 'string' && signature !== sortSignature(sorts))
    throw new ApiError('conflict', 'after: the cursor belongs to other sorts of this grid; start again without it.');
  // Any base64url text is a well-formed `after`: one this grid never answered is a cursor that does
  // not fit it, as one of other sorts does not (409, listTableRows), not a malformed request.
  if (
    !Array.isArray(keys) ||
    keys.length !== parts.length ||
    !keys.every((k, i) => typeof k === 'string' && keyPattern[parts[i]!.type].test(k)) ||
    typeof signature !== 'string'
  )
    throw new ApiError('conflict', 'after: not a next_cursor of this grid; start again without it.');
  return keys as string[];
}

/** Rows after the cursor's: one row comparison per run of parts in one direction (an index bound). */
function afterCursor(db: Db, parts: KeyPart[], keys: string[]) {
  const value = (p: KeyPart, k: string) =>
    p.type === 'integer'
      ? db`${k}::int`
      : p.type === 'numeric'
        ? db`${k}::numeric`
        : p.type === 'bigint'
          ? db`${k}::bigint`
          : db`${k}::text`;
  const list = (items: ReturnType<typeof value>[]) => items.reduce((all, item) => db`${all}, ${item}`);
  const runs: { parts: KeyPart[]; keys: string[] }[] = [];
  parts.forEach((p, i) => {
    const last = runs[runs.length - 1];
    if (last && last.parts[0]!.desc === p.desc) {
      last.parts.push(p);
      last.keys.push(keys[i]!);
    } else runs.push({ parts: [p], keys: [keys[i]!] });
  });
  const rowOf = (run: (typeof runs)[number]) => db`(${list(run.parts.map((p) => p.sql))})`;
  const keysOf = (run: (typeof runs)[number]) => db`(${list(run.parts.map((p, i) => value(p, run.keys[i]!)))})`;
  const beyond = (run: (typeof runs)[number]) => db`${rowOf(run)} ${run.parts[0]!.desc ? db`<` : db`>`} ${keysOf(run)}`;
  return runs
    .slice(0, -1)
    .reduceRight(
      (rest, run) => db`(${beyond(run)} or (${rowOf(run)} = ${keysOf(run)} and ${rest}))`,
      beyond(runs[runs.length - 1]!),
    );
}

/**
 * A uuid as 32 hex digits for an index name. DDL takes no parameters, so the sort indexes' names
 * and statements are written out with `unsafe`: only ids that are uuids reach them, checked here.
 */
const hex = (id: string) => {
  if (!uuidPattern.test(id)) throw new Error(`not a uuid: ${JSON.stringify(id).slice(0, 60)}`);
  return id.replace(/-/g, '').toLowerCase();
};
const sortIndexName = (columnId: string, desc: boolean) => `table_rows_sort_${hex(columnId)}_${desc ? 'd' : 'a'}`;
const longIndexName = (columnId: string) => `table_rows_long_${hex(columnId)}`;
/** Whether the cell fits a sort index; the same text as the indexes' predicates, so the planner matches them. */
const fits = (db: Db, column: ColumnRecord) =>
  db`coalesce(octet_length(cell_text(${valueOf(db, column)})), 0) <= ${db.unsafe(String(sortIndexCellBytes))}`;

/** The statements building a sort column's indexes: written out as sortParts and fits read in SQL. */
function sortIndexStatements(tableId: string, columnId: string, desc: boolean): [string, string][] {
  if (!uuidPattern.test(tableId) || !uuidPattern.test(columnId)) return [];
  const v = `(cells -> '${columnId.toLowerCase()}'::text)`;
  const keys = desc
    ? `(case when cell_text(${v}) is null then 1 when cell_text(${v}) = '' then 0 else 2 end), coalesce(cell_number(${v}), '-Infinity'), coalesce(lower(cell_text(${v})), ''), (-seq)`
    : `(case when cell_text(${v}) is null then 2 when cell_text(${v}) = '' then 1 else 0 end), coalesce(cell_number(${v}), 'Infinity'), coalesce(lower(cell_text(${v})), ''), seq`;
  const where = `table_id = '${tableId.toLowerCase()}'::uuid`;
  const fit = `coalesce(octet_length(cell_text(${v})), 0) <= ${sortIndexCellBytes}`;
  // The small index first: the sort index being valid then means both are (bench/tables.ts waits on it).
  return [
    [
      longIndexName(columnId),
      `create index concurrently if not exists ${longIndexName(columnId)} on table_rows (seq) where ${where} and not (${fit})`,
    ],
    [
      sortIndexName(columnId, desc),
      `create index concurrently if not exists ${sortIndexName(columnId, desc)} on table_rows (${keys}) where ${where} and ${fit}`,
    ],
  ];
}

/** Builds in this process now, so a second request does not start the same build. */
const building = new Set<string>();

/**
 * Builds a sort column's indexes without blocking writes (`concurrently`, outside any
 * transaction); the grid is read without them until they are valid.
 */
async function buildSortIndexes(sql: Sql, statements: [string, string][]) {
  const key = statements.map(([name]) => name).join();
  if (building.has(key)) return;
  building.add(key);
  try {
    for (const [name, ddl] of statements) {
      // A failed build leaves an invalid index, which `if not exists` would keep for good.
      const [invalid] = await sql`
        select 1 from pg_class c join pg_index i on i.indexrelid = c.oid where c.relname = ${name} and not i.indisvalid`;
      if (invalid) await sql.unsafe(`drop index concurrently if exists ${name}`);
      await sql.unsafe(ddl);
    }
  } catch {
    // Another process building the same index, or a cancelled build: the next sorted read tries again.
  } finally {
    building.delete(key);
  }
}

/** Drops a deleted column's sort indexes, which every later write to table_rows would otherwise check. */
export async function dropSortIndexes(sql: Sql, columnId: string) {
  const names = [sortIndexName(columnId, false), sortIndexName(columnId, true), longIndexName(columnId)];
  const found = await sql<{ relname: string }[]>`select relname from pg_class where relname = any(${names}::text[])`;
  // Each name found is one of `names`, made of the column's uuid (hex).
  for (const { relname } of found) await sql.unsafe(`drop index concurrently if exists ${relname}`);
}

/** Whether the grid's one sort can be read through its index; starts building it when it is missing. */
async function sortIndexReady(db: Db, tableId: string, rowCount: number, columns: TableColumns, sorts: Sort[]) {
  if (sorts.length !== 1 || rowCount < sortIndexMinRows) return null;
  const column = columns.byId.get(sorts[0]!.column_id)!;
  if (isComputed(column)) return null;
  const statements = sortIndexStatements(tableId, column.id, sorts[0]!.direction === 'desc');
  if (statements.length === 0) return null;
  const names = statements.map(([name]) => name);
  const [found] = await db<{ n: number }[]>`
    select count(*)::int as n from pg_class c join pg_index i on i.indexrelid = c.oid
    where c.relname = any(${names}::text[]) and i.indisvalid and i.indisready`;
  if (found!.n === names.length) return column;
  if ('begin' in db) void buildSortIndexes(db, statements);
  return null;
}

type PageRecord = Omit<RowRecord, 'computed'> & Record<`k${number}`, unknown>;

export async function listRows(db: Db, workspaceId: string, tableId: string, query: RowListQuery) {
  const table = await requireTable(db, workspaceId, tableId);
  const columns = await loadColumns(db, tableId);
  const grid = await resolveGrid(db, tableId, columns, query);
  const where = gridWhere(db, columns, grid);
  const parts = gridKeys(db, columns, grid.sorts);
  const after = query.after ? afterCursor(db, parts, decodeCursor(query.after, parts, grid.sorts)) : db`true`;
  const keys = parts.map((p, i) => db`${p.sql} as ${db.unsafe(`k${i}`)}`).reduce((all, k) => db`${all}, ${k}`);
  const indexed = await sortIndexReady(db, tableId, table.row_count, columns, grid.sorts);
  // The page's rows first, their computed cells after: gathered in the same select, the cells of
  // every row an offset skips would be gathered too (a page deep in a 100k-row grid took seconds).
  const select = (extra: ReturnType<typeof valueOf>) => db`
    select r.id, r.table_id, r.cells, r.created_at, r.updated_at, ${keys} from table_rows r
    where r.table_id = ${tableId} and ${extra} and ${where} and ${after}`;
  const page = indexed
    ? // Cells that fit the sort index come through it in order; the few longer ones are sorted apart.
      await db<PageRecord[]>`
        select * from (
          (${select(fits(db, indexed))} ${orderBy(db, parts)} limit ${query.limit + query.offset})
          union all
          (${select(db`not (${fits(db, indexed)})`)} ${orderBy(db, parts)} limit ${query.limit + query.offset})
        ) r ${orderBy(db, parts, (i) => `k${i}`)}
        limit ${query.limit} offset ${query.offset}`
    : await db<PageRecord[]>`${select(db`true`)} ${orderBy(db, parts)} limit ${query.limit} offset ${query.offset}`;
  const computed = await computedOf(
    db,
    page.map((r) => r.id),
  );
  const rows = page.map((r): RowRecord => ({
    id: r.id,
    table_id: r.table_id,
    cells: r.cells,
    created_at: r.created_at,
    updated_at: r.updated_at,
    computed: computed.get(r.id) ?? {},
  }));
  const last = page[page.length - 1];
  // Unfiltered, the count is the table's own (kept in the row-writing transactions); filtered, it
  // stops at countExactMax, since counting every match of a million rows costs more than the page.
  const count = grid.filters.length
    ? (
        await db<{ n: number }[]>`
          select count(*)::int as n from (
            select 1 from table_rows r where r.table_id = ${tableId} and ${where} limit ${countExactMax + 1}) m`
      )[0]!.n
    : table.row_count;
  return {
    rows: rows.map((r) => toRow(r, columns)),
    total_count: Math.min(count, grid.filters.length ? countExactMax : count),
    total_count_exact: grid.filters.length === 0 || count <= countExactMax,
    limit: query.limit,
    offset: query.offset,
    next_cursor:
      last && page.length === query.limit
        ? encodeCursor(
            parts.map((_, i) => last[`k${i}`]),
            grid.sorts,
          )
        : null,
    column_ids: grid.columnIds,
  };
}
