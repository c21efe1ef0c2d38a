/**
 * Landing sourced records in a table: each record has a stable key (sourced_row_keys, unique per
 * table). A new key becomes a new row; a known key is a duplicate (`insert`) or an update of the
 * row's cells when they changed (`upsert`). Landings into one table take a transaction-scoped
 * advisory lock on it, so two sources landing the same key at once write one row.
 */
import type { Db } from '../../db/sql.js';
import type { Cells } from '../../domain/tables/tables.js';
import { writeFormulaCells } from '../tables/cells.js';
import { insertRows } from '../tables/rows.js';
import { loadColumns, createInputColumns, type TableColumns } from '../tables/columns.js';
import { ApiError } from '../../domain/shared/errors.js';

export interface LandRecord {
  key: string;
  cells: Cells;
}

export interface Landed {
  created: number;
  updated: number;
  unchanged: number;
  duplicates: number;
  /** Row ids of the created rows, in the records' order. */
  createdIds: string[];
}

/**
 * Input columns named `names` (matched without case; made at the end when missing): their ids by
 * name. A computed column of one of the names is refused, since its cells cannot be written.
 */
export async function ensureInputColumns(
  tx: Db,
  workspaceId: string,
  tableId: string,
  names: string[],
): Promise<Record<string, string>> {
  await tx`select 1 from tables where id = ${tableId} and workspace_id = ${workspaceId} for update`;
  const existing = await tx<{ id: string; name: string; kind: string; position: number }[]>`
    select id, name, kind, position from table_columns where table_id = ${tableId} order by position`;
  const byName = new Map(existing.map((c) => [c.name.toLowerCase(), c]));
  const out: Record<string, string> = {};
  const missing: string[] = [];
  for (const name of names) {
    const found = byName.get(name.toLowerCase());
    if (found && found.kind !== 'input')
      throw new ApiError(
        'conflict',
        `The table's column "${found.name}" is a ${found.kind} column; sourced values go in input columns. Rename it, or land in another table.`,
      );
    if (found) out[name] = found.id;
    else missing.push(name);
  }
  const ids = await createInputColumns(tx, workspaceId, tableId, existing.length, missing);
  missing.forEach((name, i) => (out[name] = ids[i]!));
  return out;
}

/** Serialises landings into one table for the rest of the transaction. */
export async function lockTableLanding(tx: Db, tableId: string): Promise<void> {
  await tx`select pg_advisory_xact_lock(hashtextextended(${`landing:${tableId}`}, 0))`;
}

/** The row ids of these keys in the table, by key. */
export async function rowsByKey(tx: Db, tableId: string, keys: string[]): Promise<Map<string, string>> {
  if (keys.length === 0) return new Map();
  const rows = await tx<{ key: string; row_id: string }[]>`
    select key, row_id from sourced_row_keys where table_id = ${tableId} and key = any(${keys}::text[])`;
  return new Map(rows.map((r) => [r.key, r.row_id]));
}

const withoutEmpty = (cells: Cells) =>
  Object.fromEntries(Object.entries(cells).filter(([, v]) => v !== null && v !== ''));

/**
 * Lands records (call after lockTableLanding, in the same transaction). A key repeated within the
 * records lands once, the last one winning. `limit` caps the rows created (credits); records past
 * it are left out and counted in neither total.
 */
export async function landRecords(
  tx: Db,
  input: {
    workspaceId: string;
    tableId: string;
    source: string;
    records: LandRecord[];
    mode: 'insert' | 'upsert';
    limit?: number;
    columns?: TableColumns;
  },
): Promise<Landed & { leftOut: number }> {
  const unique = new Map<string, Cells>();
  for (const r of input.records) unique.set(r.key, withoutEmpty(r.cells));
  const known = await rowsByKey(tx, input.tableId, [...unique.keys()]);
  const fresh = [...unique].filter(([key]) => !known.has(key));
  const allowed = input.limit === undefined ? fresh.length : Math.max(0, Math.min(fresh.length, input.limit));
  const creating = fresh.slice(0, allowed);
  const columns = input.columns ?? (await loadColumns(tx, input.tableId));
  const createdIds = await insertRows(
    tx,
    input.workspaceId,
    input.tableId,
    columns,
    creating.map(([, cells]) => cells),
  );
  if (createdIds.length > 0) {
    await tx`
      insert into sourced_row_keys (workspace_id, table_id, key, row_id, source)
      select ${input.workspaceId}, ${input.tableId}, x.key, x.row_id, ${input.source}
      from unnest(${creating.map(([key]) => key)}::text[], ${createdIds}::uuid[]) as x (key, row_id)`;
  }
  let updated = 0;
  let unchanged = 0;
  const existing = [...unique].filter(([key]) => known.has(key));
  if (input.mode === 'upsert' && existing.length > 0) {
    const payload = existing.map(([key, cells]) => ({ id: known.get(key)!, set: cells }));
    const changed = await tx<{ id: string; cells: Cells }[]>`
      update table_rows r set cells = r.cells || x.set, updated_at = now()
      from jsonb_to_recordset(${tx.json(payload)}) as x (id uuid, set jsonb)
      where r.table_id = ${input.tableId} and r.id = x.id and not (r.cells @> x.set)
      returning r.id, r.cells`;
    await writeFormulaCells(tx, columns, changed);
    updated = changed.length;
    unchanged = existing.length - updated;
  }
  return {
    created: createdIds.length,
    updated,
    unchanged,
    duplicates: input.mode === 'insert' ? existing.length : 0,
    createdIds,
    leftOut: fresh.length - allowed,
  };
}
