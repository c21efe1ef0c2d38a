/**
 * The OAuth 2.1 authorization server of connected AI apps (decision 040), shared by the OAuth
 * endpoints, the consent routes and the MCP endpoint: client registration (RFC 7591) and client
 * metadata documents, the authorization request and its consent, the token endpoint (authorization
 * code with PKCE S256, rotating refresh tokens), revocation (RFC 7009), and the check of an access
 * token on every MCP call.
 */
import type { Sql } from '../../db/sql.js';
import {
  accessTokenSeconds,
  authorizationCodeSeconds,
  authorizationRequestSeconds,
  checkRedirectUri,
  ClientRegistrationSchema,
  codeChallengePattern,
  effectiveAccess,
  isClientMetadataUrl,
  pkceMatches,
  recognise,
  redirectHost,
  redirectMatches,
  refreshTokenSeconds,
  scopeOf,
  scopesSupported,
  type Access,
  type ConsentRequest,
  type KnownApps,
} from '../../domain/connected-apps/connected-apps.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import type { ClientMetadataReader } from '../../integrations/connected-apps/client-metadata.js';
import {
  decideAuthorizationRequest,
  findAuthorizationRequest,
  findClient,
  findLiveAccessToken,
  hashSecret,
  insertApp,
  insertAuthorizationRequest,
  insertClient,
  insertCode,
  issueTokens,
  membershipsOf,
  newSecret,
  revokeChain,
  revokeClientToken,
  spendCode,
  spendRefreshToken,
  type AccessTokenRow,
  type ClientRow,
} from '../../store/connected-apps/oauth.js';

export interface OAuthDeps {
  sql: Sql;
  known: KnownApps;
  clientMetadata: ClientMetadataReader;
}

/** Where this service is reached: the issuer, the MCP resource and the addresses built from them. */
export interface Endpoints {
  /** The issuer and the base of every address, without a trailing slash. */
  base: string;
}

export const mcpPath = '/mcp';
export const resourceOf = (e: Endpoints) => `${e.base}${mcpPath}`;
export const resourceMetadataUrl = (e: Endpoints) => `${e.base}/.well-known/oauth-protected-resource${mcpPath}`;

/** An OAuth error answer (RFC 6749 5.2): `error`, `error_description`, and its status. */
export class OAuthError extends Error {
  override name = 'OAuthError';
  constructor(
    readonly error: string,
    readonly description: string,
    readonly status = 400,
  ) {
    super(description);
  }
  body() {
    return { error: this.error, error_description: this.description };
  }
}

// ---- Metadata ----

/** RFC 9728: the MCP endpoint's protected resource metadata. */
export function protectedResourceMetadata(e: Endpoints) {
  return {
    resource: resourceOf(e),
    authorization_servers: [e.base],
    scopes_supported: [...scopesSupported],
    bearer_methods_supported: ['header'],
    resource_name: 'Outreach workspace (MCP)',
  };
}

/** RFC 8414: the authorization server's metadata. */
export function authorizationServerMetadata(e: Endpoints) {
  return {
    issuer: e.base,
    authorization_endpoint: `${e.base}/oauth/authorize`,
    token_endpoint: `${e.base}/oauth/token`,
    registration_endpoint: `${e.base}/oauth/register`,
    revocation_endpoint: `${e.base}/oauth/revoke`,
    scopes_supported: [...scopesSupported],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    token_endpoint_auth_methods_supported: ['none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    code_challenge_methods_supported: ['S256'],
    client_id_metadata_document_supported: true,
    authorization_response_iss_parameter_supported: true,
  };
}

// ---- Clients ----

function clientFields(raw: unknown, label: string) {
  const parsed = ClientRegistrationSchema.safeParse(raw);
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    throw new OAuthError('invalid_client_metadata', `${label}: ${first.path.join('.') || 'body'}: ${first.message}`);
  }
  const m = parsed.data;
  for (const uri of m.redirect_uris) {
    const checked = checkRedirectUri(uri);
    if (!checked.ok) throw new OAuthError('invalid_redirect_uri', `${label}: ${checked.reason}.`);
  }
  if (m.grant_types && m.grant_types.some((g) => g !== 'authorization_code' && g !== 'refresh_token')) {
    throw new OAuthError(
      'invalid_client_metadata',
      `${label}: only the authorization_code and refresh_token grants are offered.`,
    );
  }
  if (m.response_types && m.response_types.some((t) => t !== 'code'))
    throw new OAuthError('invalid_client_metadata', `${label}: only the code response type is offered.`);
  return m;
}

/**
 * RFC 7591 registration: a public client (PKCE, no secret) whatever authentication method it asked
 * for, as the answer says. The name is the app's own claim: such a client is never recognised.
 */
export async function registerClient(deps: OAuthDeps, raw: unknown) {
  const m = clientFields(raw, 'Client metadata');
  const clientId = `mcp_${newSecret('').slice(0, 32)}`;
  const { brand, recognised } = recognise(deps.known, {
    registration: 'dynamic',
    client_id: clientId,
    redirect_uris: m.redirect_uris,
  });
  const row = await insertClient(deps.sql, {
    client_id: clientId,
    registration: 'dynamic',
    client_name: m.client_name?.trim() || redirectHost(m.redirect_uris[0]!),
    client_uri: m.client_uri ?? null,
    logo_uri: m.logo_uri ?? null,
    software_id: m.software_id ?? null,
    software_version: m.software_version ?? null,
    redirect_uris: m.redirect_uris,
    metadata: m,
    brand,
    recognised,
    refresh_after: null,
  });
  return {
    client_id: row.client_id,
    client_id_issued_at: Math.floor(row.created_at.getTime() / 1000),
    client_name: row.client_name,
    redirect_uris: row.redirect_uris,
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
    ...(m.scope ? { scope: m.scope } : {}),
    ...(row.client_uri ? { client_uri: row.client_uri } : {}),
    ...(row.logo_uri ? { logo_uri: row.logo_uri } : {}),
  };
}

/** How long a metadata document is trusted without reading it again (its max-age, within bounds). */
const metadataSeconds = (maxAge: number | null) => Math.min(Math.max(maxAge ?? 3600, 60), 86_400);

/**
 * The client a `client_id` names: a registered one, or the metadata document at that address (read
 * again once its cache time passes). Unknown or unreadable: invalid_client.
 */
export async function resolveClient(deps: OAuthDeps, clientId: string | undefined): Promise<ClientRow> {
  if (!clientId || clientId.length > 2048)
    throw new OAuthError('invalid_client', 'client_id is missing or unknown.', 401);
  const known = await findClient(deps.sql, clientId);
  if (!isClientMetadataUrl(clientId, deps.clientMetadata.allowHttp)) {
    if (!known) throw new OAuthError('invalid_client', 'client_id is missing or unknown.', 401);
    return known;
  }
  if (known && known.refresh_after && known.refresh_after > new Date()) return known;
  const read = await deps.clientMetadata.read(clientId);
  if ('error' in read) {
    if (known) return known;
    throw new OAuthError('invalid_client', `The client metadata document could not be read: ${read.error}.`, 401);
  }
  if (read.document.client_id !== clientId)
    throw new OAuthError(
      'invalid_client',
      'The client metadata document names another client_id than its own address.',
      401,
    );
  const m = clientFields(read.document, 'Client metadata document');
  const { brand, recognised } = recognise(deps.known, {
    registration: 'metadata_document',
    client_id: clientId,
    redirect_uris: m.redirect_uris,
  });
  return insertClient(deps.sql, {
    client_id: clientId,
    registration: 'metadata_document',
    client_name: m.client_name?.trim() || new URL(clientId).host,
    client_uri: m.client_uri ?? null,
    logo_uri: m.logo_uri ?? null,
    software_id: m.software_id ?? null,
    software_version: m.software_version ?? null,
    redirect_uris: m.redirect_uris,
    metadata: read.document,
    brand,
    recognised,
    refresh_after: new Date(Date.now() + metadataSeconds(read.maxAgeSeconds) * 1000),
  });
}

// ---- The authorization request ----

export type AuthorizeQuery = Partial<
  Record<
    | 'response_type'
    | 'client_id'
    | 'redirect_uri'
    | 'state'
    | 'scope'
    | 'code_challenge'
    | 'code_challenge_method'
    | 'resource',
    string
  >
>;

/** Where the browser goes next: the consent page, or back to the client with an error. */
export type AuthorizeOutcome = { consentId: string } | { redirect: string };

/** The client's redirect with these parameters added (and the issuer, RFC 9207). */
export function redirectWith(
  redirectUri: string,
  params: Record<string, string | null | undefined>,
  e: Endpoints,
): string {
  const url = new URL(redirectUri);
  for (const [key, value] of Object.entries({ ...params, iss: e.base }))
    if (value !== undefined && value !== null) url.searchParams.set(key, value);
  return url.href;
}

/**
 * Checks an authorization request. A request with no usable client or redirect is answered here
 * (an OAuthError: the browser must not be sent to an address nobody vouched for); every other
 * refusal goes back to the client's redirect, as RFC 6749 4.1.2.1 says.
 */
export async function startAuthorization(deps: OAuthDeps, q: AuthorizeQuery, e: Endpoints): Promise<AuthorizeOutcome> {
  const client = await resolveClient(deps, q.client_id);
  const redirectUri = q.redirect_uri ?? (client.redirect_uris.length === 1 ? client.redirect_uris[0] : undefined);
  if (!redirectUri)
    throw new OAuthError('invalid_request', 'redirect_uri is required: this client registered more than one.');
  if (!redirectMatches(client.redirect_uris, redirectUri))
    throw new OAuthError('invalid_request', 'redirect_uri is not one this client registered.');
  const refuse = (error: string, description: string): AuthorizeOutcome => ({
    redirect: redirectWith(redirectUri, { error, error_description: description, state: q.state }, e),
  });
  if (q.response_type !== 'code') return refuse('unsupported_response_type', 'Only response_type=code is offered.');
  if (!q.code_challenge) return refuse('invalid_request', 'code_challenge is required (PKCE with S256).');
  if (q.code_challenge_method !== 'S256')
    return refuse('invalid_request', 'code_challenge_method must be S256; plain is not accepted.');
  if (!codeChallengePattern.test(q.code_challenge))
    return refuse('invalid_request', 'code_challenge is not an S256 challenge (43 base64url characters).');
  if (!q.resource) return refuse('invalid_target', `resource is required (RFC 8707): ${resourceOf(e)}.`);
  if (q.resource !== resourceOf(e))
    return refuse('invalid_target', `This server issues tokens only for ${resourceOf(e)}.`);
  const scopes = (q.scope ?? '').split(' ').filter(Boolean);
  if (scopes.some((s) => !(scopesSupported as readonly string[]).includes(s)))
    return refuse('invalid_scope', `Scopes offered: ${scopesSupported.join(', ')}.`);
  if ((q.state?.length ?? 0) > 2048) return refuse('invalid_request', 'state is longer than 2048 characters.');
  const consentId = await insertAuthorizationRequest(deps.sql, {
    clientRef: client.id,
    redirectUri,
    state: q.state ?? null,
    codeChallenge: q.code_challenge,
    resource: q.resource,
    scope: q.scope ?? null,
    seconds: authorizationRequestSeconds,
  });
  return { consentId };
}

const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A consent request as this member may see it: unknown, or decided by someone else, is not found
 * (a decided request tells nobody else anything); decided by them or expired is a conflict.
 */
async function visibleRequest(sql: Sql, id: string, memberId: string | null) {
  const request = uuidPattern.test(id) ? await findAuthorizationRequest(sql, id) : undefined;
  if (!request || (request.status !== 'pending' && request.decided_by !== memberId)) throw notFound('Consent request');
  return request;
}

/** Refuses (404) a consent request this member may not see, before anything else is judged. */
export async function checkConsentVisible(sql: Sql, id: string, memberId: string | null): Promise<void> {
  await visibleRequest(sql, id, memberId);
}

async function pendingRequest(sql: Sql, id: string, memberId: string | null = null) {
  const request = await visibleRequest(sql, id, memberId);
  if (request.status !== 'pending')
    throw new ApiError('conflict', `This consent request was already ${request.status}.`);
  if (request.expired)
    throw new ApiError('conflict', 'This consent request has expired; start connecting again from the app.');
  return request;
}

/** What the consent page shows, before sign-in (the app) and after (the person's workspaces). */
export async function consentApp(sql: Sql, id: string, memberId: string | null = null) {
  const request = await pendingRequest(sql, id, memberId);
  const checked = checkRedirectUri(request.redirect_uri);
  return {
    app_name: request.client_name,
    brand: request.brand,
    recognised: request.recognised,
    is_local: checked.ok && checked.isLocal,
    redirect_host: redirectHost(request.redirect_uri),
  };
}

export async function readConsentRequest(sql: Sql, id: string, memberId: string): Promise<ConsentRequest> {
  const app = await consentApp(sql, id, memberId);
  const memberships = await membershipsOf(sql, memberId);
  return {
    ...app,
    workspaces: memberships.map((m) => ({ workspace_id: m.workspace_id, name: m.name, can_write: m.plan === 'paid' })),
  };
}

/** Approve: the connected app and its one-time code, and the client's redirect with that code. */
export async function approveConsent(
  sql: Sql,
  id: string,
  memberId: string,
  choice: { workspace_id: string; access: Access },
  e: Endpoints,
): Promise<{ redirect_url: string }> {
  const request = await pendingRequest(sql, id, memberId);
  const membership = (await membershipsOf(sql, memberId)).find((m) => m.workspace_id === choice.workspace_id);
  if (!membership) throw notFound('Workspace');
  const checked = checkRedirectUri(request.redirect_uri);
  const code = newSecret('oac_');
  // All or nothing: a decision that lost a race rolls its app back.
  await sql.begin(async (tx) => {
    const appId = await insertApp(tx, {
      workspaceId: membership.workspace_id,
      memberId: membership.member_id,
      clientRef: request.client_ref,
      appName: request.client_name,
      brand: request.brand,
      recognised: request.recognised,
      redirectHost: redirectHost(request.redirect_uri),
      isLocal: checked.ok && checked.isLocal,
      access: choice.access,
    });
    if (!(await decideAuthorizationRequest(tx, id, 'approved', memberId, appId)))
      throw new ApiError('conflict', 'This consent request was decided a moment ago.');
    await insertCode(tx, {
      codeHash: hashSecret(code),
      requestId: id,
      appId,
      clientRef: request.client_ref,
      redirectUri: request.redirect_uri,
      codeChallenge: request.code_challenge,
      resource: request.resource,
      seconds: authorizationCodeSeconds,
    });
  });
  return { redirect_url: redirectWith(request.redirect_uri, { code, state: request.state }, e) };
}

export async function denyConsent(
  sql: Sql,
  id: string,
  memberId: string,
  e: Endpoints,
): Promise<{ redirect_url: string }> {
  const request = await pendingRequest(sql, id, memberId);
  if (!(await decideAuthorizationRequest(sql, id, 'denied', memberId, null)))
    throw new ApiError('conflict', 'This consent request was decided a moment ago.');
  return {
    redirect_url: redirectWith(
      request.redirect_uri,
      { error: 'access_denied', error_description: 'The person declined.', state: request.state },
      e,
    ),
  };
}

// ---- The token endpoint ----

export type TokenForm = Partial<
  Record<
    'grant_type' | 'code' | 'redirect_uri' | 'client_id' | 'code_verifier' | 'refresh_token' | 'resource' | 'scope',
    string
  >
>;

function tokenAnswer(tokens: { accessToken: string; refreshToken: string }, scope: string) {
  return {
    access_token: tokens.accessToken,
    token_type: 'Bearer',
    expires_in: accessTokenSeconds,
    refresh_token: tokens.refreshToken,
    scope,
  };
}

export async function exchangeToken(deps: OAuthDeps, form: TokenForm, e: Endpoints) {
  const client = await resolveClient(deps, form.client_id);
  if (form.resource !== undefined && form.resource !== resourceOf(e))
    throw new OAuthError('invalid_target', `This server issues tokens only for ${resourceOf(e)}.`);
  if (form.grant_type === 'authorization_code') {
    if (!form.code || !form.code_verifier)
      throw new OAuthError('invalid_request', 'code and code_verifier are required.');
    const found = await spendCode(deps.sql, hashSecret(form.code));
    if (found && 'reused' in found && found.reused.client_ref === client.id) {
      // RFC 6749 4.1.2 / OAuth 2.1: a code used twice was seen by someone else: what it issued dies.
      await revokeChain(deps.sql, found.reused.code_hash, 'authorization code reused');
      throw new OAuthError('invalid_grant', 'This code was already used; every token it issued is revoked.');
    }
    if (!found || !('spent' in found) || found.spent.client_ref !== client.id)
      throw new OAuthError('invalid_grant', 'The code is unknown, or it was issued to another client.');
    const code = found.spent;
    if (code.expired) throw new OAuthError('invalid_grant', 'The code has expired; codes last one minute.');
    if (code.app_revoked) throw new OAuthError('invalid_grant', 'The app was disconnected.');
    if (form.redirect_uri !== undefined && form.redirect_uri !== code.redirect_uri)
      throw new OAuthError('invalid_grant', 'redirect_uri differs from the authorization request.');
    if (!pkceMatches(form.code_verifier, code.code_challenge))
      throw new OAuthError('invalid_grant', 'code_verifier does not match the code_challenge (PKCE S256).');
    if (code.resource !== resourceOf(e))
      throw new OAuthError('invalid_target', 'The code was issued for another resource.');
    const scope = scopeOf(code.access);
    const tokens = await issueTokens(deps.sql, {
      appId: code.app_id,
      clientRef: client.id,
      codeHash: code.code_hash,
      parentHash: null,
      audience: code.resource,
      scope,
      accessSeconds: accessTokenSeconds,
      refreshSeconds: refreshTokenSeconds,
    });
    return tokenAnswer(tokens, scope);
  }
  if (form.grant_type === 'refresh_token') {
    if (!form.refresh_token) throw new OAuthError('invalid_request', 'refresh_token is required.');
    const hash = hashSecret(form.refresh_token);
    const found = await spendRefreshToken(deps.sql, hash, client.id);
    if (!found) throw new OAuthError('invalid_grant', 'The refresh token is unknown, expired or revoked.');
    if ('replayed' in found) {
      await revokeChain(deps.sql, found.replayed, 'refresh token replayed');
      throw new OAuthError('invalid_grant', 'This refresh token was already used; the whole grant is revoked.');
    }
    const t = found.spent;
    if (t.audience !== resourceOf(e))
      throw new OAuthError('invalid_target', 'The refresh token was issued for another resource.');
    const scope = scopeOf(t.access);
    const tokens = await issueTokens(deps.sql, {
      appId: t.app_id,
      clientRef: client.id,
      codeHash: t.code_hash,
      parentHash: t.token_hash,
      audience: t.audience,
      scope,
      accessSeconds: accessTokenSeconds,
      refreshSeconds: refreshTokenSeconds,
    });
    return tokenAnswer(tokens, scope);
  }
  throw new OAuthError('unsupported_grant_type', 'grant_type must be authorization_code or refresh_token.');
}

/** RFC 7009: always 200 for a known client, whether or not the token was known. */
export async function revokeToken(deps: OAuthDeps, form: { token?: string; client_id?: string }) {
  const client = await resolveClient(deps, form.client_id);
  if (!form.token) throw new OAuthError('invalid_request', 'token is required.');
  await revokeClientToken(deps.sql, hashSecret(form.token), client.id);
}

// ---- Every MCP call ----

export type CallAuthorisation = { ok: true; app: AccessTokenRow; access: Access } | { ok: false; description: string };

/**
 * Authorises one MCP call from its bearer token: a live access token issued for this resource,
 * its app not revoked, its member still in the workspace, and the access the plan allows now.
 */
export async function authoriseCall(sql: Sql, token: string | undefined, e: Endpoints): Promise<CallAuthorisation> {
  if (!token || !/^oat_[A-Za-z0-9_-]{43}$/.test(token))
    return { ok: false, description: 'A bearer access token from this server is required.' };
  const app = await findLiveAccessToken(sql, hashSecret(token));
  if (!app)
    return { ok: false, description: 'The access token is unknown, expired or revoked, or its app was disconnected.' };
  if (app.audience !== resourceOf(e))
    return { ok: false, description: `The access token was issued for ${app.audience}, not ${resourceOf(e)}.` };
  return { ok: true, app, access: effectiveAccess(app.access, app.plan) };
}
