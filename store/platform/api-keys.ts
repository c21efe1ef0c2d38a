/** Queries of API keys (interface spec: API keys), shared by the routes, the auth plugin and the admin command line. */
import type { Db } from '../../db/sql.js';
import type { ApiKey, Scope } from '../../domain/platform/api-keys.js';
import type { Plan, Role } from '../../domain/shared/common.js';
import { ApiError } from '../../domain/shared/errors.js';
import { displayedPrefix, generateApiKeySecret, hashApiKey } from '../../domain/platform/api-key-secret.js';

interface ApiKeyRow {
  id: string;
  workspace_id: string;
  name: string;
  scope: Scope;
  key_prefix: string;
  created_at: Date;
  updated_at: Date;
  expire_at: Date | null;
  last_used_at: Date | null;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function toApiKey(row: ApiKeyRow): ApiKey {
  return {
    id: row.id,
    org_id: row.workspace_id,
    name: row.name,
    scope: row.scope,
    key_prefix: row.key_prefix,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    expire_at: iso(row.expire_at),
    last_used_at: iso(row.last_used_at),
  };
}

const duplicateName = (name: string) =>
  new ApiError('conflict', `An API key named "${name}" already exists in this workspace.`);

function isUniqueViolation(error: unknown, constraint: string): boolean {
  const e = error as { code?: string; constraint_name?: string };
  return e.code === '23505' && e.constraint_name === constraint;
}

export async function createApiKey(
  db: Db,
  input: { workspaceId: string; createdBy: string | null; name: string; scope: Scope; expireAt: string | null },
): Promise<ApiKey & { key: string }> {
  const key = generateApiKeySecret();
  try {
    const [row] = await db<ApiKeyRow[]>`
      insert into api_keys (workspace_id, created_by, name, scope, key_prefix, key_hash, expire_at)
      values (${input.workspaceId}, ${input.createdBy}, ${input.name}, ${input.scope},
              ${displayedPrefix(key)}, ${hashApiKey(key)}, ${input.expireAt})
      returning *`;
    return { ...toApiKey(row!), key };
  } catch (error) {
    if (isUniqueViolation(error, 'api_keys_name')) throw duplicateName(input.name);
    throw error;
  }
}

export async function listApiKeys(db: Db, workspaceId: string): Promise<ApiKey[]> {
  const rows = await db<ApiKeyRow[]>`
    select * from api_keys where workspace_id = ${workspaceId} and deleted_at is null
    order by created_at desc, id`;
  return rows.map(toApiKey);
}

export async function countApiKeys(db: Db, workspaceId: string): Promise<number> {
  const [row] = await db<{ count: number }[]>`
    select count(*) as count from api_keys where workspace_id = ${workspaceId} and deleted_at is null`;
  return row!.count;
}

export async function getApiKey(db: Db, workspaceId: string, id: string): Promise<ApiKey | undefined> {
  const [row] = await db<ApiKeyRow[]>`
    select * from api_keys where id = ${id} and workspace_id = ${workspaceId} and deleted_at is null`;
  return row && toApiKey(row);
}

export async function updateApiKey(
  db: Db,
  workspaceId: string,
  id: string,
  patch: { name?: string; expire_at?: string | null },
): Promise<ApiKey | undefined> {
  try {
    const [row] = await db<ApiKeyRow[]>`
      update api_keys set
        name = coalesce(${patch.name ?? null}, name),
        expire_at = case when ${patch.expire_at !== undefined} then ${patch.expire_at ?? null}::timestamptz else expire_at end,
        updated_at = now()
      where id = ${id} and workspace_id = ${workspaceId} and deleted_at is null
      returning *`;
    return row && toApiKey(row);
  } catch (error) {
    if (isUniqueViolation(error, 'api_keys_name')) throw duplicateName(patch.name ?? '');
    throw error;
  }
}

export async function deleteApiKey(db: Db, workspaceId: string, id: string): Promise<boolean> {
  const rows = await db`
    update api_keys set deleted_at = now(), updated_at = now()
    where id = ${id} and workspace_id = ${workspaceId} and deleted_at is null returning id`;
  return rows.length === 1;
}

export interface KeyPrincipalRow {
  id: string;
  workspace_id: string;
  scope: Scope;
  plan: Plan;
  member_id: string | null;
  role: Role | null;
}

/** A live key by its secret's hash: unknown, deleted and expired keys all read as absent. */
export async function findLiveKey(db: Db, secret: string): Promise<KeyPrincipalRow | undefined> {
  const [row] = await db<KeyPrincipalRow[]>`
    select k.id, k.workspace_id, k.scope, w.plan, m.id as member_id, m.role
    from api_keys k
    join workspaces w on w.id = k.workspace_id
    left join members m on m.id = k.created_by
    where k.key_hash = ${hashApiKey(secret)} and k.deleted_at is null
      and (k.expire_at is null or k.expire_at > now())`;
  return row;
}

/** Records use to the minute; the guard makes concurrent writers and repeats harmless. */
export async function touchKeyLastUsed(db: Db, id: string): Promise<void> {
  await db`
    update api_keys set last_used_at = date_trunc('minute', now())
    where id = ${id} and (last_used_at is null or last_used_at < date_trunc('minute', now()))`;
}
