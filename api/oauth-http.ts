/**
 * Replies in OAuth's own shapes, for the connected-app routes (api/routes/connected-apps/oauth.ts
 * and mcp.ts): the service's address as clients see it, form values read one each, RFC 6749 error
 * bodies, and the bearer challenge (RFC 6750) that points a client to the resource metadata.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { OAuthError, resourceMetadataUrl, type Endpoints } from '../services/connected-apps/authorization.js';

/** This service's address: PUBLIC_BASE_URL when set, else the address the request came to. */
export function endpointsOf(publicBaseUrl: string | undefined, request: FastifyRequest): Endpoints {
  const configured = publicBaseUrl?.trim().replace(/\/+$/, '');
  return { base: configured || `${request.protocol}://${request.host}` };
}

/** A query or form with only its string values (a repeated parameter is refused, RFC 6749 3.1). */
export function singleValues(raw: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries((raw ?? {}) as Record<string, unknown>)) {
    if (Array.isArray(value)) throw new OAuthError('invalid_request', `${key} is given more than once.`);
    if (typeof value === 'string') out[key] = value;
  }
  return out;
}

export function sendOAuthError(reply: FastifyReply, error: unknown) {
  if (!(error instanceof OAuthError)) throw error;
  reply.header('cache-control', 'no-store');
  if (error.status === 401) reply.header('www-authenticate', 'Basic realm="oauth"');
  return reply.code(error.status).send(error.body());
}

/** A 401 or 403 whose WWW-Authenticate names the resource metadata, with `extra` parameters after it. */
export function bearerChallenge(reply: FastifyReply, e: Endpoints, status: 401 | 403, extra: string, detail: string) {
  return reply
    .code(status)
    .header('www-authenticate', `Bearer resource_metadata="${resourceMetadataUrl(e)}"${extra}`)
    .header('cache-control', 'no-store')
    .send({ detail });
}
