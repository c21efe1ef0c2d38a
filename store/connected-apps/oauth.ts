/**
 * The SQL of connected AI apps (migration 033): OAuth clients, consent requests, one-time codes,
 * tokens (by SHA-256 hash only) and the connected apps. Every state change is guarded in its own
 * statement (a code or a refresh token is spent by exactly one of two racing requests).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Db } from '../../db/sql.js';
import type { Access, Brand, ConnectedApp } from '../../domain/connected-apps/connected-apps.js';
import type { Plan, Role } from '../../domain/shared/common.js';

export const hashSecret = (secret: string) => createHash('sha256').update(secret).digest();
/** A random secret with a prefix that says what it is (`oat_` access, `ort_` refresh, `oac_` code). */
export const newSecret = (prefix: string) => `${prefix}${randomBytes(32).toString('base64url')}`;

export interface ClientRow {
  id: string;
  client_id: string;
  registration: 'dynamic' | 'metadata_document';
  client_name: string;
  client_uri: string | null;
  logo_uri: string | null;
  redirect_uris: string[];
  grant_types: string[];
  token_endpoint_auth_method: string;
  client_secret_hash: Buffer | null;
  brand: Brand;
  recognised: boolean;
  refresh_after: Date | null;
  created_at: Date;
}

export interface NewClient {
  client_id: string;
  registration: ClientRow['registration'];
  client_name: string;
  client_uri: string | null;
  logo_uri: string | null;
  software_id: string | null;
  software_version: string | null;
  redirect_uris: string[];
  metadata: Record<string, unknown>;
  brand: Brand;
  recognised: boolean;
  refresh_after: Date | null;
}

export async function insertClient(db: Db, c: NewClient): Promise<ClientRow> {
  const [row] = await db<ClientRow[]>`
    insert into oauth_clients (client_id, registration, client_name, client_uri, logo_uri, software_id, software_version,
      redirect_uris, metadata, brand, recognised, fetched_at, refresh_after)
    values (${c.client_id}, ${c.registration}, ${c.client_name}, ${c.client_uri}, ${c.logo_uri}, ${c.software_id}, ${c.software_version},
      ${c.redirect_uris}, ${db.json(c.metadata as never)}, ${c.brand}, ${c.recognised},
      ${c.registration === 'metadata_document' ? new Date() : null}, ${c.refresh_after})
    on conflict (client_id) do update set
      client_name = excluded.client_name, client_uri = excluded.client_uri, logo_uri = excluded.logo_uri,
      software_id = excluded.software_id, software_version = excluded.software_version, redirect_uris = excluded.redirect_uris,
      metadata = excluded.metadata, brand = excluded.brand, recognised = excluded.recognised,
      fetched_at = excluded.fetched_at, refresh_after = excluded.refresh_after, updated_at = now()
    where oauth_clients.registration = 'metadata_document'
    returning *`;
  return row!;
}

export async function findClient(db: Db, clientId: string): Promise<ClientRow | undefined> {
  const [row] = await db<ClientRow[]>`select * from oauth_clients where client_id = ${clientId}`;
  return row;
}

// ---- Consent requests ----

export interface AuthorizationRequestRow {
  id: string;
  client_ref: string;
  redirect_uri: string;
  state: string | null;
  code_challenge: string;
  resource: string;
  scope: string | null;
  status: 'pending' | 'approved' | 'denied';
  decided_by: string | null;
  expires_at: Date;
  expired: boolean;
  client_name: string;
  brand: Brand;
  recognised: boolean;
}

export async function insertAuthorizationRequest(
  db: Db,
  r: {
    clientRef: string;
    redirectUri: string;
    state: string | null;
    codeChallenge: string;
    resource: string;
    scope: string | null;
    seconds: number;
  },
): Promise<string> {
  // Requests nobody approved are of no use a day after they lapse (approved ones hold their code's chain).
  await db`delete from oauth_authorization_requests where status <> 'approved' and expires_at < now() - interval '1 day'`;
  const [row] = await db<{ id: string }[]>`
    insert into oauth_authorization_requests (client_ref, redirect_uri, state, code_challenge, code_challenge_method, resource, scope, expires_at)
    values (${r.clientRef}, ${r.redirectUri}, ${r.state}, ${r.codeChallenge}, 'S256', ${r.resource}, ${r.scope}, now() + ${r.seconds}::int * interval '1 second')
    returning id`;
  return row!.id;
}

export async function findAuthorizationRequest(db: Db, id: string): Promise<AuthorizationRequestRow | undefined> {
  const [row] = await db<AuthorizationRequestRow[]>`
    select r.id, r.client_ref, r.redirect_uri, r.state, r.code_challenge, r.resource, r.scope, r.status, r.decided_by, r.expires_at,
           r.expires_at <= now() as expired, c.client_name, c.brand, c.recognised
    from oauth_authorization_requests r join oauth_clients c on c.id = r.client_ref
    where r.id = ${id}`;
  return row;
}

/** Decides a pending, unexpired request; false when another decision came first or it lapsed. */
export async function decideAuthorizationRequest(
  db: Db,
  id: string,
  status: 'approved' | 'denied',
  memberId: string,
  appId: string | null,
): Promise<boolean> {
  const rows = await db`
    update oauth_authorization_requests set status = ${status}, decided_by = ${memberId}, decided_at = now(), app_id = ${appId}
    where id = ${id} and status = 'pending' and expires_at > now() returning id`;
  return rows.length === 1;
}

// ---- The person and their workspaces ----

export interface Membership {
  member_id: string;
  workspace_id: string;
  name: string;
  plan: Plan;
}

/** Every workspace the person behind this member belongs to (the same identity-provider user), by name. */
export async function membershipsOf(db: Db, memberId: string): Promise<Membership[]> {
  return db<Membership[]>`
    select m.id as member_id, w.id as workspace_id, w.name, w.plan
    from members me
    join members m on m.idp_user_id = me.idp_user_id
    join workspaces w on w.id = m.workspace_id
    where me.id = ${memberId}
    order by w.name, w.id`;
}

// ---- Apps, codes and tokens ----

export async function insertApp(
  db: Db,
  a: {
    workspaceId: string;
    memberId: string;
    clientRef: string;
    appName: string;
    brand: Brand;
    recognised: boolean;
    redirectHost: string;
    isLocal: boolean;
    access: Access;
  },
): Promise<string> {
  const [row] = await db<{ id: string }[]>`
    insert into connected_apps (workspace_id, member_id, client_ref, app_name, brand, recognised, redirect_host, is_local, access)
    values (${a.workspaceId}, ${a.memberId}, ${a.clientRef}, ${a.appName}, ${a.brand}, ${a.recognised}, ${a.redirectHost}, ${a.isLocal}, ${a.access})
    returning id`;
  return row!.id;
}

export async function insertCode(
  db: Db,
  c: {
    codeHash: Buffer;
    requestId: string;
    appId: string;
    clientRef: string;
    redirectUri: string;
    codeChallenge: string;
    resource: string;
    seconds: number;
  },
): Promise<void> {
  await db`
    insert into oauth_authorization_codes (code_hash, request_id, app_id, client_ref, redirect_uri, code_challenge, resource, expires_at)
    values (${c.codeHash}, ${c.requestId}, ${c.appId}, ${c.clientRef}, ${c.redirectUri}, ${c.codeChallenge}, ${c.resource}, now() + ${c.seconds}::int * interval '1 second')`;
}

export interface CodeRow {
  code_hash: Buffer;
  app_id: string;
  client_ref: string;
  redirect_uri: string;
  code_challenge: string;
  resource: string;
  expired: boolean;
  access: Access;
  app_revoked: boolean;
}

/**
 * Spends a code: exactly one caller gets it back (`spent`). A code shown again answers `reused`
 * (the caller revokes what the first use issued); an unknown code answers nothing.
 */
export async function spendCode(
  db: Db,
  codeHash: Buffer,
): Promise<{ spent: CodeRow } | { reused: CodeRow } | undefined> {
  const [spent] = await db<CodeRow[]>`
    update oauth_authorization_codes c set used_at = now()
    from connected_apps a
    where c.code_hash = ${codeHash} and c.used_at is null and a.id = c.app_id
    returning c.code_hash, c.app_id, c.client_ref, c.redirect_uri, c.code_challenge, c.resource, c.expires_at <= now() as expired,
              a.access, a.revoked_at is not null as app_revoked`;
  if (spent) return { spent };
  const [reused] = await db<CodeRow[]>`
    select c.code_hash, c.app_id, c.client_ref, c.redirect_uri, c.code_challenge, c.resource, c.expires_at <= now() as expired,
           a.access, a.revoked_at is not null as app_revoked
    from oauth_authorization_codes c join connected_apps a on a.id = c.app_id
    where c.code_hash = ${codeHash}`;
  return reused ? { reused } : undefined;
}

export interface IssuedTokens {
  accessToken: string;
  refreshToken: string;
}

/** A new access and refresh token of one chain (the code's), the refresh one rotated from `parentHash`. */
export async function issueTokens(
  db: Db,
  t: {
    appId: string;
    clientRef: string;
    codeHash: Buffer;
    parentHash: Buffer | null;
    audience: string;
    scope: string;
    accessSeconds: number;
    refreshSeconds: number;
  },
): Promise<IssuedTokens> {
  const accessToken = newSecret('oat_');
  const refreshToken = newSecret('ort_');
  // The app's access tokens that lapsed an hour ago are gone for good (refresh tokens stay until they lapse: a replay must still be seen).
  await db`delete from oauth_tokens where app_id = ${t.appId} and kind = 'access' and expires_at < now() - interval '1 hour'`;
  await db`
    insert into oauth_tokens (token_hash, kind, app_id, client_ref, code_hash, parent_hash, audience, scope, expires_at)
    values
      (${hashSecret(accessToken)}, 'access', ${t.appId}, ${t.clientRef}, ${t.codeHash}, ${t.parentHash}, ${t.audience}, ${t.scope},
       now() + ${t.accessSeconds}::int * interval '1 second'),
      (${hashSecret(refreshToken)}, 'refresh', ${t.appId}, ${t.clientRef}, ${t.codeHash}, ${t.parentHash}, ${t.audience}, ${t.scope},
       now() + ${t.refreshSeconds}::int * interval '1 second')`;
  return { accessToken, refreshToken };
}

/** Revokes every live token of a chain (a code reused, a refresh token replayed, a refresh token revoked). */
export async function revokeChain(db: Db, codeHash: Buffer, reason: string): Promise<number> {
  const rows = await db`
    update oauth_tokens set revoked_at = now(), revoked_reason = ${reason}
    where code_hash = ${codeHash} and revoked_at is null returning token_hash`;
  return rows.length;
}

export interface RefreshRow {
  token_hash: Buffer;
  app_id: string;
  client_ref: string;
  code_hash: Buffer;
  audience: string;
  access: Access;
  plan: Plan;
}

/**
 * Spends a live refresh token of this client: exactly one caller gets it. A spent one shown again
 * answers `replayed` with its chain (the caller revokes it); anything else answers nothing.
 */
export async function spendRefreshToken(
  db: Db,
  tokenHash: Buffer,
  clientRef: string,
): Promise<{ spent: RefreshRow } | { replayed: Buffer } | undefined> {
  const [spent] = await db<RefreshRow[]>`
    update oauth_tokens t set used_at = now()
    from connected_apps a join workspaces w on w.id = a.workspace_id join members m on m.id = a.member_id and m.workspace_id = a.workspace_id
    where t.token_hash = ${tokenHash} and t.kind = 'refresh' and t.client_ref = ${clientRef} and t.used_at is null
      and t.revoked_at is null and t.expires_at > now() and a.id = t.app_id and a.revoked_at is null
    returning t.token_hash, t.app_id, t.client_ref, t.code_hash, t.audience, a.access, w.plan`;
  if (spent) return { spent };
  const [replayed] = await db<{ code_hash: Buffer }[]>`
    select code_hash from oauth_tokens where token_hash = ${tokenHash} and kind = 'refresh' and client_ref = ${clientRef} and used_at is not null`;
  return replayed ? { replayed: replayed.code_hash } : undefined;
}

/** RFC 7009: revokes a token of this client (a refresh token takes its chain with it); unknown tokens are fine. */
export async function revokeClientToken(db: Db, tokenHash: Buffer, clientRef: string): Promise<void> {
  const [row] = await db<{ kind: string; code_hash: Buffer }[]>`
    update oauth_tokens set revoked_at = coalesce(revoked_at, now()), revoked_reason = coalesce(revoked_reason, 'revoked by the app')
    where token_hash = ${tokenHash} and client_ref = ${clientRef} returning kind, code_hash`;
  if (row?.kind === 'refresh') await revokeChain(db, row.code_hash, 'revoked by the app');
}

export interface AccessTokenRow {
  app_id: string;
  workspace_id: string;
  member_id: string;
  /** The approving member's role now: the app calls as they may (domain/connected-apps appOperations). */
  member_role: Role;
  audience: string;
  access: Access;
  plan: Plan;
  app_name: string;
  last_used_at: Date | null;
}

/**
 * The app behind a live access token, read on every call: the token (not expired, not revoked),
 * the app (not revoked), the workspace's plan as it is now, and the member still in the workspace.
 */
export async function findLiveAccessToken(db: Db, tokenHash: Buffer): Promise<AccessTokenRow | undefined> {
  const [row] = await db<AccessTokenRow[]>`
    select a.id as app_id, a.workspace_id, a.member_id, m.role as member_role, t.audience, a.access, w.plan, a.app_name, a.last_used_at
    from oauth_tokens t
    join connected_apps a on a.id = t.app_id and a.revoked_at is null
    join workspaces w on w.id = a.workspace_id
    join members m on m.id = a.member_id and m.workspace_id = a.workspace_id
    where t.token_hash = ${tokenHash} and t.kind = 'access' and t.revoked_at is null and t.expires_at > now()`;
  return row;
}

/** Records use to the minute; the guard makes concurrent writers and repeats harmless. */
export async function touchAppLastUsed(db: Db, appId: string): Promise<void> {
  await db`
    update connected_apps set last_used_at = date_trunc('minute', now())
    where id = ${appId} and (last_used_at is null or last_used_at < date_trunc('minute', now()))`;
}

interface AppRow {
  id: string;
  app_name: string;
  brand: Brand;
  redirect_host: string;
  access: Access;
  member_id: string;
  idp_user_id: string;
  display_name: string;
  email: string;
  last_used_at: Date | null;
  created_at: Date;
}

const toApp = (r: AppRow): ConnectedApp => ({
  id: r.id,
  app_name: r.app_name,
  brand: r.brand,
  redirect_host: r.redirect_host,
  access: r.access,
  user_id: r.idp_user_id,
  person_name: r.display_name.trim() || r.email,
  person_email: r.email,
  last_used_at: r.last_used_at?.toISOString() ?? null,
  created_at: r.created_at.toISOString(),
});

/** The workspace's live apps, newest first. */
export async function listApps(db: Db, workspaceId: string): Promise<ConnectedApp[]> {
  const rows = await db<AppRow[]>`
    select a.id, a.app_name, a.brand, a.redirect_host, a.access, a.member_id, m.idp_user_id, m.display_name, m.email, a.last_used_at, a.created_at
    from connected_apps a join members m on m.id = a.member_id
    where a.workspace_id = ${workspaceId} and a.revoked_at is null
    order by a.created_at desc, a.id desc`;
  return rows.map(toApp);
}

export async function findApp(
  db: Db,
  workspaceId: string,
  id: string,
): Promise<(ConnectedApp & { member_id: string }) | undefined> {
  const [row] = await db<AppRow[]>`
    select a.id, a.app_name, a.brand, a.redirect_host, a.access, a.member_id, m.idp_user_id, m.display_name, m.email, a.last_used_at, a.created_at
    from connected_apps a join members m on m.id = a.member_id
    where a.id = ${id} and a.workspace_id = ${workspaceId} and a.revoked_at is null`;
  return row && { ...toApp(row), member_id: row.member_id };
}

/** Revokes an app and every token it holds, in one statement each of one transaction. */
export async function revokeApp(db: Db, workspaceId: string, id: string, by: string | null): Promise<boolean> {
  const rows = await db`
    update connected_apps set revoked_at = now(), revoked_by = ${by}
    where id = ${id} and workspace_id = ${workspaceId} and revoked_at is null returning id`;
  if (rows.length === 0) return false;
  await db`update oauth_tokens set revoked_at = now(), revoked_reason = 'app revoked' where app_id = ${id} and revoked_at is null`;
  return true;
}
