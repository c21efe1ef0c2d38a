/** Saved views of a table (filters, sorts, hidden and ordered columns), and the grid a request asks for. */
import type { Db } from '../../db/sql.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import {
  parseFilterParam,
  parseSortParam,
  type Filter,
  type FilterMode,
  type RowQuery,
  type Sort,
  type View,
  type ViewCreate,
  type ViewUpdate,
} from '../../domain/tables/tables.js';
import type { TableColumns } from './columns.js';

interface ViewRecord {
  id: string;
  table_id: string;
  name: string;
  filters: Filter[];
  filter_mode: FilterMode;
  sorts: Sort[];
  hidden_column_ids: string[];
  column_order: string[];
  created_at: Date;
  updated_at: Date;
}

const toView = (v: ViewRecord): View => ({
  id: v.id,
  table_id: v.table_id,
  name: v.name,
  filters: v.filters,
  filter_mode: v.filter_mode,
  sorts: v.sorts,
  hidden_column_ids: v.hidden_column_ids,
  column_order: v.column_order,
  created_at: v.created_at.toISOString(),
  updated_at: v.updated_at.toISOString(),
});

/** Every column a view or a query names must be a column of the table. */
function checkColumns(columns: TableColumns, ids: Iterable<string>) {
  for (const id of ids) {
    if (!columns.byId.has(id.toLowerCase())) throw new ApiError('conflict', `The table has no column ${id}.`);
  }
}

const lowerIds = (ids: string[]) => [...new Set(ids.map((id) => id.toLowerCase()))];
const viewNameTaken = (name: string) => new ApiError('conflict', `The table already has a view named "${name}".`);
const isUniqueViolation = (error: unknown) => (error as { code?: string }).code === '23505';

export async function listViews(db: Db, tableId: string): Promise<View[]> {
  const rows = await db<ViewRecord[]>`select * from table_views where table_id = ${tableId} order by lower(name), id`;
  return rows.map(toView);
}

export async function getView(db: Db, tableId: string, viewId: string): Promise<View | undefined> {
  const [row] = await db<ViewRecord[]>`select * from table_views where table_id = ${tableId} and id = ${viewId}`;
  return row && toView(row);
}

export async function createView(
  db: Db,
  workspaceId: string,
  tableId: string,
  columns: TableColumns,
  input: ViewCreate,
): Promise<View> {
  checkColumns(columns, [
    ...input.filters.map((f) => f.column_id),
    ...input.sorts.map((s) => s.column_id),
    ...input.hidden_column_ids,
    ...input.column_order,
  ]);
  try {
    const [row] = await db<ViewRecord[]>`
      insert into table_views (workspace_id, table_id, name, filters, filter_mode, sorts, hidden_column_ids, column_order)
      values (${workspaceId}, ${tableId}, ${input.name},
              ${db.json(input.filters.map((f) => ({ ...f, column_id: f.column_id.toLowerCase() })))}, ${input.filter_mode},
              ${db.json(input.sorts.map((s) => ({ ...s, column_id: s.column_id.toLowerCase() })))},
              ${lowerIds(input.hidden_column_ids)}::uuid[], ${lowerIds(input.column_order)}::uuid[])
      returning *`;
    return toView(row!);
  } catch (error) {
    if (isUniqueViolation(error)) throw viewNameTaken(input.name);
    throw error;
  }
}

export async function updateView(
  db: Db,
  tableId: string,
  viewId: string,
  columns: TableColumns,
  patch: ViewUpdate,
): Promise<View | undefined> {
  checkColumns(columns, [
    ...(patch.filters ?? []).map((f) => f.column_id),
    ...(patch.sorts ?? []).map((s) => s.column_id),
    ...(patch.hidden_column_ids ?? []),
    ...(patch.column_order ?? []),
  ]);
  try {
    const [row] = await db<ViewRecord[]>`
      update table_views set
        name = ${patch.name ?? db`name`},
        filters = ${patch.filters ? db.json(patch.filters.map((f) => ({ ...f, column_id: f.column_id.toLowerCase() }))) : db`filters`},
        filter_mode = ${patch.filter_mode ?? db`filter_mode`},
        sorts = ${patch.sorts ? db.json(patch.sorts.map((s) => ({ ...s, column_id: s.column_id.toLowerCase() }))) : db`sorts`},
        hidden_column_ids = ${patch.hidden_column_ids ? db`${lowerIds(patch.hidden_column_ids)}::uuid[]` : db`hidden_column_ids`},
        column_order = ${patch.column_order ? db`${lowerIds(patch.column_order)}::uuid[]` : db`column_order`},
        updated_at = now()
      where table_id = ${tableId} and id = ${viewId}
      returning *`;
    return row && toView(row);
  } catch (error) {
    if (isUniqueViolation(error)) throw viewNameTaken(patch.name ?? '');
    throw error;
  }
}

export async function deleteView(db: Db, tableId: string, viewId: string): Promise<boolean> {
  const rows = await db`delete from table_views where table_id = ${tableId} and id = ${viewId} returning id`;
  return rows.length > 0;
}

/** What a grid request shows: filters, sorts and the visible columns in order. */
export interface Grid {
  filters: Filter[];
  filterMode: FilterMode;
  sorts: Sort[];
  columnIds: string[];
}

/** The columns to show: the view's order first, the rest in table order, less the hidden ones. */
function visibleColumns(columns: TableColumns, view?: View): string[] {
  const all = columns.list.map((c) => c.id);
  if (!view) return all;
  const hidden = new Set(view.hidden_column_ids);
  const first = view.column_order.filter((id) => columns.byId.has(id));
  return [...first, ...all.filter((id) => !first.includes(id))].filter((id) => !hidden.has(id));
}

/** A saved view, with the query's own filters and sorts replacing the view's when given. */
export async function resolveGrid(db: Db, tableId: string, columns: TableColumns, query: RowQuery): Promise<Grid> {
  const view = query.view_id ? await getView(db, tableId, query.view_id) : undefined;
  if (query.view_id && !view) throw notFound('View');
  const filters = query.filter ? query.filter.map(parseFilterParam) : (view?.filters ?? []);
  const sorts = query.sort ? query.sort.map(parseSortParam) : (view?.sorts ?? []);
  checkColumns(columns, [...filters.map((f) => f.column_id), ...sorts.map((s) => s.column_id)]);
  return {
    filters: filters.map((f) => ({ ...f, column_id: f.column_id.toLowerCase() })),
    filterMode: query.filter_mode ?? view?.filter_mode ?? 'all',
    sorts: sorts.map((s) => ({ ...s, column_id: s.column_id.toLowerCase() })),
    columnIds: visibleColumns(columns, view),
  };
}
