/**
 * Path conventions: every path ends with a slash, and an unslashed request is redirected (308)
 * rather than answered 404; a known path asked with a method it does not serve answers 405 with
 * `Allow`, before any body is parsed.
 */
import type { FastifyInstance } from 'fastify';

function splitUrl(url: string): [string, string] {
  const at = url.indexOf('?');
  return at === -1 ? [url, ''] : [url.slice(0, at), url.slice(at)];
}

function patternToRegExp(url: string): RegExp {
  const escaped = url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:\w+/g, '[^/]+');
  return new RegExp(`^${escaped}$`);
}

export function registerRouting(app: FastifyInstance) {
  const routes: { pattern: RegExp; methods: Set<string> }[] = [];
  app.addHook('onRoute', (route) => {
    const pattern = patternToRegExp(route.url);
    const entry =
      routes.find((r) => r.pattern.source === pattern.source) ??
      routes[routes.push({ pattern, methods: new Set() }) - 1]!;
    for (const method of [route.method].flat()) entry.methods.add(String(method));
  });

  app.addHook('onRequest', async (request, reply) => {
    // A path served exactly by a route without parameters is its own most specific match: no scan
    // of every route's pattern (the heartbeat's path is one of these).
    const matched = request.routeOptions.url;
    if (matched && !matched.includes(':')) return;
    const [path] = splitUrl(request.url);
    const matching = routes.filter((r) => r.pattern.test(path));
    if (matching.length === 0) return;
    // A path with fewer parameters (/api-keys/count/, /tables/:id/rows/bulk/) also matches one with
    // more (/api-keys/:key_id/, /tables/:id/rows/:row_id/); the most specific path's methods are
    // the answer, not a 422 about a malformed id.
    const parameters = (r: { pattern: RegExp }) => r.pattern.source.split('[^/]+').length - 1;
    const fewest = Math.min(...matching.map(parameters));
    const allowed = new Set(matching.filter((r) => parameters(r) === fewest).flatMap((r) => [...r.methods]));
    if (matched && allowed.has(request.method)) return;
    const allow = [...allowed].sort().join(', ');
    return reply
      .code(405)
      .header('allow', allow)
      .send({ detail: `${request.method} is not allowed on ${path}; use ${allow}.` });
  });

  app.setNotFoundHandler((request, reply) => {
    const [path, query] = splitUrl(request.url);
    if (!path.endsWith('/')) {
      return reply
        .code(308)
        .header('location', `${path}/${query}`)
        .send({ detail: `Moved to ${path}/` });
    }
    return reply.code(404).send({ detail: `No route ${request.method} ${path}.` });
  });
}
