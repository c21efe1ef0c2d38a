/**
 * Queries of tables (interface spec: Table summary) and their folders. Every query is scoped to the
 * caller's workspace.
 */
import type { Db, Sql } from '../../db/sql.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import {
  folderDepthMax,
  type Folder,
  type FolderRef,
  type Table,
  type TableCreate,
  type TableListQuery,
  type TableUpdate,
} from '../../domain/tables/tables.js';

/** Who asks: the workspace, and the member whose favourites and last views are read. */
export interface Caller {
  workspaceId: string;
  memberId: string | null;
}

interface TableRecord {
  id: string;
  name: string;
  description: string | null;
  auto_run: boolean;
  keep_existing_results: boolean;
  row_count: number;
  created_at: Date;
  updated_at: Date;
  ai_made: boolean;
  archived_at: Date | null;
  deleted_at: Date | null;
  folder_id: string | null;
  former_tags: string[];
  is_favorite: boolean;
  last_viewed_at: Date | null;
  owner_display_name: string | null;
  owner_user_id: string | null;
  shared_as_template: boolean;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

// ---------------------------------------------------------------------------------------------
// Folder paths

interface FolderRecord {
  id: string;
  name: string;
  parent_id: string | null;
  created_at: Date;
  updated_at: Date;
}

/** Every folder of the workspace by id; paths are walked in memory from this one read. */
async function folderTree(db: Db, workspaceId: string): Promise<Map<string, FolderRecord>> {
  const rows = await db<FolderRecord[]>`
    select id, name, parent_id, created_at, updated_at from table_folders where workspace_id = ${workspaceId}`;
  return new Map(rows.map((r) => [r.id, r]));
}

/** From the top level down to the folder itself. */
function pathOf(tree: Map<string, FolderRecord>, folderId: string | null): FolderRef[] {
  const path: FolderRef[] = [];
  for (let id = folderId; id && path.length <= folderDepthMax; id = tree.get(id)?.parent_id ?? null) {
    const folder = tree.get(id);
    if (!folder) break;
    path.unshift({ id: folder.id, name: folder.name });
  }
  return path;
}

function toTable(r: TableRecord, tree: Map<string, FolderRecord>): Table {
  return {
    id: r.id,
    name: r.name,
    description: r.description,
    auto_run: r.auto_run,
    keep_existing_results: r.keep_existing_results,
    row_count: r.row_count,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
    ai_made: r.ai_made,
    archived_at: iso(r.archived_at),
    deleted_at: iso(r.deleted_at),
    folder_id: r.folder_id,
    folder_path: pathOf(tree, r.folder_id),
    former_tags: r.former_tags,
    is_favorite: r.is_favorite,
    last_viewed_at: iso(r.last_viewed_at),
    owner_display_name: r.owner_display_name,
    owner_user_id: r.owner_user_id,
    shared_as_template: r.shared_as_template,
  };
}

/** The summary columns, with the caller's own marks and the owner's names. */
const tableSelect = (db: Db, caller: Caller) => db`
  select t.id, t.name, t.description, t.auto_run, t.keep_existing_results, t.row_count, t.created_at, t.updated_at,
         t.ai_made, t.archived_at, t.deleted_at, t.folder_id, t.former_tags, t.shared_as_template,
         coalesce(m.is_favorite, false) as is_favorite, m.last_viewed_at,
         o.display_name as owner_display_name, o.idp_user_id as owner_user_id
  from tables t
  left join table_member_marks m on m.table_id = t.id and m.member_id = ${caller.memberId}
  left join members o on o.id = t.owner_member_id`;

async function readTable(db: Db, caller: Caller, id: string, deleted = false): Promise<Table | undefined> {
  const [row] = await db<TableRecord[]>`
    ${tableSelect(db, caller)}
    where t.workspace_id = ${caller.workspaceId} and t.id = ${id} and (t.deleted_at is not null) = ${deleted}`;
  return row && toTable(row, await folderTree(db, caller.workspaceId));
}

export async function getTable(db: Db, caller: Caller, id: string): Promise<Table | undefined> {
  return readTable(db, caller, id);
}

/**
 * A live (not deleted) table of the workspace, else 404. Inside a transaction, row writes take
 * `share` (a key-share lock: they never wait on each other) and column changes take `update`,
 * so a column never changes under a row being written.
 */
export async function requireTable(
  db: Db,
  workspaceId: string,
  id: string,
  lock?: 'share' | 'update',
): Promise<{ id: string; row_count: number }> {
  const mode = lock === 'update' ? db`for update` : lock === 'share' ? db`for key share` : db``;
  const [row] = await db<{ id: string; row_count: number }[]>`
    select id, row_count from tables where workspace_id = ${workspaceId} and id = ${id} and deleted_at is null ${mode}`;
  if (!row) throw notFound('Table');
  return row;
}

async function requireFolder(db: Db, workspaceId: string, id: string): Promise<void> {
  const [row] = await db`select 1 from table_folders where workspace_id = ${workspaceId} and id = ${id}`;
  if (!row) throw notFound('Folder');
}

export async function createTable(sql: Sql, caller: Caller, input: TableCreate): Promise<Table> {
  return sql.begin(async (tx) => {
    if (input.folder_id) await requireFolder(tx, caller.workspaceId, input.folder_id);
    const [row] = await tx<{ id: string }[]>`
      insert into tables (workspace_id, name, description, owner_member_id, folder_id, auto_run, keep_existing_results, ai_made, shared_as_template)
      values (${caller.workspaceId}, ${input.name}, ${input.description ?? null}, ${caller.memberId}, ${input.folder_id ?? null},
              ${input.auto_run ?? false}, ${input.keep_existing_results ?? true}, ${input.ai_made ?? false}, ${input.shared_as_template ?? false})
      returning id`;
    return (await readTable(tx, caller, row!.id))!;
  });
}

const orderBy = (db: Db, order: TableListQuery['order']) => {
  switch (order) {
    case 'name':
      return db`order by lower(t.name), t.created_at, t.id`;
    case 'recent':
      return db`order by m.last_viewed_at desc nulls last, t.updated_at desc, t.id`;
    case 'created':
      return db`order by t.created_at desc, t.id`;
    default:
      return db`order by t.updated_at desc, t.id`;
  }
};

export async function listTables(
  db: Db,
  caller: Caller,
  query: TableListQuery,
): Promise<{ tables: Table[]; total_count: number }> {
  const where = db`
    where t.workspace_id = ${caller.workspaceId}
      and (t.deleted_at is not null) = ${query.deleted}
      ${query.archived === 'exclude' ? db`and t.archived_at is null` : query.archived === 'only' ? db`and t.archived_at is not null` : db``}
      ${query.folder_id ? db`and t.folder_id = ${query.folder_id}` : db``}
      ${query.top_level === undefined ? db`` : query.top_level ? db`and t.folder_id is null` : db`and t.folder_id is not null`}
      ${query.favorite === undefined ? db`` : db`and coalesce(m.is_favorite, false) = ${query.favorite}`}`;
  const page = await db<
    TableRecord[]
  >`${tableSelect(db, caller)} ${where} ${orderBy(db, query.order)} limit ${query.limit} offset ${query.offset}`;
  const [count] = await db<{ total: number }[]>`
    select count(*)::int as total from tables t
    left join table_member_marks m on m.table_id = t.id and m.member_id = ${caller.memberId}
    ${where}`;
  const tree = await folderTree(db, caller.workspaceId);
  return { tables: page.map((r) => toTable(r, tree)), total_count: count!.total };
}

/** listUnfiledTables: tables that carried more than one tag when folders replaced tags and are not filed yet. */
export async function listUnfiledTables(db: Db, caller: Caller): Promise<Table[]> {
  const rows = await db<TableRecord[]>`
    ${tableSelect(db, caller)}
    where t.workspace_id = ${caller.workspaceId} and t.needs_filing and t.deleted_at is null
    order by lower(t.name), t.id`;
  const tree = await folderTree(db, caller.workspaceId);
  return rows.map((r) => toTable(r, tree));
}

async function setMark(db: Db, caller: Caller, tableId: string, mark: { is_favorite?: boolean; viewed?: boolean }) {
  if (!caller.memberId) {
    throw new ApiError(
      'conflict',
      'Favourites and recent views belong to a person; this API key has no member behind it any more.',
    );
  }
  await db`
    insert into table_member_marks (table_id, member_id, is_favorite, last_viewed_at)
    values (${tableId}, ${caller.memberId}, ${mark.is_favorite ?? false}, ${mark.viewed ? db`now()` : null})
    on conflict (table_id, member_id) do update set
      is_favorite = ${mark.is_favorite === undefined ? db`table_member_marks.is_favorite` : mark.is_favorite},
      last_viewed_at = ${mark.viewed ? db`now()` : db`table_member_marks.last_viewed_at`}`;
}

export async function updateTable(
  sql: Sql,
  caller: Caller,
  id: string,
  patch: TableUpdate,
): Promise<Table | undefined> {
  return sql.begin(async (tx) => {
    const [current] = await tx<{ id: string }[]>`
      select id from tables where workspace_id = ${caller.workspaceId} and id = ${id} and deleted_at is null for update`;
    if (!current) return undefined;
    if (patch.folder_id) await requireFolder(tx, caller.workspaceId, patch.folder_id);
    let ownerId: string | undefined;
    if (patch.owner_user_id !== undefined) {
      const [owner] = await tx<{ id: string }[]>`
        select id from members where workspace_id = ${caller.workspaceId} and idp_user_id = ${patch.owner_user_id}`;
      if (!owner) throw notFound('Member');
      ownerId = owner.id;
    }
    if (patch.is_favorite !== undefined) await setMark(tx, caller, id, { is_favorite: patch.is_favorite });
    const moved = patch.folder_id !== undefined;
    await tx`
      update tables set
        name = ${patch.name ?? tx`name`},
        description = ${patch.description === undefined ? tx`description` : patch.description},
        auto_run = ${patch.auto_run ?? tx`auto_run`},
        keep_existing_results = ${patch.keep_existing_results ?? tx`keep_existing_results`},
        shared_as_template = ${patch.shared_as_template ?? tx`shared_as_template`},
        archived_at = ${patch.archived === undefined ? tx`archived_at` : patch.archived ? tx`coalesce(archived_at, now())` : null},
        owner_member_id = ${ownerId ?? tx`owner_member_id`},
        folder_id = ${moved ? (patch.folder_id ?? null) : tx`folder_id`},
        needs_filing = ${moved ? false : tx`needs_filing`},
        updated_at = now()
      where id = ${id}`;
    return readTable(tx, caller, id);
  });
}

/** The caller opened the table: its last_viewed_at for them. */
export async function recordTableView(sql: Sql, caller: Caller, id: string): Promise<Table | undefined> {
  return sql.begin(async (tx) => {
    await requireTable(tx, caller.workspaceId, id);
    await setMark(tx, caller, id, { viewed: true });
    return readTable(tx, caller, id);
  });
}

/** Soft delete: the table leaves every list but the trash and reads as 404 until restored. */
export async function deleteTable(db: Db, workspaceId: string, id: string): Promise<boolean> {
  const rows = await db`
    update tables set deleted_at = now(), updated_at = now()
    where workspace_id = ${workspaceId} and id = ${id} and deleted_at is null returning id`;
  return rows.length > 0;
}

export async function restoreTable(sql: Sql, caller: Caller, id: string): Promise<Table | undefined> {
  return sql.begin(async (tx) => {
    const [row] = await tx<{ deleted_at: Date | null }[]>`
      select deleted_at from tables where workspace_id = ${caller.workspaceId} and id = ${id} for update`;
    if (!row) return undefined;
    if (!row.deleted_at) throw new ApiError('conflict', 'The table is not in the trash.');
    await tx`update tables set deleted_at = null, updated_at = now() where id = ${id}`;
    return readTable(tx, caller, id);
  });
}

// ---------------------------------------------------------------------------------------------
// Folders

function toFolder(f: FolderRecord, tree: Map<string, FolderRecord>, tableCount: number): Folder {
  return {
    id: f.id,
    name: f.name,
    parent_id: f.parent_id,
    folder_path: pathOf(tree, f.id),
    table_count: tableCount,
    created_at: f.created_at.toISOString(),
    updated_at: f.updated_at.toISOString(),
  };
}

async function tableCounts(db: Db, workspaceId: string): Promise<Map<string, number>> {
  const rows = await db<{ folder_id: string; n: number }[]>`
    select folder_id, count(*)::int as n from tables
    where workspace_id = ${workspaceId} and folder_id is not null and deleted_at is null group by folder_id`;
  return new Map(rows.map((r) => [r.folder_id, r.n]));
}

/** Every folder, ordered as a tree is read: by path from the top level. */
export async function listFolders(db: Db, workspaceId: string): Promise<Folder[]> {
  const tree = await folderTree(db, workspaceId);
  const counts = await tableCounts(db, workspaceId);
  const folders = [...tree.values()].map((f) => toFolder(f, tree, counts.get(f.id) ?? 0));
  const key = (f: Folder) => f.folder_path.map((p) => p.name.toLowerCase()).join('\u0000');
  return folders.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : a.id < b.id ? -1 : 1));
}

export async function getFolder(db: Db, workspaceId: string, id: string): Promise<Folder | undefined> {
  const tree = await folderTree(db, workspaceId);
  const folder = tree.get(id);
  if (!folder) return undefined;
  const [count] = await db<{ n: number }[]>`
    select count(*)::int as n from tables where workspace_id = ${workspaceId} and folder_id = ${id} and deleted_at is null`;
  return toFolder(folder, tree, count!.n);
}

const folderNameTaken = (name: string) => new ApiError('conflict', `A folder named "${name}" is already there.`);

/** Folder moves take one lock per workspace, so two moves can never make a loop between them. */
const lockFolders = (db: Db, workspaceId: string) =>
  db`select pg_advisory_xact_lock(hashtext('table-folders:' || ${workspaceId}))`;

/** Levels below the folder, itself included (a leaf is 1). */
function heightOf(tree: Map<string, FolderRecord>, id: string): number {
  const children = [...tree.values()].filter((f) => f.parent_id === id);
  return 1 + Math.max(0, ...children.map((c) => heightOf(tree, c.id)));
}

export async function createFolder(
  sql: Sql,
  workspaceId: string,
  input: { name: string; parent_id?: string | null },
): Promise<Folder> {
  try {
    return await sql.begin(async (tx) => {
      await lockFolders(tx, workspaceId);
      const tree = await folderTree(tx, workspaceId);
      if (input.parent_id) {
        if (!tree.has(input.parent_id)) throw notFound('Folder');
        if (pathOf(tree, input.parent_id).length >= folderDepthMax) {
          throw new ApiError('conflict', `Folders nest at most ${folderDepthMax} deep.`);
        }
      }
      const [row] = await tx<{ id: string }[]>`
        insert into table_folders (workspace_id, parent_id, name) values (${workspaceId}, ${input.parent_id ?? null}, ${input.name}) returning id`;
      return (await getFolder(tx, workspaceId, row!.id))!;
    });
  } catch (error) {
    if ((error as { code?: string }).code === '23505') throw folderNameTaken(input.name);
    throw error;
  }
}

export async function updateFolder(
  sql: Sql,
  workspaceId: string,
  id: string,
  patch: { name?: string; parent_id?: string | null },
): Promise<Folder | undefined> {
  try {
    return await sql.begin(async (tx) => {
      await lockFolders(tx, workspaceId);
      const tree = await folderTree(tx, workspaceId);
      const folder = tree.get(id);
      if (!folder) return undefined;
      if (patch.parent_id) {
        if (!tree.has(patch.parent_id)) throw notFound('Folder');
        if (pathOf(tree, patch.parent_id).some((p) => p.id === id)) {
          throw new ApiError('conflict', 'A folder cannot move into itself or a folder inside it.');
        }
        if (pathOf(tree, patch.parent_id).length + heightOf(tree, id) > folderDepthMax) {
          throw new ApiError('conflict', `Folders nest at most ${folderDepthMax} deep.`);
        }
      }
      await tx`
        update table_folders set
          name = ${patch.name ?? folder.name},
          parent_id = ${patch.parent_id === undefined ? folder.parent_id : patch.parent_id},
          updated_at = now()
        where id = ${id}`;
      return getFolder(tx, workspaceId, id);
    });
  } catch (error) {
    if ((error as { code?: string }).code === '23505') throw folderNameTaken(patch.name ?? 'that');
    throw error;
  }
}

/** Only an empty folder goes; tables in the trash that were in it come back at the top level. */
export async function deleteFolder(sql: Sql, workspaceId: string, id: string): Promise<boolean> {
  return sql.begin(async (tx) => {
    await lockFolders(tx, workspaceId);
    const [folder] = await tx`select 1 from table_folders where workspace_id = ${workspaceId} and id = ${id}`;
    if (!folder) return false;
    const [inside] = await tx<{ tables: number; folders: number }[]>`
      select (select count(*)::int from tables where folder_id = ${id} and deleted_at is null) as tables,
             (select count(*)::int from table_folders where parent_id = ${id}) as folders`;
    if (inside!.tables > 0 || inside!.folders > 0) {
      throw new ApiError(
        'conflict',
        `The folder is not empty (${inside!.tables} tables, ${inside!.folders} folders); move them out first.`,
      );
    }
    await tx`update tables set folder_id = null where folder_id = ${id}`;
    await tx`delete from table_folders where id = ${id}`;
    return true;
  });
}
