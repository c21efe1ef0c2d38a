/**
 * CRM connections (tokens arrive sealed), imports with their watermarks and runs, and write-backs
 * with their per-row results (decision 042). Every counter moves in the transaction of the rows it
 * counts, guarded by a cursor (the import's watermark, the write-back's after_seq).
 */
import type { Db, Sql } from '../../db/sql.js';
import type { CrmObjectType, Import, ImportRun, WriteBack } from '../../domain/sourcing/crm.js';
import { writeFormulaCells } from '../tables/cells.js';
import { loadColumns } from '../tables/columns.js';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

// ---------------------------------------------------------------------------------------------
// Connections

export interface CrmConnectionRow {
  id: string;
  workspace_id: string;
  provider: 'hubspot';
  name: string;
  auth_kind: 'private_app' | 'oauth';
  token_sealed: string;
  account_id: string | null;
  status: 'connected' | 'reconnect_required';
  last_error: string | null;
  created_at: Date;
}

export const shownConnection = ({ token_sealed: _t, workspace_id: _w, ...c }: CrmConnectionRow) => ({
  ...c,
  created_at: c.created_at.toISOString(),
});

/** Inserts a connection; null when the workspace has one of that name. */
export async function insertCrmConnection(
  db: Db,
  c: {
    id: string;
    workspaceId: string;
    name: string;
    tokenSealed: string;
    accountId: string | null;
    connectedBy: string | null;
  },
): Promise<CrmConnectionRow | null> {
  const [row] = await db<CrmConnectionRow[]>`
    insert into crm_connections (id, workspace_id, name, auth_kind, token_sealed, account_id, connected_by)
    values (${c.id}, ${c.workspaceId}, ${c.name}, 'private_app', ${c.tokenSealed}, ${c.accountId}, ${c.connectedBy})
    on conflict do nothing returning *`;
  return row ?? null;
}

export async function getCrmConnection(db: Db, workspaceId: string, id: string): Promise<CrmConnectionRow | undefined> {
  const [row] = await db<
    CrmConnectionRow[]
  >`select * from crm_connections where workspace_id = ${workspaceId} and id = ${id}`;
  return row;
}

export async function listCrmConnections(db: Db, workspaceId: string): Promise<CrmConnectionRow[]> {
  return db<
    CrmConnectionRow[]
  >`select * from crm_connections where workspace_id = ${workspaceId} order by created_at, id`;
}

export async function deleteCrmConnection(db: Db, workspaceId: string, id: string): Promise<boolean> {
  return (await db`delete from crm_connections where workspace_id = ${workspaceId} and id = ${id}`).count > 0;
}

export async function markCrmReconnect(db: Db, id: string, error: string): Promise<void> {
  await db`update crm_connections set status = 'reconnect_required', last_error = ${error}, updated_at = now() where id = ${id}`;
}

// ---------------------------------------------------------------------------------------------
// Imports and runs

export interface ImportRow {
  id: string;
  workspace_id: string;
  table_id: string;
  name: string;
  source: 'crm' | 'csv_url';
  connection_id: string | null;
  object_type: CrmObjectType | null;
  list_id: string | null;
  filters: { property: string; operator: string; value?: string }[];
  csv_url: string | null;
  mapping: { source: string; column_name: string }[];
  key_field: string;
  watermark: Date | null;
  watermark_id: string | null;
  content_hash: string | null;
  created_at: Date;
  schedule_id: string | null;
}

interface RunRow {
  id: string;
  import_id: string;
  trigger: 'manual' | 'schedule';
  status: 'running' | 'succeeded' | 'failed';
  records_read: number;
  rows_created: number;
  rows_updated: number;
  rows_unchanged: number;
  rows_rejected: number;
  watermark_from: Date | null;
  watermark_to: Date | null;
  error: string | null;
  started_at: Date;
  finished_at: Date | null;
}

const toRun = ({ import_id: _i, ...r }: RunRow): ImportRun => ({
  ...r,
  watermark_from: iso(r.watermark_from),
  watermark_to: iso(r.watermark_to),
  started_at: r.started_at.toISOString(),
  finished_at: iso(r.finished_at),
});

const importSelect = (db: Db) => db`
  select i.*, s.id as schedule_id from sourcing_imports i left join import_schedules s on s.import_id = i.id`;

export async function toImports(db: Db, rows: ImportRow[]): Promise<Import[]> {
  const ids = rows.map((r) => r.id);
  const runs = ids.length
    ? await db<RunRow[]>`
        select * from (select r.*, row_number() over (partition by import_id order by started_at desc, id) as n from import_runs r where import_id = any(${ids}::uuid[])) x
        where n <= 10 order by started_at desc, id`
    : [];
  return rows.map((r) => ({
    id: r.id,
    table_id: r.table_id,
    name: r.name,
    source: r.source,
    connection_id: r.connection_id,
    object_type: r.object_type,
    list_id: r.list_id,
    filters: r.filters as Import['filters'],
    csv_url: r.csv_url,
    mapping: r.mapping,
    key_field: r.key_field,
    watermark: iso(r.watermark),
    schedule_id: r.schedule_id,
    created_at: r.created_at.toISOString(),
    runs: runs.filter((x) => x.import_id === r.id).map(({ n: _n, ...x }: RunRow & { n?: number }) => toRun(x)),
  }));
}

export async function insertImport(
  db: Db,
  i: Omit<ImportRow, 'id' | 'created_at' | 'watermark' | 'watermark_id' | 'content_hash' | 'schedule_id'> & {
    createdBy: string | null;
  },
): Promise<ImportRow> {
  const [row] = await db<ImportRow[]>`
    insert into sourcing_imports (workspace_id, table_id, name, source, connection_id, object_type, list_id, filters, csv_url, mapping, key_field, created_by)
    values (${i.workspace_id}, ${i.table_id}, ${i.name}, ${i.source}, ${i.connection_id}, ${i.object_type}, ${i.list_id}, ${db.json(i.filters)},
            ${i.csv_url}, ${db.json(i.mapping)}, ${i.key_field}, ${i.createdBy})
    returning *, null::uuid as schedule_id`;
  return row!;
}

export async function getImport(
  db: Db,
  workspaceId: string,
  tableId: string | null,
  id: string,
): Promise<ImportRow | undefined> {
  const [row] = await db<ImportRow[]>`
    ${importSelect(db)} where i.workspace_id = ${workspaceId} and i.id = ${id} ${tableId ? db`and i.table_id = ${tableId}` : db``}`;
  return row;
}

export async function readImport(db: Db, id: string): Promise<ImportRow | undefined> {
  const [row] = await db<ImportRow[]>`${importSelect(db)} where i.id = ${id}`;
  return row;
}

export async function listImports(db: Db, workspaceId: string, tableId: string): Promise<ImportRow[]> {
  return db<
    ImportRow[]
  >`${importSelect(db)} where i.workspace_id = ${workspaceId} and i.table_id = ${tableId} order by i.created_at desc, i.id`;
}

export async function deleteImport(db: Db, workspaceId: string, tableId: string, id: string): Promise<boolean> {
  return (
    (
      await db`delete from sourcing_imports where workspace_id = ${workspaceId} and table_id = ${tableId} and id = ${id}`
    ).count > 0
  );
}

/** Starts a run once per id (a retried start finds it); a scheduled firing is one run per fire time. */
export async function startImportRun(
  db: Db,
  r: {
    id: string;
    workspaceId: string;
    importId: string;
    trigger: 'manual' | 'schedule';
    workflowId: string;
    watermark: Date | null;
  },
): Promise<void> {
  await db`
    insert into import_runs (id, workspace_id, import_id, trigger, workflow_id, watermark_from)
    values (${r.id}, ${r.workspaceId}, ${r.importId}, ${r.trigger}, ${r.workflowId}, ${r.watermark})
    on conflict do nothing`;
}

export async function getImportRun(db: Db, id: string): Promise<(RunRow & { workspace_id: string }) | undefined> {
  const [row] = await db<(RunRow & { workspace_id: string })[]>`select * from import_runs where id = ${id}`;
  return row;
}

/** Adds one page's counts to the run, and moves the import's watermark, only while it is still `from` (compare-and-set). */
export async function recordImportPage(
  tx: Db,
  p: {
    runId: string;
    importId: string;
    from: { watermark: Date | null; id: string | null };
    to: { watermark: Date | null; id: string | null };
    read: number;
    created: number;
    updated: number;
    unchanged: number;
    rejected: number;
    contentHash?: string | null;
  },
): Promise<boolean> {
  const moved = await tx`
    update sourcing_imports set watermark = ${p.to.watermark}, watermark_id = ${p.to.id},
      content_hash = coalesce(${p.contentHash ?? null}, content_hash), updated_at = now()
    where id = ${p.importId} and watermark is not distinct from ${p.from.watermark} and watermark_id is not distinct from ${p.from.id}`;
  if (moved.count === 0) return false;
  await tx`
    update import_runs set records_read = records_read + ${p.read}, rows_created = rows_created + ${p.created}, rows_updated = rows_updated + ${p.updated},
      rows_unchanged = rows_unchanged + ${p.unchanged}, rows_rejected = rows_rejected + ${p.rejected}, watermark_to = ${p.to.watermark}
    where id = ${p.runId} and status = 'running'`;
  return true;
}

export async function finishImportRun(
  db: Db,
  runId: string,
  status: 'succeeded' | 'failed',
  error: string | null,
): Promise<void> {
  await db`update import_runs set status = ${status}, error = ${error}, finished_at = now() where id = ${runId} and status = 'running'`;
}

// ---------------------------------------------------------------------------------------------
// Write-backs

export interface WriteBackRow {
  id: string;
  workspace_id: string;
  table_id: string;
  connection_id: string;
  object_type: CrmObjectType;
  id_property: string;
  mapping: { column_id: string; property: string }[];
  row_ids: string[] | null;
  result_column_id: string | null;
  status: 'running' | 'succeeded' | 'failed';
  after_seq: string;
  rows_total: number;
  rows_written: number;
  rows_unchanged: number;
  rows_failed: number;
  error: string | null;
  created_at: Date;
  finished_at: Date | null;
}

export const toWriteBack = (w: WriteBackRow): WriteBack => ({
  id: w.id,
  table_id: w.table_id,
  connection_id: w.connection_id,
  object_type: w.object_type,
  id_property: w.id_property,
  status: w.status,
  rows_total: w.rows_total,
  rows_written: w.rows_written,
  rows_unchanged: w.rows_unchanged,
  rows_failed: w.rows_failed,
  error: w.error,
  created_at: w.created_at.toISOString(),
  finished_at: iso(w.finished_at),
});

export async function insertWriteBack(
  db: Db,
  w: {
    workspaceId: string;
    tableId: string;
    connectionId: string;
    objectType: CrmObjectType;
    idProperty: string;
    mapping: WriteBackRow['mapping'];
    rowIds: string[] | null;
    resultColumnId: string | null;
    createdBy: string | null;
  },
): Promise<WriteBackRow> {
  const [row] = await db<WriteBackRow[]>`
    insert into write_backs (workspace_id, table_id, connection_id, object_type, id_property, mapping, row_ids, result_column_id, created_by, rows_total)
    values (${w.workspaceId}, ${w.tableId}, ${w.connectionId}, ${w.objectType}, ${w.idProperty}, ${db.json(w.mapping)}, ${w.rowIds}, ${w.resultColumnId}, ${w.createdBy},
      (select count(*) from table_rows where table_id = ${w.tableId} and (${w.rowIds}::uuid[] is null or id = any(${w.rowIds}::uuid[]))))
    returning *`;
  return row!;
}

export async function getWriteBack(
  db: Db,
  workspaceId: string,
  tableId: string | null,
  id: string,
): Promise<WriteBackRow | undefined> {
  const [row] = await db<WriteBackRow[]>`
    select * from write_backs where workspace_id = ${workspaceId} and id = ${id} ${tableId ? db`and table_id = ${tableId}` : db``}`;
  return row;
}

export async function readWriteBack(db: Db, id: string): Promise<WriteBackRow | undefined> {
  const [row] = await db<WriteBackRow[]>`select * from write_backs where id = ${id}`;
  return row;
}

export interface WriteBackSourceRow {
  id: string;
  seq: string;
  cells: Record<string, unknown>;
  written_hash: string | null;
}

/** The next batch of rows after the cursor, with the hash last written for each. */
export async function writeBackBatch(db: Db, w: WriteBackRow, limit: number): Promise<WriteBackSourceRow[]> {
  // The batch first (the table's order index), then each row's link by its key: never a join over all links.
  return db<WriteBackSourceRow[]>`
    with batch as (
      select r.id, r.seq, r.cells from table_rows r
      where r.table_id = ${w.table_id} and r.seq > ${w.after_seq}::bigint
        and (${w.row_ids}::uuid[] is null or r.id = any(${w.row_ids}::uuid[]))
      order by r.seq limit ${limit}
    )
    select b.id, b.seq::text as seq, b.cells,
      (select l.written_hash from crm_row_links l where l.row_id = b.id and l.connection_id = ${w.connection_id} and l.object_type = ${w.object_type}) as written_hash
    from batch b order by b.seq`;
}

export interface RowResult {
  rowId: string;
  result: 'written' | 'unchanged' | 'failed';
  objectId: string | null;
  error: string | null;
  hash: string | null;
}

/**
 * Records one batch's results and moves the cursor, only while it is still at `fromSeq`: the
 * per-row results, the rows' links (the hash of what the CRM now has), the result column.
 */
export async function recordWriteBackBatch(
  sql: Sql,
  w: WriteBackRow,
  fromSeq: string,
  toSeq: string,
  results: RowResult[],
  resultText: (r: RowResult) => string,
): Promise<boolean> {
  return sql.begin<boolean>(async (tx) => {
    const moved =
      await tx`update write_backs set after_seq = ${toSeq}::bigint where id = ${w.id} and after_seq = ${fromSeq}::bigint and status = 'running'`;
    if (moved.count === 0) return false;
    if (results.length === 0) return true;
    const payload = results.map((r) => ({
      row_id: r.rowId,
      result: r.result,
      object_id: r.objectId,
      error: r.error,
      hash: r.hash,
    }));
    await tx`
      insert into write_back_rows (write_back_id, row_id, result, object_id, error)
      select ${w.id}, x.row_id, x.result, x.object_id, x.error
      from jsonb_to_recordset(${tx.json(payload)}) as x (row_id uuid, result text, object_id text, error text, hash text)
      on conflict (write_back_id, row_id) do update set result = excluded.result, object_id = excluded.object_id, error = excluded.error, updated_at = now()`;
    await tx`
      insert into crm_row_links (row_id, connection_id, object_type, object_id, written_hash, last_result, last_error, last_written_at)
      select x.row_id, ${w.connection_id}, ${w.object_type}, x.object_id, x.hash, x.result, x.error, now()
      from jsonb_to_recordset(${tx.json(payload)}) as x (row_id uuid, result text, object_id text, error text, hash text)
      on conflict (row_id, connection_id, object_type) do update set
        object_id = coalesce(excluded.object_id, crm_row_links.object_id),
        written_hash = case when excluded.last_result = 'failed' then crm_row_links.written_hash else excluded.written_hash end,
        last_result = excluded.last_result, last_error = excluded.last_error, last_written_at = now()`;
    if (w.result_column_id) {
      const cells = results.map((r) => ({ id: r.rowId, set: { [w.result_column_id!]: resultText(r) } }));
      const changed = await tx<{ id: string; cells: Record<string, string> }[]>`
        update table_rows r set cells = r.cells || x.set, updated_at = now()
        from jsonb_to_recordset(${tx.json(cells)}) as x (id uuid, set jsonb)
        where r.table_id = ${w.table_id} and r.id = x.id and not (r.cells @> x.set)
        returning r.id, r.cells`;
      // A formula reading the result column is computed again, as for any cell written.
      if (changed.length > 0) await writeFormulaCells(tx, await loadColumns(tx, w.table_id), changed);
    }
    const count = (k: RowResult['result']) => results.filter((r) => r.result === k).length;
    await tx`
      update write_backs set rows_written = rows_written + ${count('written')}, rows_unchanged = rows_unchanged + ${count('unchanged')},
        rows_failed = rows_failed + ${count('failed')} where id = ${w.id}`;
    return true;
  });
}

export async function finishWriteBack(
  db: Db,
  id: string,
  status: 'succeeded' | 'failed',
  error: string | null,
): Promise<void> {
  await db`update write_backs set status = ${status}, error = ${error}, finished_at = now() where id = ${id} and status = 'running'`;
}

export async function listWriteBackRows(
  db: Db,
  id: string,
  q: { result?: string | undefined; limit: number; offset: number },
) {
  const where = db`write_back_id = ${id} ${q.result ? db`and result = ${q.result}` : db``}`;
  const rows = await db<
    { row_id: string; result: 'written' | 'unchanged' | 'failed'; object_id: string | null; error: string | null }[]
  >`
    select row_id, result, object_id, error from write_back_rows where ${where} order by updated_at, row_id limit ${q.limit} offset ${q.offset}`;
  const [count] = await db<{ n: number }[]>`select count(*)::int as n from write_back_rows where ${where}`;
  return { rows: [...rows], total_count: count!.n };
}
