/**
 * The OpenAPI 3.1.0 document, generated from the same zod schemas the routes validate with.
 * Every route gets the spec's error responses added here, so no route can forget one and the
 * document always says what a client may receive. Each operation also says the access it needs
 * (`x-access`: read, write, public, extension or identity, as auth.ts decides it) and, when a route declares
 * a fixed price, the credits one call spends (`x-price-credits`), so the catalogue of operations
 * offered to a model (domain/assistant/operations.ts) is read from this document alone. An
 * operation only a workspace admin may call says so in `x-admin-only`: `true` when its route
 * declares `role: 'admin'` (auth.ts refuses a member before the handler), or the condition its
 * handler checks with `requireAdmin` (domain/platform/roles.ts), such as `"when unpausing"`.
 * test/integration/admin-only.test.ts calls every one of them as a member.
 */
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance, RouteOptions } from 'fastify';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { DetailBodySchema, ValidationBodySchema } from '../../domain/shared/common.js';
import { routeAccess } from './auth.js';
import { crossOriginExposedHeaders, crossOriginRequestHeaders } from './cross-origin.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Credits one call of this route spends, when that is a fixed number (`x-price-credits`). */
    priceCredits?: number;
    /**
     * When the handler itself refuses a member (403) with `requireAdmin` (domain/platform/roles.ts):
     * the condition, in words that follow "admins only" (`x-admin-only`). Routes that are admin-only
     * whatever the request declare `role: 'admin'` instead, which auth.ts enforces.
     */
    adminOnly?: string;
  }
}

export const apiVersion = '0.0';
export const securitySchemes = {
  ApiKeyAuth: {
    type: 'apiKey',
    in: 'header',
    name: 'X-API-Key',
    description: 'An API key (owk_…); on the extension routes, the account connection token (opc_…)',
  },
  BearerAuth: {
    type: 'http',
    scheme: 'bearer',
    description:
      'A JWT of the identity provider; on the extension routes, the account connection token (opc_…). With X-API-Key too, the key is read first, and an Authorization header that is not `Bearer <token>` is refused with 401. ' +
      'The token reaches the workspace of its organisation claim (a person of that organisation who is not yet a member joins on first use), or, with no organisation claim, the one workspace its holder is a member of; a member of several names one in the `X-Workspace-Id` header. See docs/teams.md.',
  },
} as const;

const errorDescriptions: Record<number, string> = {
  400: 'The HTTP request is malformed (a header the HTTP parser refuses, such as a non-numeric Content-Length, or a body shorter than its Content-Length)',
  401: 'Missing or invalid credentials',
  403: 'The credential may not do this (scope, role or plan)',
  404: 'Not found in this workspace',
  422: 'Invalid request',
  429: 'Too many requests; see Retry-After',
  500: 'Internal error',
  503: 'A dependency (Postgres or Temporal) is unavailable',
};

function withErrorResponses(route: RouteOptions) {
  // The reference page and its assets are public, like the document itself.
  if (route.url.startsWith('/docs')) route.config = { ...route.config, access: 'public' };
  const schema = (route.schema ??= {});
  if (schema.hide) return;
  const response = ((schema.response as Record<number, unknown> | undefined) ??= {});
  const access = routeAccess(String(route.method), route.config?.access);
  const isPublic = access === 'public';
  const extensions = schema as Record<`x-${string}`, unknown>;
  extensions['x-access'] = access;
  if (route.config?.priceCredits !== undefined) extensions['x-price-credits'] = route.config.priceCredits;
  const adminOnly = route.config?.role === 'admin' ? true : route.config?.adminOnly;
  if (adminOnly !== undefined) {
    extensions['x-admin-only'] = adminOnly;
    // A reader of the description alone learns it too, unless the route's own words already say so.
    const said = `${String(schema.summary ?? '')} ${String(schema.description ?? '')}`;
    if (!/\(admins\)|admins only/i.test(said)) {
      const sentence = adminOnly === true ? 'Admins only.' : `Admins only ${adminOnly}.`;
      schema.description = schema.description ? `${String(schema.description)} ${sentence}` : sentence;
    }
  }
  const codes = isPublic ? [400, 500, 503] : [400, 401, 403, 422, 429, 500, 503];
  if (!isPublic && route.url.includes(':')) codes.push(404);
  for (const code of codes) {
    response[code] ??= (code === 422 ? ValidationBodySchema : DetailBodySchema).describe(errorDescriptions[code]!);
  }
  // Both schemes on every operation, as the spec lists them; public ones accept either or none. An
  // `identity` operation (signUp) lists both too and answers an API key with 403 saying why.
  schema.security ??= isPublic
    ? [{ ApiKeyAuth: [] }, { BearerAuth: [] }, {}]
    : [{ ApiKeyAuth: [] }, { BearerAuth: [] }];
}

/**
 * Components listed by name. zod registers a schema's id when its module loads, so without this
 * the document's order followed whichever module an import chain happened to load first, and moving
 * an import reordered /openapi.json.
 */
function withSortedSchemas<T>(document: T): T {
  const components = (document as { components?: { schemas?: Record<string, unknown> } }).components;
  if (components?.schemas) {
    components.schemas = Object.fromEntries(
      Object.entries(components.schemas).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
    );
  }
  return document;
}

export async function registerOpenApi(app: FastifyInstance) {
  app.addHook('onRoute', withErrorResponses);
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Outreach and Data Workspace Service',
        version: apiVersion,
        description:
          'Workspace-scoped sales data and outreach. Paths end with a slash; an unslashed path is redirected (308).\n\n' +
          'Every operation listed here is same-origin: no CORS headers, no preflight. Only what an MCP client in a web ' +
          'page needs allows any origin: the OAuth metadata under `/.well-known/`, `POST /oauth/register`, ' +
          '`POST /oauth/token` and `/mcp` (connected AI apps; not listed here, as they speak OAuth and MCP: start at ' +
          '`/.well-known/oauth-authorization-server`). They answer `OPTIONS` with their methods and the request headers ' +
          `${crossOriginRequestHeaders.join(', ')}, and every answer carries \`Access-Control-Allow-Origin: *\` and ` +
          `exposes ${crossOriginExposedHeaders.join(', ')}.`,
      },
      components: { securitySchemes: securitySchemes as never },
    },
    transform: jsonSchemaTransform,
    transformObject: (input) => withSortedSchemas(jsonSchemaTransformObject(input)),
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/docs', staticCSP: true, uiConfig: { docExpansion: 'list' } });
  app.get('/openapi.json', { schema: { hide: true }, config: { access: 'public' } }, async () => app.swagger());
}
