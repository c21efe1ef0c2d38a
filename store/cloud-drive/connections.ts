/**
 * The cloud-drive connection of a workspace and its pending authorizations. Tokens and PKCE
 * verifiers arrive here already sealed (integrations/secrets/sealed.ts); nothing here sees one.
 */
import type { Db } from '../../db/sql.js';

export interface CloudDriveConnectionRow {
  workspace_id: string;
  account_email: string | null;
  scopes: string[];
  access_token_sealed: string;
  refresh_token_sealed: string | null;
  expires_at: Date | null;
  connected_by: string | null;
  connected_at: Date;
  status: 'connected' | 'reconnect_required';
  last_error: string | null;
}

export async function readCloudDriveConnection(
  db: Db,
  workspaceId: string,
): Promise<CloudDriveConnectionRow | undefined> {
  const [row] = await db<CloudDriveConnectionRow[]>`
    select workspace_id, account_email, scopes, access_token_sealed, refresh_token_sealed, expires_at, connected_by, connected_at, status, last_error
    from cloud_drive_connections where workspace_id = ${workspaceId}`;
  return row;
}

/** Connects (or reconnects) the workspace's drive: a new connection replaces the old one whole. */
export async function saveCloudDriveConnection(
  db: Db,
  c: {
    workspaceId: string;
    accountEmail: string | null;
    scopes: string[];
    accessSealed: string;
    refreshSealed: string | null;
    expiresAt: Date | null;
    connectedBy: string | null;
  },
): Promise<CloudDriveConnectionRow> {
  const [row] = await db<CloudDriveConnectionRow[]>`
    insert into cloud_drive_connections (workspace_id, account_email, scopes, access_token_sealed, refresh_token_sealed, expires_at, connected_by, connected_at)
    values (${c.workspaceId}, ${c.accountEmail}, ${c.scopes}, ${c.accessSealed}, ${c.refreshSealed}, ${c.expiresAt}, ${c.connectedBy}, date_trunc('milliseconds', now()))
    on conflict (workspace_id) do update set
      account_email = excluded.account_email, scopes = excluded.scopes,
      access_token_sealed = excluded.access_token_sealed, refresh_token_sealed = excluded.refresh_token_sealed,
      expires_at = excluded.expires_at, connected_by = excluded.connected_by, connected_at = excluded.connected_at,
      status = 'connected', last_error = null, updated_at = now()
    returning workspace_id, account_email, scopes, access_token_sealed, refresh_token_sealed, expires_at, connected_by, connected_at, status, last_error`;
  return row!;
}

/**
 * Stores refreshed tokens, only on the connection they were refreshed for (`connectedAt`, kept to
 * the millisecond so the Date read back matches it exactly): a
 * refresh that finishes after a disconnect or a reconnect changes nothing. A refresh that did not
 * rotate the refresh token keeps the stored one.
 */
export async function storeRefreshedTokens(
  db: Db,
  r: {
    workspaceId: string;
    connectedAt: Date;
    accessSealed: string;
    refreshSealed: string | null;
    expiresAt: Date | null;
    scopes: string[];
  },
): Promise<boolean> {
  const rows = await db`
    update cloud_drive_connections set access_token_sealed = ${r.accessSealed},
      refresh_token_sealed = coalesce(${r.refreshSealed}, refresh_token_sealed), expires_at = ${r.expiresAt},
      scopes = ${r.scopes}, status = 'connected', last_error = null, updated_at = now()
    where workspace_id = ${r.workspaceId} and connected_at = ${r.connectedAt}`;
  return rows.count > 0;
}

/**
 * The grant is gone (revoked, expired, or its tokens no longer open): only connecting again helps.
 * With `refreshSealed`, only while that refresh token is still the stored one (a refresh that
 * failed after another process rotated it says nothing about the new one).
 */
export async function markCloudDriveReconnectRequired(
  db: Db,
  workspaceId: string,
  connectedAt: Date,
  lastError: string,
  refreshSealed?: string | null,
): Promise<void> {
  await db`
    update cloud_drive_connections set status = 'reconnect_required', last_error = ${lastError}, updated_at = now()
    where workspace_id = ${workspaceId} and connected_at = ${connectedAt}
      and (${refreshSealed ?? null}::text is null or refresh_token_sealed = ${refreshSealed ?? null})`;
}

export async function deleteCloudDriveConnection(db: Db, workspaceId: string): Promise<boolean> {
  const rows = await db`delete from cloud_drive_connections where workspace_id = ${workspaceId}`;
  await db`delete from cloud_drive_authorizations where workspace_id = ${workspaceId}`;
  return rows.count > 0;
}

/** A pending authorization; expired ones (of every workspace) are cleared on the way. */
export async function createCloudDriveAuthorization(
  db: Db,
  a: { stateHash: Buffer; workspaceId: string; memberId: string | null; verifierSealed: string; expiresAt: Date },
): Promise<void> {
  await db`delete from cloud_drive_authorizations where expires_at < now()`;
  await db`
    insert into cloud_drive_authorizations (state_hash, workspace_id, member_id, code_verifier_sealed, expires_at)
    values (${a.stateHash}, ${a.workspaceId}, ${a.memberId}, ${a.verifierSealed}, ${a.expiresAt})`;
}

/** Takes a pending authorization by its state's hash, once: a second callback with the same state finds nothing. */
export async function takeCloudDriveAuthorization(
  db: Db,
  stateHash: Buffer,
): Promise<
  { workspace_id: string; member_id: string | null; code_verifier_sealed: string; live: boolean } | undefined
> {
  const [row] = await db<
    { workspace_id: string; member_id: string | null; code_verifier_sealed: string; live: boolean }[]
  >`
    delete from cloud_drive_authorizations where state_hash = ${stateHash}
    returning workspace_id, member_id, code_verifier_sealed, expires_at > now() as live`;
  return row;
}
