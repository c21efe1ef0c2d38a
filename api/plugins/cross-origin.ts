/**
 * Cross-origin use (CORS) of the few routes an MCP client running in a web page (the MCP Inspector,
 * say) must reach, as the MCP authorization spec expects: the OAuth metadata, registration, the
 * token endpoint and `/mcp` (decision 040). A route opts in with `config.crossOrigin`; every other
 * route stays same-origin, with no CORS header and no preflight answer.
 *
 * Any origin is allowed (`*`, never with credentials): these routes are public or take a bearer
 * token the page holds itself, so no cookie or ambient credential of a visitor's rides along.
 */
import type { FastifyInstance } from 'fastify';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A page of any origin may call this route (CORS); its path answers the preflight. */
    crossOrigin?: boolean;
  }
}

/** What an MCP client sends: its bearer token, JSON bodies and the Streamable HTTP headers. */
export const crossOriginRequestHeaders = [
  'Authorization',
  'Content-Type',
  'Accept',
  'Mcp-Session-Id',
  'MCP-Protocol-Version',
  'Last-Event-ID',
] as const;
/** What it must read: the 401/403 challenge (resource metadata, scope) and the session id. */
export const crossOriginExposedHeaders = ['WWW-Authenticate', 'Mcp-Session-Id'] as const;

export function registerCrossOrigin(app: FastifyInstance) {
  const methodsByPath = new Map<string, Set<string>>();
  app.addHook('onRoute', (route) => {
    if (!route.config?.crossOrigin || route.method === 'OPTIONS') return;
    let methods = methodsByPath.get(route.url);
    if (!methods) {
      methodsByPath.set(route.url, (methods = new Set()));
      // The preflight is derived from the routes themselves, so a method added later is allowed too.
      // It carries no credential by definition, hence public.
      app.options(
        route.url,
        { schema: { hide: true }, config: { access: 'public', crossOrigin: true } },
        async (_request, reply) =>
          reply
            .code(204)
            .header('access-control-allow-methods', [...methods!].sort().join(', '))
            .header('access-control-allow-headers', crossOriginRequestHeaders.join(', '))
            .header('access-control-max-age', '7200')
            .send(),
      );
    }
    for (const method of [route.method].flat()) methods.add(String(method));
  });

  app.addHook('onRequest', async (request, reply) => {
    if (!request.routeOptions.config?.crossOrigin) return;
    // On the raw response: /mcp hands it to the MCP SDK's transport (hijacked), which writes its own
    // head, and Node merges these into it; Fastify's own replies (errors, 429s) merge them the same way.
    reply.raw.setHeader('access-control-allow-origin', '*');
    reply.raw.setHeader('access-control-expose-headers', crossOriginExposedHeaders.join(', '));
  });
}
