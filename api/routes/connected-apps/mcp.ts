/**
 * The MCP server of connected AI apps: Streamable HTTP at `POST /mcp`, built with the official
 * SDK's server and transport (stateless: one server and transport per request, JSON answers), mounted
 * here through Fastify's raw request and response.
 *
 * Every request is authorised on its own (services/connected-apps/authorization.ts): the access
 * token (live, issued for this resource), the app not revoked, the member still in the workspace,
 * and the workspace's plan read now (not on the paid plan: `read`, whatever was chosen). Then a rate
 * limit per app. A `write` tool called with `read` access is refused before the server sees it:
 * 403 `insufficient_scope`, as the MCP authorization spec says.
 *
 * The server itself (tools, resources, the cards a write raises) is services/connected-apps/mcp-server.ts.
 *
 * A web page of any origin may call it (CORS, plugins/cross-origin.ts): it takes a bearer token,
 * never a cookie, so a page can only use a token it was given.
 */
import type { FastifyPluginAsync } from 'fastify';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { readOnlyRefusal, reboundOrigin } from '../../../domain/connected-apps/connected-apps.js';
import { lastUsedRecorder, mcpServerFor } from '../../../services/connected-apps/mcp-server.js';
import { authoriseCall, mcpPath } from '../../../services/connected-apps/authorization.js';
import type { AppDeps } from '../../deps.js';
import { bearerOf } from '../../plugins/auth.js';
import { RateLimiter } from '../../plugins/rate-limit.js';
import { bearerChallenge, endpointsOf } from '../../oauth-http.js';

export const mcpRoutes =
  ({ sql, temporal, integrations, rateLimit }: AppDeps): FastifyPluginAsync =>
  async (app) => {
    const limiter = new RateLimiter(rateLimit);
    const recordUse = lastUsedRecorder(sql, app.log, limiter.now);

    const routeConfig = { access: 'public', crossOrigin: true } as const;

    app.post(mcpPath, { schema: { hide: true }, config: routeConfig }, async (request, reply) => {
      const e = endpointsOf(integrations.publicBaseUrl, request);
      const rebound = reboundOrigin(request.headers.origin, e.base, request.host);
      if (rebound) {
        return reply.code(403).send({
          detail: `Requests from ${rebound.slice(0, 200)} are not accepted: this service is ${e.base}, not ${request.host.slice(0, 200)}.`,
        });
      }
      const token = bearerOf(request.headers.authorization);
      const authorised = await authoriseCall(sql, token, e);
      if (!authorised.ok) {
        // The scopes an app may ask for (RFC 6750 3, a SHOULD of the MCP spec); the person chooses on the consent page.
        const scope = ', scope="read write"';
        return bearerChallenge(
          reply,
          e,
          401,
          token
            ? `${scope}, error="invalid_token", error_description="${authorised.description.replace(/"/g, "'")}"`
            : scope,
          authorised.description,
        );
      }
      const limited = limiter.take(`app:${authorised.app.app_id}`);
      if (!limited.allowed) {
        return reply
          .code(429)
          .header('retry-after', String(limited.retryAfterSeconds))
          .send({ detail: `Too many calls from this app; retry in ${limited.retryAfterSeconds} s.` });
      }
      recordUse(authorised.app.app_id);
      const door = integrations.operations;
      if (!door) return reply.code(503).send({ detail: 'The workspace API cannot be called from this process.' });
      const refusal =
        authorised.access === 'read'
          ? readOnlyRefusal(
              door.catalogue(),
              { access: authorised.app.access, role: authorised.app.member_role },
              request.body,
            )
          : null;
      if (refusal) return bearerChallenge(reply, e, 403, ', error="insufficient_scope", scope="read write"', refusal);
      const server = mcpServerFor({ sql, temporal, door, app: authorised.app, access: authorised.access });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      await server.connect(transport);
      reply.hijack();
      reply.raw.on('close', () => {
        void transport.close();
        void server.close();
      });
      await transport.handleRequest(request.raw, reply.raw, request.body);
    });

    // Stateless: no server-to-client stream and no session to end.
    for (const method of ['GET', 'DELETE'] as const) {
      app.route({
        method,
        url: mcpPath,
        schema: { hide: true },
        config: routeConfig,
        handler: async (_request, reply) =>
          reply
            .code(405)
            .header('allow', 'POST')
            .send({ detail: 'This MCP endpoint is stateless: POST JSON-RPC messages to it.' }),
      });
    }
  };
