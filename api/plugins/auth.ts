/**
 * Authentication (the interface spec's Authentication section) and authorisation. Every route says
 * what it needs in its config: `access` is `public`, `read` or `write` (default: read for GET/HEAD,
 * write otherwise) and `role` may demand `admin`. Missing or invalid credentials answer 401 with
 * one message, whatever the reason (unknown, deleted, expired), so a caller learns nothing about
 * other keys.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Sql } from '../../db/sql.js';
import { keyScopeOnPlan, type Scope } from '../../domain/platform/api-keys.js';
import type { Plan, Role } from '../../domain/shared/common.js';
import { ApiError, unauthenticated } from '../../domain/shared/errors.js';
import { isWellFormedApiKey } from '../../domain/platform/api-key-secret.js';
import { findLiveKey, touchKeyLastUsed } from '../../store/platform/api-keys.js';
import { memberById } from '../../store/platform/auth.js';
import { timingSafeEqual } from 'node:crypto';
import { findAccountByToken } from '../../store/pnet/check-ins.js';
import { connectionTokenPrefix, hashConnectionToken } from '../../store/pnet/accounts.js';
import type { RateLimiter } from './rate-limit.js';
import type { TokenVerifier } from '../../services/platform/tokens.js';
import { defaultSignInPolicy, type Identity } from '../../domain/platform/identity.js';
import { signIn } from '../../services/platform/sign-in.js';
import { requireAdmin } from '../../domain/platform/roles.js';

export interface Principal {
  workspaceId: string;
  plan: Plan;
  /** The member acting (a bearer user, or the member who created the key); null for orphaned keys. */
  memberId: string | null;
  role: Role;
  scope: Scope;
  via: 'api_key' | 'bearer' | 'connection_token';
  apiKeyId: string | null;
  /** The pnet account a browser extension's connection token stands for. */
  accountId: string | null;
  /** The hash of that connection token, for a statement that checks it is still the account's. */
  connectionTokenHash?: Buffer;
  /** A write key reading only because its workspace is on the free plan (the 403 names the plan). */
  narrowedByPlan?: boolean;
}

/**
 * `extension` routes take only a connection token, and a connection token reaches nothing else.
 * `identity` routes take only a bearer token of the identity provider and need no workspace yet
 * (signing up, accepting an invitation): the request carries the person, not a member.
 */
export type Access = 'public' | 'read' | 'write' | 'extension' | 'identity';

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: Access;
    role?: Role;
    /**
     * An extension route whose own statement checks the connection token (the heartbeat): it may
     * be authenticated from the tokens this process resolved lately, without a lookup.
     */
    checksConnectionToken?: boolean;
  }
  interface FastifyRequest {
    principal: Principal | null;
    /** The bearer token's holder, on `identity` routes and bearer requests. */
    identity: Identity | null;
  }
}

export interface AuthDeps {
  sql: Sql;
  verifyToken: TokenVerifier;
  rateLimiter: RateLimiter;
  /**
   * This process's own secret for calls the assistant makes on a member's behalf (api/operation-door.ts):
   * `x-acting-as: <secret>:<member id>`. Random per process, never sent anywhere: only app.inject carries it.
   */
  actingSecret?: string;
}

/** The header of a call made on a member's behalf from inside this process. */
export const actingHeader = 'x-acting-as';

/** The access a route needs: declared, or derived from its method. */
export function routeAccess(method: string, declared?: Access): Access {
  return declared ?? (method === 'GET' || method === 'HEAD' ? 'read' : 'write');
}

/** Writes last_used_at at most once a minute per key per process; the SQL guard covers the rest. */
function createLastUsedRecorder(sql: Sql, log: FastifyInstance['log'], now: () => number) {
  const lastMinute = new Map<string, number>();
  return (keyId: string) => {
    const minute = Math.floor(now() / 60_000);
    if (lastMinute.get(keyId) === minute) return;
    lastMinute.set(keyId, minute);
    if (lastMinute.size > 50_000) lastMinute.clear();
    touchKeyLastUsed(sql, keyId).catch((err) => log.warn({ err }, 'could not record last_used_at'));
  };
}

/**
 * Connection tokens this process resolved in the last minute, by token. Thousands of browsers
 * check in every few seconds, and the lookup was a round trip of its own on every check-in. Only
 * a route that checks the token again in its own statement (`checksConnectionToken`: the
 * heartbeat's single statement locks the account row where the token hash still matches) takes
 * the principal from here, so a token replaced by a disconnect, in this process or any other, is
 * refused as before (401). Every other route looks the token up. A 401 on an extension route
 * forgets the token here.
 */
export class ConnectionTokenCache {
  private readonly entries = new Map<string, { principal: Principal; at: number }>();
  constructor(
    private readonly ttlMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  get(token: string): Principal | undefined {
    const entry = this.entries.get(token);
    if (!entry) return undefined;
    if (this.now() - entry.at < this.ttlMs) return entry.principal;
    this.entries.delete(token);
    return undefined;
  }

  set(token: string, principal: Principal) {
    if (this.entries.size >= 100_000) this.entries.clear();
    this.entries.set(token, { principal, at: this.now() });
  }

  forget(token: string) {
    this.entries.delete(token);
  }
}

/** A browser extension sends its account's connection token in either header. */
async function connectionTokenPrincipal(
  deps: AuthDeps,
  token: string,
  tokens: ConnectionTokenCache,
  checkedLater: boolean,
): Promise<Principal> {
  const known = checkedLater ? tokens.get(token) : undefined;
  if (known) return known;
  const account = await findAccountByToken(deps.sql, token);
  if (!account) {
    tokens.forget(token);
    throw unauthenticated();
  }
  const principal: Principal = {
    workspaceId: account.workspace_id,
    plan: account.plan,
    memberId: null,
    role: 'member',
    scope: 'write',
    via: 'connection_token',
    apiKeyId: null,
    accountId: account.id,
    connectionTokenHash: hashConnectionToken(token),
  };
  tokens.set(token, principal);
  return principal;
}

/** The token of an `Authorization: Bearer <token>` header; undefined for anything else. */
/** The token of an `Authorization: Bearer` header, if any. */
export function bearerOf(authorization: string | undefined): string | undefined {
  return typeof authorization === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1] : undefined;
}

/** The connection token a request carries, if any (X-API-Key first, as authenticate reads them). */
function connectionTokenOf(request: FastifyRequest): string | undefined {
  const apiKey = request.headers['x-api-key'];
  if (typeof apiKey === 'string' && apiKey.length > 0)
    return apiKey.startsWith(connectionTokenPrefix) ? apiKey : undefined;
  const authorization = request.headers.authorization;
  const bearer = bearerOf(authorization);
  return bearer?.startsWith(connectionTokenPrefix) ? bearer : undefined;
}

/** A member acting through the assistant: the member's own access, as if signed in. */
async function actingPrincipal(deps: AuthDeps, header: string, secret: string): Promise<Principal> {
  const at = header.lastIndexOf(':');
  const given = Buffer.from(header.slice(0, Math.max(at, 0)));
  const expected = Buffer.from(secret);
  if (at < 0 || given.length !== expected.length || !timingSafeEqual(given, expected)) throw unauthenticated();
  const memberId = header.slice(at + 1);
  if (!/^[0-9a-f-]{36}$/i.test(memberId)) throw unauthenticated();
  const member = await memberById(deps.sql, memberId);
  if (!member) throw unauthenticated();
  return signedInMember(member.workspace_id, member);
}

/** A member signed in (a bearer token, or the assistant acting for them): their own role, write scope. */
function signedInMember(workspaceId: string, member: { id: string; role: Role; plan: Plan }): Principal {
  return {
    workspaceId,
    plan: member.plan,
    memberId: member.id,
    role: member.role,
    scope: 'write',
    via: 'bearer',
    apiKeyId: null,
    accountId: null,
  };
}

async function authenticate(
  deps: AuthDeps,
  request: FastifyRequest,
  recordUse: (id: string) => void,
  tokens: ConnectionTokenCache,
): Promise<Principal> {
  const acting = request.headers[actingHeader];
  if (typeof acting === 'string' && deps.actingSecret) return actingPrincipal(deps, acting, deps.actingSecret);
  const apiKey = request.headers['x-api-key'];
  const authorization = request.headers.authorization;
  // A credential that cannot be read is refused even beside a good one: which one the caller meant
  // is unknown, and a request is never let through on a guess (Schemathesis sent a valid key with
  // a malformed Authorization header and was answered 200).
  const bearer = bearerOf(authorization);
  if (authorization !== undefined && !bearer) throw unauthenticated();
  const checkedLater = request.routeOptions.config.checksConnectionToken === true;
  if (typeof apiKey === 'string' && apiKey.startsWith(connectionTokenPrefix))
    return connectionTokenPrincipal(deps, apiKey, tokens, checkedLater);
  if (typeof apiKey === 'string' && apiKey.length > 0) {
    if (!isWellFormedApiKey(apiKey)) throw unauthenticated();
    const key = await findLiveKey(deps.sql, apiKey);
    if (!key) throw unauthenticated();
    recordUse(key.id);
    return {
      workspaceId: key.workspace_id,
      plan: key.plan,
      memberId: key.member_id,
      role: key.role ?? 'member',
      scope: keyScopeOnPlan(key.scope, key.plan),
      narrowedByPlan: key.scope !== keyScopeOnPlan(key.scope, key.plan),
      via: 'api_key',
      apiKeyId: key.id,
      accountId: null,
    };
  }
  if (!bearer) throw unauthenticated();
  if (bearer.startsWith(connectionTokenPrefix)) return connectionTokenPrincipal(deps, bearer, tokens, checkedLater);
  const identity = await deps.verifyToken(bearer);
  if (!identity) throw unauthenticated();
  request.identity = identity;
  const named = request.headers[workspaceHeader];
  const member = await signIn(
    deps.sql,
    identity,
    { workspaceId: typeof named === 'string' && named !== '' ? named : null },
    deps.verifyToken.policy ?? defaultSignInPolicy,
  );
  return signedInMember(member.workspaceId, { id: member.memberId, role: member.role, plan: member.plan });
}

/** The header a person who is a member of several workspaces names one with. */
export const workspaceHeader = 'x-workspace-id';

/** The holder of the request's bearer token, for an `identity` route; API keys and connection tokens stand for no person. */
async function identityOfBearer(deps: AuthDeps, request: FastifyRequest): Promise<Identity> {
  const authorization = request.headers.authorization;
  const bearer = bearerOf(authorization);
  if (!bearer) {
    if (request.headers['x-api-key'] !== undefined && authorization === undefined)
      throw new ApiError(
        'forbidden',
        'This operation takes a bearer token of the identity provider: an API key stands for no person.',
      );
    throw unauthenticated();
  }
  if (bearer.startsWith(connectionTokenPrefix))
    throw new ApiError('forbidden', 'A connection token reaches only the extension routes.');
  const identity = await deps.verifyToken(bearer);
  if (!identity) throw unauthenticated();
  return identity;
}

function takeRate(deps: AuthDeps, key: string) {
  const limited = deps.rateLimiter.take(key);
  if (!limited.allowed)
    throw new ApiError('rate_limited', `Too many requests; retry in ${limited.retryAfterSeconds} s.`, {
      'retry-after': String(limited.retryAfterSeconds),
    });
}

export function registerAuth(app: FastifyInstance, deps: AuthDeps) {
  const recordUse = createLastUsedRecorder(deps.sql, app.log, deps.rateLimiter.now);
  const tokens = new ConnectionTokenCache();
  app.decorateRequest('principal', null);
  app.decorateRequest('identity', null);
  // A token an extension route refused (its account's token was replaced) is looked up again next time.
  app.addHook('onError', async (request, _reply, error) => {
    if (request.principal?.via !== 'connection_token' || (error as { status?: number }).status !== 401) return;
    const token = connectionTokenOf(request);
    if (token) tokens.forget(token);
  });
  app.addHook('onRequest', async (request) => {
    const config = request.routeOptions.config;
    // Unmatched routes (404/308) and public routes need no credential.
    if (!request.routeOptions.url) return;
    const access = routeAccess(request.method, config.access);
    if (access === 'public') return;
    if (access === 'identity') {
      request.identity = await identityOfBearer(deps, request);
      takeRate(deps, `user:${request.identity.userId}`);
      return;
    }
    const principal = await authenticate(deps, request, recordUse, tokens);
    request.principal = principal;
    if ((access === 'extension') !== (principal.via === 'connection_token')) {
      throw new ApiError(
        'forbidden',
        access === 'extension'
          ? 'Extension routes take the connection token of a sender account.'
          : 'A connection token reaches only the extension routes.',
      );
    }
    const rateKey = principal.apiKeyId
      ? `key:${principal.apiKeyId}`
      : principal.accountId
        ? `account:${principal.accountId}`
        : `user:${principal.memberId}`;
    takeRate(deps, rateKey);
    if (access === 'write' && principal.scope !== 'write') {
      throw new ApiError(
        'forbidden',
        principal.narrowedByPlan
          ? 'This workspace is on the free plan, where API keys read only; this operation needs the paid plan.'
          : 'This API key has read scope; this operation needs a write key.',
      );
    }
    if (config.role === 'admin') requireAdmin(principal);
  });
}

/** The person behind an `identity` route's bearer token. */
export function identityOf(request: FastifyRequest): Identity {
  if (!request.identity) throw new ApiError('unauthorized', 'Authentication required.');
  return request.identity;
}

/** The authenticated caller of a non-public route. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new ApiError('unauthorized', 'Authentication required.');
  return request.principal;
}
