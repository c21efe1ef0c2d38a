/**
 * A local twin of an outside OpenID Connect provider, built on the real `oidc-provider`: the
 * service verifies its access tokens through AUTH_JWKS_URL, AUTH_JWT_ISSUER and AUTH_JWT_AUDIENCE
 * exactly as it would a hosted provider's. Access tokens are JWTs the provider issues for one
 * resource (RFC 8707), carrying the user's org, email and name claims, and they are obtained
 * through the real authorization-code flow with PKCE (sim/oidc-client.ts).
 *
 * The twin implements the provider's interaction endpoints itself: a login form that accepts the
 * user id of a known user, and a consent step that grants what was asked. Its signing keys rotate
 * in place: a new Provider is built over the same state and keys, and the one HTTP server hands
 * requests to whichever is current, so the issuer URL, sessions and grants survive a rotation.
 * Besides the provider's own routes it answers one of its own: `PUT /dev/users/:sub` (a JSON
 * OidcUser), which adds or changes a user at run time.
 *
 * `claimNames` puts the org facts under other claim names (a namespaced `https://example.com/org_id`,
 * as Auth0 rules do), for the service's AUTH_CLAIM_* settings; `signWithCurrentKey` forges the bad
 * tokens a real provider will not issue on demand, for negative tests only.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  SignJWT,
  exportJWK,
  generateKeyPair,
  importJWK,
  type JWK,
  type JWTHeaderParameters,
  type JWTPayload,
} from 'jose';
import Provider, {
  errors,
  type Adapter,
  type AdapterPayload,
  type Configuration,
  type Interaction,
} from 'oidc-provider';
import { z } from 'zod';
import { codeFlowAccessToken, twinClientId, twinRedirectUri } from './oidc-client.js';

export interface OidcUser {
  email: string;
  email_verified?: boolean;
  name?: string;
  /** The user's organisation; a user with none gets no org claims. */
  org_id?: string | null;
  org_name?: string;
  org_role?: string | string[];
}

export interface OidcTwin {
  issuer: string;
  jwksUrl: string;
  audience: string;
  setUser(sub: string, user: OidcUser): void;
  /** An access token for `sub`, through the authorization-code flow over HTTP. */
  accessToken(sub: string, options?: { scope?: string }): Promise<string>;
  /** Signs with a new key from now on; the JWKS keeps publishing the old ones. */
  rotateKeys(): Promise<{ kid: string }>;
  /** Drops every key but the signing one from the JWKS. */
  retireOldKeys(): Promise<void>;
  /**
   * For negative tests only: signs exactly `claims` (no iss, aud, iat or exp are added) with the
   * twin's current private key, RS256 under its kid unless `header` says otherwise. It exists to
   * forge the tokens a well-behaved provider cannot be asked to issue (expired, not yet valid,
   * another issuer or audience, another kid); every genuine token comes from `accessToken`.
   */
  signWithCurrentKey(claims: JWTPayload, header?: Omit<JWTHeaderParameters, 'alg'>): Promise<string>;
  close(): Promise<void>;
}

/** The org facts a token carries, each under its default name unless `claimNames` renames it. */
export type OrgClaim = 'org_id' | 'org_role' | 'org_name';

export interface OidcTwinOptions {
  port?: number;
  audience: string;
  users?: Record<string, OidcUser>;
  /** Other names for the org claims, e.g. `{ org_id: 'https://example.com/org_id' }`; defaults otherwise. */
  claimNames?: Partial<Record<OrgClaim, string>>;
}

/** The scopes the resource server (the service) defines; the service itself checks none. */
const apiScopes = 'api';

export const oidcUserSchema = z.strictObject({
  email: z.string().min(1),
  email_verified: z.boolean().optional(),
  name: z.string().optional(),
  org_id: z.string().nullable().optional(),
  org_name: z.string().optional(),
  org_role: z.union([z.string(), z.array(z.string())]).optional(),
});

/** The resource indicator for an audience: RFC 8707 wants an absolute URI, an audience may not be one. */
export function resourceFor(audience: string): string {
  return URL.canParse(audience) ? audience : `urn:oidc-twin:audience:${encodeURIComponent(audience)}`;
}

/** What survives a key rotation: users, keys, the cookie secret and the provider's stored state. */
interface TwinState {
  issuer: string;
  audience: string;
  resource: string;
  users: Map<string, OidcUser>;
  claimNames: Partial<Record<OrgClaim, string>>;
  /** Private JWKs, the signing key first. */
  keys: JWK[];
  cookieKeys: string[];
  adapter: (name: string) => Adapter;
}

export async function startOidcProvider(options: OidcTwinOptions): Promise<OidcTwin> {
  let current: { provider: Provider; handle: ReturnType<Provider['callback']> } | undefined;
  const server = createServer((req, res) => {
    if (!current) return void res.writeHead(503).end();
    route(current, state, req, res).catch((error: unknown) => fail(res, error));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', resolve);
  });
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const state: TwinState = {
    issuer,
    audience: options.audience,
    resource: resourceFor(options.audience),
    users: new Map(Object.entries(options.users ?? {})),
    claimNames: options.claimNames ?? {},
    keys: [await newSigningKey()],
    cookieKeys: [randomBytes(32).toString('base64url')],
    adapter: memoryAdapter(),
  };
  const remount = () => {
    const provider = buildProvider(state);
    current = { provider, handle: provider.callback() };
  };
  remount();

  return {
    issuer,
    jwksUrl: `${issuer}/jwks`,
    audience: options.audience,
    setUser: (sub, user) => void state.users.set(sub, user),
    accessToken: (sub, tokenOptions = {}) =>
      codeFlowAccessToken({ issuer, sub, resource: state.resource, scope: tokenOptions.scope }),
    rotateKeys: async () => {
      const key = await newSigningKey();
      state.keys = [key, ...state.keys];
      remount();
      return { kid: key.kid! };
    },
    retireOldKeys: async () => {
      state.keys = state.keys.slice(0, 1);
      remount();
    },
    signWithCurrentKey: async (claims, header = {}) => {
      const jwk = state.keys[0]!;
      return new SignJWT(claims)
        .setProtectedHeader({ typ: 'at+jwt', kid: jwk.kid, ...header, alg: 'RS256' })
        .sign(await importJWK(jwk, 'RS256'));
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function newSigningKey(): Promise<JWK> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  return { ...(await exportJWK(privateKey)), kid: randomBytes(8).toString('hex'), alg: 'RS256', use: 'sig' };
}

function buildProvider(state: TwinState): Provider {
  // Fixed per instance: a request still in flight on the previous instance signs with its own key.
  const signingKid = state.keys[0]!.kid!;
  const configuration: Configuration = {
    adapter: state.adapter,
    jwks: { keys: state.keys },
    // Signed cookies with a secret kept across rotations, so a flow begun before one finishes after it.
    // No `secure` flag: oidc-provider marks cookies secure only on https requests, and this twin is plain http on loopback.
    cookies: { keys: state.cookieKeys },
    clients: [
      {
        client_id: twinClientId,
        redirect_uris: [twinRedirectUri],
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code'],
        response_types: ['code'],
      },
    ],
    pkce: { required: () => true },
    ttl: {
      AuthorizationCode: 60,
      Interaction: 60 * 60,
      Session: 24 * 60 * 60,
      Grant: 24 * 60 * 60,
      IdToken: 60 * 60,
      AccessToken: 60 * 60,
    },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    features: {
      // The twin serves its own interaction endpoints (below) instead of the library's dev views.
      devInteractions: { enabled: false },
      resourceIndicators: {
        enabled: true,
        getResourceServerInfo: (_ctx, indicator) => {
          if (indicator !== state.resource) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
          return {
            scope: apiScopes,
            audience: state.audience,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256', kid: signingKid } },
          };
        },
      },
    },
    findAccount: (_ctx, sub) => {
      const user = state.users.get(sub);
      if (!user) return undefined;
      return {
        accountId: sub,
        claims: () => ({ sub, email: user.email, email_verified: user.email_verified, name: user.name }),
      };
    },
    extraTokenClaims: (_ctx, token) => {
      const user = 'accountId' in token && token.accountId ? state.users.get(token.accountId) : undefined;
      return user ? tokenClaims(user, state.claimNames) : undefined;
    },
    renderError: (ctx, out) => {
      ctx.type = 'json';
      ctx.body = out;
    },
  };
  return new Provider(state.issuer, configuration);
}

/** The person and organisation claims an access token carries; no org claims without an org. */
export function tokenClaims(
  user: OidcUser,
  claimNames: Partial<Record<OrgClaim, string>> = {},
): Record<string, unknown> {
  const claims: Record<string, unknown> = { email: user.email, email_verified: user.email_verified, name: user.name };
  if (user.org_id) {
    const org: Record<OrgClaim, unknown> = { org_id: user.org_id, org_name: user.org_name, org_role: user.org_role };
    for (const [name, value] of Object.entries(org)) claims[claimNames[name as OrgClaim] ?? name] = value;
  }
  return Object.fromEntries(Object.entries(claims).filter(([, value]) => value !== undefined));
}

// ---- The twin's own routes, ahead of the provider's ----

async function route(
  mounted: { provider: Provider; handle: (req: IncomingMessage, res: ServerResponse) => unknown },
  state: TwinState,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const { pathname } = new URL(req.url ?? '/', state.issuer);
  const interaction = /^\/interaction\/([\w-]+)(\/login)?$/.exec(pathname);
  const devUser = /^\/dev\/users\/([^/]+)$/.exec(pathname);
  if (interaction && req.method === 'GET' && !interaction[2]) {
    await showInteraction(mounted.provider, req, res);
  } else if (interaction && req.method === 'POST' && interaction[2]) {
    await login(mounted.provider, state, req, res);
  } else if (devUser && req.method === 'PUT') {
    await putUser(state, decodeURIComponent(devUser[1]!), req, res);
  } else {
    await mounted.handle(req, res);
  }
}

/** The login form, or (once someone is signed in) consent given at once for what was asked. */
async function showInteraction(provider: Provider, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const interaction = await provider.interactionDetails(req, res);
  if (interaction.prompt.name === 'login') return sendLoginPage(res, interaction.uid, 200);
  if (interaction.prompt.name === 'consent') return grantConsent(provider, interaction, req, res);
  res.writeHead(400, { 'content-type': 'text/plain' }).end(`Unsupported prompt ${interaction.prompt.name}.`);
}

async function login(provider: Provider, state: TwinState, req: IncomingMessage, res: ServerResponse) {
  const interaction = await provider.interactionDetails(req, res);
  const sub = new URLSearchParams(await readBody(req)).get('sub') ?? '';
  if (interaction.prompt.name !== 'login' || !state.users.has(sub)) {
    return sendLoginPage(res, interaction.uid, 401, `No user "${sub}" at this provider.`);
  }
  await provider.interactionFinished(req, res, { login: { accountId: sub } }, { mergeWithLastSubmission: false });
}

/** Grants the OIDC scopes and claims and the resource scopes the prompt says are missing. */
async function grantConsent(provider: Provider, interaction: Interaction, req: IncomingMessage, res: ServerResponse) {
  const details = interaction.prompt.details as {
    missingOIDCScope?: string[];
    missingOIDCClaims?: string[];
    missingResourceScopes?: Record<string, string[]>;
  };
  const grant =
    (interaction.grantId ? await provider.Grant.find(interaction.grantId) : undefined) ??
    new provider.Grant({ accountId: interaction.session?.accountId, clientId: String(interaction.params.client_id) });
  if (details.missingOIDCScope) grant.addOIDCScope(details.missingOIDCScope);
  if (details.missingOIDCClaims) grant.addOIDCClaims(details.missingOIDCClaims);
  for (const [resource, scopes] of Object.entries(details.missingResourceScopes ?? {})) {
    grant.addResourceScope(resource, scopes);
  }
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

function sendLoginPage(res: ServerResponse, uid: string, status: number, error?: string): void {
  const page = [
    '<!doctype html><title>Sign in to the OIDC twin</title>',
    error ? `<p role="alert">${escapeHtml(error)}</p>` : '',
    `<form method="post" action="/interaction/${escapeHtml(uid)}/login">`,
    '<label>User id <input name="sub" autofocus></label> <button>Sign in</button></form>',
  ].join('\n');
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8' }).end(page);
}

/** The twin's own dev endpoint: adds or replaces a user; answers what a client needs to sign them in. */
async function putUser(state: TwinState, sub: string, req: IncomingMessage, res: ServerResponse) {
  let body: unknown;
  try {
    body = JSON.parse(await readBody(req));
  } catch {
    body = undefined;
  }
  const parsed = oidcUserSchema.safeParse(body);
  if (!parsed.success) {
    return sendJson(res, 400, { error: 'invalid_user', error_description: z.prettifyError(parsed.error) });
  }
  state.users.set(sub, parsed.data);
  sendJson(res, 200, { sub, user: parsed.data, client_id: twinClientId, resource: state.resource });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function fail(res: ServerResponse, error: unknown): void {
  if (res.headersSent) return void res.end();
  const known = error instanceof errors.OIDCProviderError ? error : undefined;
  sendJson(res, known?.statusCode ?? 500, {
    error: known?.error ?? 'server_error',
    error_description: error instanceof Error ? error.message : String(error),
  });
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 64 * 1024) throw new Error('The request body is over 64 KiB.');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

// ---- Storage shared by every Provider instance of one twin ----

interface Entry {
  payload: AdapterPayload;
  expiresAt: number;
}

/** The models whose entries a grant's revocation removes. */
const grantable = new Set([
  'AccessToken',
  'AuthorizationCode',
  'RefreshToken',
  'DeviceCode',
  'BackchannelAuthenticationRequest',
]);

/**
 * An in-memory adapter per twin (oidc-provider's own keeps one store per Provider instance, which a
 * rotation would lose). Entries expire by their TTL and are swept now and then; sessions are found
 * by uid, device codes by user code, and a grant's tokens are revoked together.
 */
function memoryAdapter(): (name: string) => Adapter {
  const entries = new Map<string, Entry>();
  const index = new Map<string, string>();
  const grants = new Map<string, Set<string>>();
  let writes = 0;
  const live = (key: string | undefined) => {
    const entry = key === undefined ? undefined : entries.get(key);
    if (!entry || entry.expiresAt > Date.now()) return entry?.payload;
    entries.delete(key!);
    return undefined;
  };
  const sweep = () => {
    for (const key of entries.keys()) live(key);
    for (const [name, key] of index) if (!entries.has(key)) index.delete(name);
    for (const [grantId, keys] of grants) {
      for (const key of keys) if (!entries.has(key)) keys.delete(key);
      if (!keys.size) grants.delete(grantId);
    }
  };
  return (name) => {
    const keyOf = (id: string) => `${name}:${id}`;
    return {
      upsert: async (id, payload, expiresIn) => {
        if (++writes % 1000 === 0) sweep();
        const key = keyOf(id);
        entries.set(key, { payload, expiresAt: expiresIn ? Date.now() + expiresIn * 1000 : Infinity });
        if (name === 'Session' && payload.uid) index.set(`${name}:uid:${payload.uid}`, key);
        if (payload.userCode) index.set(`${name}:userCode:${payload.userCode}`, key);
        if (grantable.has(name) && payload.grantId) {
          grants.set(payload.grantId, (grants.get(payload.grantId) ?? new Set()).add(key));
        }
      },
      find: async (id) => live(keyOf(id)),
      findByUid: async (uid) => live(index.get(`${name}:uid:${uid}`)),
      findByUserCode: async (userCode) => live(index.get(`${name}:userCode:${userCode}`)),
      consume: async (id) => {
        const payload = live(keyOf(id));
        if (payload) payload.consumed = Math.floor(Date.now() / 1000);
      },
      destroy: async (id) => void entries.delete(keyOf(id)),
      revokeByGrantId: async (grantId) => {
        for (const key of grants.get(grantId) ?? []) entries.delete(key);
        grants.delete(grantId);
      },
    };
  };
}
