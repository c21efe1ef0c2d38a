/** Import schedules (decision 042): one row per recurring import, mirrored by one Temporal Schedule. */
import type { Db } from '../../db/sql.js';

export interface ImportScheduleRow {
  id: string;
  workspace_id: string;
  import_id: string;
  table_id: string;
  interval_seconds: number;
  catchup_window_seconds: number;
  paused: boolean;
  created_at: Date;
}

const select = (db: Db) =>
  db`select s.*, i.table_id from import_schedules s join sourcing_imports i on i.id = s.import_id`;

/** Null when the import has a schedule already. */
export async function insertImportSchedule(
  db: Db,
  s: {
    workspaceId: string;
    importId: string;
    intervalSeconds: number;
    catchupWindowSeconds: number;
    paused: boolean;
    createdBy: string | null;
  },
) {
  const [row] = await db<{ id: string }[]>`
    insert into import_schedules (workspace_id, import_id, interval_seconds, catchup_window_seconds, paused, created_by)
    values (${s.workspaceId}, ${s.importId}, ${s.intervalSeconds}, ${s.catchupWindowSeconds}, ${s.paused}, ${s.createdBy})
    on conflict (import_id) do nothing returning id`;
  return row ? (await readImportSchedule(db, row.id))! : null;
}

export async function readImportSchedule(db: Db, id: string): Promise<ImportScheduleRow | undefined> {
  const [row] = await db<ImportScheduleRow[]>`${select(db)} where s.id = ${id}`;
  return row;
}

export async function getImportSchedule(
  db: Db,
  workspaceId: string,
  id: string,
): Promise<ImportScheduleRow | undefined> {
  const [row] = await db<ImportScheduleRow[]>`${select(db)} where s.workspace_id = ${workspaceId} and s.id = ${id}`;
  return row;
}

export async function listImportSchedules(db: Db, workspaceId: string): Promise<ImportScheduleRow[]> {
  return db<ImportScheduleRow[]>`${select(db)} where s.workspace_id = ${workspaceId} order by s.created_at, s.id`;
}

export async function setImportSchedulePaused(db: Db, id: string, paused: boolean): Promise<void> {
  await db`update import_schedules set paused = ${paused}, updated_at = now() where id = ${id}`;
}

export async function deleteImportScheduleRow(db: Db, id: string): Promise<void> {
  await db`delete from import_schedules where id = ${id}`;
}

export async function importWorkspace(
  db: Db,
  workspaceId: string,
  importId: string,
): Promise<{ id: string; table_id: string } | undefined> {
  const [row] = await db<
    { id: string; table_id: string }[]
  >`select id, table_id from sourcing_imports where workspace_id = ${workspaceId} and id = ${importId}`;
  return row;
}
