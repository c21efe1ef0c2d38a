/** Queries of a table's columns and of column templates; formula columns are computed here when they change. */
import type { Db, Sql } from '../../db/sql.js';
import { enrichmentConfigView, type StoredEnrichmentConfig } from '../../domain/tables/enrichments.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import { agentColumnConfigView } from '../../domain/agents/saved-agents.js';
import {
  dependentsOf,
  displayFormula,
  formulaReferences,
  planFormulas,
  storeFormula,
  type FormulaPlan,
} from '../../domain/tables/formula.js';
import {
  columnsPerTable,
  computedKinds,
  type Column,
  type ColumnCreate,
  type ColumnKind,
  type ColumnTemplate,
  type ColumnUpdate,
} from '../../domain/tables/tables.js';
import { recomputeFormulas } from './cells.js';
import { requireTable } from './tables.js';

export interface ColumnRecord {
  id: string;
  table_id: string;
  name: string;
  kind: ColumnKind;
  position: number;
  parent_column_id: string | null;
  /** A formula's expression; an enrichment column's provider settings; an output column's field. */
  config: { formula?: string; output?: string } & Partial<StoredEnrichmentConfig>;
  created_at: Date;
  updated_at: Date;
}

/** A table's columns with what their formulas need: loaded once per request that reads or writes cells. */
export interface TableColumns {
  list: ColumnRecord[];
  byId: Map<string, ColumnRecord>;
  plan: FormulaPlan;
}

export async function loadColumns(db: Db, tableId: string): Promise<TableColumns> {
  const list = await db<ColumnRecord[]>`
    select id, table_id, name, kind, position, parent_column_id, config, created_at, updated_at
    from table_columns where table_id = ${tableId} order by position, created_at, id`;
  return {
    list,
    byId: new Map(list.map((c) => [c.id, c])),
    plan: planFormulas(list.map((c) => ({ id: c.id, name: c.name, kind: c.kind, formula: c.config.formula ?? null }))),
  };
}

export const isComputed = (column: ColumnRecord) => computedKinds.has(column.kind);

export function toColumn(column: ColumnRecord, columns: TableColumns): Column {
  const formula = column.config.formula;
  return {
    id: column.id,
    table_id: column.table_id,
    name: column.name,
    kind: column.kind,
    position: column.position,
    parent_column_id: column.parent_column_id,
    formula: formula === undefined ? null : displayFormula(formula, (id) => columns.byId.get(id)?.name),
    formula_error: columns.plan.errors.get(column.id) ?? null,
    enrichment:
      column.kind === 'enrichment' && column.parent_column_id === null ? enrichmentConfigView(column.config) : null,
    agent: column.kind === 'agent' && column.parent_column_id === null ? agentColumnConfigView(column.config) : null,
    output_field: column.parent_column_id !== null ? (column.config.output ?? null) : null,
    created_at: column.created_at.toISOString(),
    updated_at: column.updated_at.toISOString(),
  };
}

export const listColumns = (columns: TableColumns) => columns.list.map((c) => toColumn(c, columns));

/** The id of the table's column of that name, case ignored. */
const idByName = (columns: TableColumns) => (name: string) =>
  columns.list.find((c) => c.name.toLowerCase() === name.toLowerCase())?.id;

const nameTaken = (name: string) => new ApiError('conflict', `The table already has a column named "${name}".`);

function isUniqueViolation(error: unknown) {
  return (error as { code?: string }).code === '23505';
}

/** Writes positions 0..n-1 in the order given. */
async function renumber(db: Db, ids: string[]) {
  await db`
    update table_columns c set position = o.n - 1
    from unnest(${ids}::uuid[]) with ordinality as o (id, n)
    where c.id = o.id and c.position <> o.n - 1`;
}

async function orderedIds(db: Db, tableId: string): Promise<string[]> {
  const rows = await db<
    { id: string }[]
  >`select id from table_columns where table_id = ${tableId} order by position, created_at, id`;
  return rows.map((r) => r.id);
}

/** Moves a column to a position (past the end appends), keeping positions without gaps. */
async function placeColumn(db: Db, tableId: string, columnId: string, wanted: number) {
  const ids = (await orderedIds(db, tableId)).filter((id) => id !== columnId);
  ids.splice(Math.min(wanted, ids.length), 0, columnId);
  await renumber(db, ids);
}

/** Moves a group of columns (an enrichment and its outputs) to a position together, in the group's order. */
export async function placeColumnGroup(db: Db, tableId: string, group: string[], wanted: number) {
  const ids = (await orderedIds(db, tableId)).filter((id) => !group.includes(id));
  ids.splice(Math.min(wanted, ids.length), 0, ...group);
  await renumber(db, ids);
}

/** New input columns named `names`, from position `start` on; their ids in that order. */
export async function createInputColumns(
  db: Db,
  workspaceId: string,
  tableId: string,
  start: number,
  names: string[],
): Promise<string[]> {
  if (names.length === 0) return [];
  const rows = await db<{ id: string; position: number }[]>`
    insert into table_columns (workspace_id, table_id, name, kind, position)
    select ${workspaceId}, ${tableId}, x.name, 'input', ${start} + x.n - 1
    from unnest(${names}::text[]) with ordinality as x (name, n)
    returning id, position`;
  return [...rows].sort((a, b) => a.position - b.position).map((r) => r.id);
}

export async function createColumn(
  sql: Sql,
  workspaceId: string,
  tableId: string,
  input: ColumnCreate,
): Promise<Column> {
  try {
    return await sql.begin(async (tx) => {
      await requireTable(tx, workspaceId, tableId, 'update');
      const before = await loadColumns(tx, tableId);
      if (before.list.length >= columnsPerTable)
        throw new ApiError('conflict', `A table has at most ${columnsPerTable} columns.`);
      if (input.kind === 'enrichment') throw new Error('Enrichment columns are made by createEnrichmentColumn.');
      const config = input.kind === 'formula' ? { formula: storeFormula(input.formula, idByName(before)) } : {};
      const [row] = await tx<{ id: string }[]>`
        insert into table_columns (workspace_id, table_id, name, kind, position, config)
        values (${workspaceId}, ${tableId}, ${input.name}, ${input.kind}, ${before.list.length}, ${tx.json(config)})
        returning id`;
      const id = row!.id;
      if (input.position !== undefined) await placeColumn(tx, tableId, id, input.position);
      const columns = await loadColumns(tx, tableId);
      if (input.kind === 'formula')
        await recomputeFormulas(tx, tableId, columns, { columnIds: new Set([id]), fresh: true });
      return toColumn(columns.byId.get(id)!, columns);
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw nameTaken(input.name);
    throw error;
  }
}

export async function getColumn(db: Db, workspaceId: string, tableId: string, columnId: string): Promise<Column> {
  await requireTable(db, workspaceId, tableId);
  const columns = await loadColumns(db, tableId);
  const column = columns.byId.get(columnId);
  if (!column) throw notFound('Column');
  return toColumn(column, columns);
}

export async function updateColumn(
  sql: Sql,
  workspaceId: string,
  tableId: string,
  columnId: string,
  patch: ColumnUpdate,
): Promise<Column> {
  try {
    return await sql.begin(async (tx) => {
      await requireTable(tx, workspaceId, tableId, 'update');
      const before = await loadColumns(tx, tableId);
      const column = before.byId.get(columnId);
      if (!column) throw notFound('Column');
      if (patch.formula !== undefined && column.kind !== 'formula') {
        throw new ApiError(
          'conflict',
          `"${column.name}" is an ${column.kind} column; only a formula column has a formula.`,
        );
      }
      const config =
        patch.formula === undefined
          ? column.config
          : { ...column.config, formula: storeFormula(patch.formula, idByName(before)) };
      await tx`
        update table_columns set name = ${patch.name ?? column.name}, config = ${tx.json(config)}, updated_at = now()
        where id = ${columnId}`;
      if (patch.position !== undefined) await placeColumn(tx, tableId, columnId, patch.position);
      const columns = await loadColumns(tx, tableId);
      if (patch.formula !== undefined) {
        await recomputeFormulas(tx, tableId, columns, { columnIds: dependentsOf(columns.plan, [columnId]) });
      }
      return toColumn(columns.byId.get(columnId)!, columns);
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw nameTaken(patch.name ?? '');
    throw error;
  }
}

/**
 * A column read by a formula stays until the formula stops reading it. Deleting one takes its
 * values out of every row and out of the table's saved views.
 */
export async function deleteColumn(sql: Sql, workspaceId: string, tableId: string, columnId: string): Promise<void> {
  await sql.begin(async (tx) => {
    await requireTable(tx, workspaceId, tableId, 'update');
    const columns = await loadColumns(tx, tableId);
    const column = columns.byId.get(columnId);
    if (!column) throw notFound('Column');
    // An enrichment column's output columns go with it (the foreign key cascades).
    const removed = [columnId, ...columns.list.filter((c) => c.parent_column_id === columnId).map((c) => c.id)];
    const others = columns.list.filter((c) => !removed.includes(c.id));
    const readers = others.filter(
      (c) => c.config.formula && formulaReferences(c.config.formula).some((id) => removed.includes(id)),
    );
    if (readers.length > 0) {
      throw new ApiError(
        'conflict',
        `"${column.name}" is read by the formula of ${readers.map((c) => `"${c.name}"`).join(', ')}; change those first.`,
      );
    }
    const feeds = others.filter((c) => Object.values(c.config.inputs ?? {}).some((id) => removed.includes(id)));
    if (feeds.length > 0) {
      throw new ApiError(
        'conflict',
        `"${column.name}" is an input of the enrichment ${feeds.map((c) => `"${c.name}"`).join(', ')}; change those first.`,
      );
    }
    await tx`delete from table_columns where id = ${columnId}`;
    await renumber(tx, await orderedIds(tx, tableId));
    if (!isComputed(column)) {
      await tx`update table_rows set cells = cells - ${columnId}::text where table_id = ${tableId} and cells ? ${columnId}::text`;
    }
    for (const id of removed) {
      await tx`
        update table_views set
          filters = coalesce((select jsonb_agg(f) from jsonb_array_elements(filters) f where f ->> 'column_id' <> ${id}), '[]'),
          sorts = coalesce((select jsonb_agg(s) from jsonb_array_elements(sorts) s where s ->> 'column_id' <> ${id}), '[]'),
          hidden_column_ids = array_remove(hidden_column_ids, ${id}::uuid),
          column_order = array_remove(column_order, ${id}::uuid),
          updated_at = now()
        where table_id = ${tableId}
          and (${id}::uuid = any(hidden_column_ids) or ${id}::uuid = any(column_order)
               or filters @> ${tx.json([{ column_id: id }])} or sorts @> ${tx.json([{ column_id: id }])})`;
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Column templates

interface TemplateRecord {
  id: string;
  name: string;
  kind: ColumnKind;
  column_name: string;
  config: { formula?: string };
  created_at: Date;
  updated_at: Date;
}

const toTemplate = (t: TemplateRecord): ColumnTemplate => ({
  id: t.id,
  name: t.name,
  kind: t.kind,
  column_name: t.column_name,
  formula: t.config.formula ?? null,
  created_at: t.created_at.toISOString(),
  updated_at: t.updated_at.toISOString(),
});

const templateNameTaken = (name: string) =>
  new ApiError('conflict', `A column template named "${name}" already exists.`);

/** Saves a column's configuration; a formula is kept as a person reads it, with column names. */
export async function saveColumnTemplate(
  sql: Sql,
  workspaceId: string,
  tableId: string,
  columnId: string,
  name: string,
): Promise<ColumnTemplate> {
  const column = await getColumn(sql, workspaceId, tableId, columnId);
  if (column.parent_column_id)
    throw new ApiError('conflict', 'An output column is saved with its parent column, not alone.');
  if (column.kind === 'enrichment')
    throw new ApiError('conflict', 'Enrichment columns cannot be saved as templates yet.');
  if (column.kind === 'agent')
    throw new ApiError('conflict', 'Agent columns are deployed from their saved agent, not saved as templates.');
  try {
    const [row] = await sql<TemplateRecord[]>`
      insert into column_templates (workspace_id, name, column_name, kind, config)
      values (${workspaceId}, ${name}, ${column.name}, ${column.kind}, ${sql.json(column.formula === null ? {} : { formula: column.formula })})
      returning *`;
    return toTemplate(row!);
  } catch (error) {
    if (isUniqueViolation(error)) throw templateNameTaken(name);
    throw error;
  }
}

export async function listColumnTemplates(db: Db, workspaceId: string): Promise<ColumnTemplate[]> {
  const rows = await db<
    TemplateRecord[]
  >`select * from column_templates where workspace_id = ${workspaceId} order by lower(name), id`;
  return rows.map(toTemplate);
}

export async function getColumnTemplate(db: Db, workspaceId: string, id: string): Promise<ColumnTemplate | undefined> {
  const [row] = await db<
    TemplateRecord[]
  >`select * from column_templates where workspace_id = ${workspaceId} and id = ${id}`;
  return row && toTemplate(row);
}

export async function updateColumnTemplate(
  db: Db,
  workspaceId: string,
  id: string,
  patch: { name?: string; column_name?: string },
): Promise<ColumnTemplate | undefined> {
  try {
    const [row] = await db<TemplateRecord[]>`
      update column_templates set name = coalesce(${patch.name ?? null}, name), column_name = coalesce(${patch.column_name ?? null}, column_name),
        updated_at = now()
      where workspace_id = ${workspaceId} and id = ${id} returning *`;
    return row && toTemplate(row);
  } catch (error) {
    if (isUniqueViolation(error)) throw templateNameTaken(patch.name ?? '');
    throw error;
  }
}

export async function deleteColumnTemplate(db: Db, workspaceId: string, id: string): Promise<boolean> {
  const rows = await db`delete from column_templates where workspace_id = ${workspaceId} and id = ${id} returning id`;
  return rows.length > 0;
}

/** A new column from a template; its formula's names refer to this table's columns. */
export async function createColumnFromTemplate(
  sql: Sql,
  workspaceId: string,
  tableId: string,
  input: { template_id: string; name?: string; position?: number },
): Promise<Column> {
  const template = await getColumnTemplate(sql, workspaceId, input.template_id);
  if (!template) throw notFound('Column template');
  const name = input.name ?? template.column_name;
  const create: ColumnCreate =
    template.kind === 'formula'
      ? { kind: 'formula', name, formula: template.formula ?? '', position: input.position }
      : { kind: 'input', name, position: input.position };
  return createColumn(sql, workspaceId, tableId, create);
}
