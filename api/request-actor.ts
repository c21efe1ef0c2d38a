/**
 * Who acts in a request, in the shape each area records or reads with: read from the principal the
 * auth plugin set (api/plugins/auth.ts), so route files keep only handlers and schemas
 * (docs/architecture.md, "One home per use case").
 */
import type { FastifyRequest } from 'fastify';
import type { Sql } from '../db/sql.js';
import { ApiError } from '../domain/shared/errors.js';
import type { Caller as CardCaller } from '../services/assistant/cards.js';
import { checkConsentVisible } from '../services/connected-apps/authorization.js';
import type { Reader } from '../store/assistant/conversations.js';
import type { Caller as TableCaller } from '../store/tables/tables.js';
import { principalOf } from './plugins/auth.js';

/** Who did it, as recorded on inbox rows: the member, or the API key when no member stands behind it. */
export function actorOf(request: FastifyRequest): string | null {
  const p = principalOf(request);
  return p.memberId ?? (p.apiKeyId ? `api_key:${p.apiKeyId}` : null);
}

/** Whose assistant conversations the caller sees: a member their own, an admin every member's. */
export function readerOf(request: FastifyRequest): Reader {
  const principal = principalOf(request);
  return { workspaceId: principal.workspaceId, memberId: principal.memberId, admin: principal.role === 'admin' };
}

/** The caller an assistant card's decision is logged under: an API key's caller, or a signed-in member. */
export function cardCallerOf(request: FastifyRequest): CardCaller {
  const principal = principalOf(request);
  return { kind: principal.via === 'api_key' ? 'api' : 'user', memberId: principal.memberId };
}

/** The caller's workspace and member (a table's favourites and last views are the member's). */
export function tableCallerOf(request: FastifyRequest): TableCaller {
  const principal = principalOf(request);
  return { workspaceId: principal.workspaceId, memberId: principal.memberId };
}

/**
 * The signed-in person behind a consent decision: a bearer member, never an API key. The request is
 * looked up first, so one the caller may not see is 404 before the credential is judged.
 */
export async function consentPersonOf(sql: Sql, request: FastifyRequest, requestId: string): Promise<string> {
  const principal = principalOf(request);
  await checkConsentVisible(sql, requestId, principal.memberId);
  if (principal.via !== 'bearer' || !principal.memberId) {
    throw new ApiError('forbidden', 'Consent is given by a signed-in person (a bearer token), not an API key.');
  }
  return principal.memberId;
}
