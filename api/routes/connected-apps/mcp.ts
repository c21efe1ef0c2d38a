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
 * Tools are the service's own operations (the assistant's catalogue, read from the OpenAPI
 * document), called in-process through the operation door as the member who approved the app.
 * A write runs only when the assistant's grant rule lets it run without asking (the app's write
 * consent stands as the grant): priced at or over the workspace's approval threshold, destructive
 * or a send, it raises an assistant card instead (services/connected-apps/app-cards.ts), and the
 * result says so and names the card. Resources: the workspace's tables and sequences.
 *
 * A web page of any origin may call it (CORS, plugins/cross-origin.ts): it takes a bearer token,
 * never a cookie, so a page can only use a token it was given.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  type CallToolResult,
  type Resource,
} from '@modelcontextprotocol/sdk/types.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { appOperations, type Access } from '../../../domain/connected-apps/connected-apps.js';
import { operationRequest, type CatalogueOperation } from '../../../domain/assistant/operations.js';
import { isDestructiveOperation, sendingOperations, type OperationDoor } from '../../../domain/assistant/tool-cards.js';
import { runsWithoutAsking } from '../../../domain/assistant/assistant.js';
import { readSettings } from '../../../store/assistant/settings.js';
import { touchAppLastUsed, type AccessTokenRow } from '../../../store/connected-apps/oauth.js';
import { raiseAppCard } from '../../../services/connected-apps/app-cards.js';
import type { Temporal } from '../../../services/assistant/turn-client.js';
import {
  authoriseCall,
  mcpPath,
  resourceMetadataUrl,
  type Endpoints,
} from '../../../services/connected-apps/authorization.js';
import type { Sql } from '../../../db/sql.js';
import type { RouteDeps } from '../../deps.js';
import { RateLimiter } from '../../plugins/rate-limit.js';
import { endpointsOf } from './oauth.js';

const serverInfo = { name: 'outreach-workspace', version: '1.0.0' };

/**
 * The spec's guard against DNS rebinding: a page whose origin names the very host it sent this
 * request to, while the service is known by another address (PUBLIC_BASE_URL), is a name of
 * someone else's resolved to us. Without PUBLIC_BASE_URL that host is the service's own address, and
 * the token's audience (issued for the service's real address) refuses such a call instead.
 */
function reboundOrigin(request: FastifyRequest, e: Endpoints): string | undefined {
  const origin = request.headers.origin;
  if (typeof origin !== 'string' || origin === new URL(e.base).origin) return undefined;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    return undefined;
  }
  return host === request.host.toLowerCase() ? origin : undefined;
}

function bearerOf(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  return typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] : undefined;
}

function describe(op: CatalogueOperation): string {
  const price = op.price_credits ? ` Costs ${op.price_credits} credit${op.price_credits === 1 ? '' : 's'} a call.` : '';
  return `${op.summary || op.name}${op.description ? `\n\n${op.description}` : ''}\n\n${op.method} ${op.path}.${price}`;
}

export function toolOf(op: CatalogueOperation): Tool {
  return {
    name: op.name,
    title: op.summary || op.name,
    description: describe(op),
    inputSchema: op.input_schema as Tool['inputSchema'],
    annotations: {
      title: op.summary || op.name,
      readOnlyHint: op.access === 'read',
      destructiveHint: op.access === 'write' && isDestructiveOperation(op),
      openWorldHint: sendingOperations.has(op.name),
    },
    _meta: { price_credits: op.price_credits, method: op.method, path: op.path },
  };
}

/** The JSON-RPC tool calls a request body carries (one message or a batch). */
function calledTools(body: unknown): string[] {
  const messages = Array.isArray(body) ? body : [body];
  return messages.flatMap((m) => {
    const msg = m as { method?: unknown; params?: { name?: unknown } } | null;
    return msg && msg.method === 'tools/call' && typeof msg.params?.name === 'string' ? [msg.params.name] : [];
  });
}

interface CallContext {
  sql: Sql;
  temporal: Temporal;
  door: OperationDoor;
  app: AccessTokenRow;
  access: Access;
}

async function callTool(ctx: CallContext, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  const op = appOperations(ctx.door.catalogue(), ctx.access, ctx.app.member_role).find((o) => o.name === name);
  if (!op) throw new McpError(ErrorCode.InvalidParams, `There is no tool named ${name}.`);
  let request: ReturnType<typeof operationRequest>;
  try {
    request = operationRequest(op, args);
  } catch (error) {
    return { isError: true, content: [{ type: 'text', text: (error as Error).message }] };
  }
  if (op.access === 'write') {
    const settings = await readSettings(ctx.sql, ctx.app.workspace_id);
    const destructive = isDestructiveOperation(op);
    const sends = sendingOperations.has(op.name);
    const runs = runsWithoutAsking({
      verb: op.name,
      priceCredits: op.price_credits,
      destructive,
      sends,
      conversationId: null,
      memberId: ctx.app.member_id,
      settings,
      // The person's write consent for this app is the standing grant of every write operation.
      grants: [{ verb: op.name, scope: 'project_all', conversation_id: null, member_id: null }],
    });
    if (!runs) {
      const why = sends
        ? 'it reaches people outside the workspace'
        : destructive
          ? 'it removes something that cannot be brought back from here'
          : `it costs ${op.price_credits} credits, at or over the workspace's approval threshold of ${settings.approval_threshold_credits}`;
      const card = await raiseAppCard(
        ctx,
        { workspaceId: ctx.app.workspace_id, memberId: ctx.app.member_id, appName: ctx.app.app_name },
        op,
        request,
      );
      const text =
        `Not run yet: ${op.summary || op.name} needs a person's approval because ${why}. ` +
        `It waits as assistant card ${card.id} (${card.price_label}) in the workspace; it runs when approved there.`;
      return {
        isError: false,
        content: [{ type: 'text', text }],
        structuredContent: {
          status: 'awaiting_approval',
          card_id: card.id,
          summary: card.summary,
          price_label: card.price_label,
          reason: text,
          approval_threshold_credits: settings.approval_threshold_credits,
        },
      };
    }
  }
  const answer = await ctx.door.call(ctx.app.member_id, request);
  const structured = { status: answer.status, body: answer.body };
  return {
    isError: answer.status >= 400,
    content: [{ type: 'text', text: JSON.stringify(structured) }],
    structuredContent: structured,
  };
}

/**
 * Resources: the workspace's tables and sequences, each read as the API reads it (a table with its
 * columns, a sequence with its graph), through the same door and as the same member as the tools.
 */
const resourceKinds = {
  tables: {
    list: '/tables/?limit=200',
    field: 'tables',
    read: (id: string) => `/tables/${id}/`,
    mimeType: 'application/json',
  },
  sequences: {
    list: '/sequences/',
    field: 'sequences',
    read: (id: string) => `/sequences/${id}/`,
    mimeType: 'application/json',
  },
} as const;
const resourceUri = /^workspace:\/\/(tables|sequences)\/([0-9a-f-]{36})$/;

async function listResources(ctx: CallContext): Promise<Resource[]> {
  const out: Resource[] = [];
  for (const [kind, k] of Object.entries(resourceKinds)) {
    const answer = await ctx.door.call(ctx.app.member_id, { method: 'GET', url: k.list });
    const items =
      answer.status === 200
        ? ((answer.body as Record<string, unknown>)[k.field] as {
            id: string;
            name: string;
            description?: string | null;
          }[])
        : [];
    for (const item of items ?? []) {
      out.push({
        uri: `workspace://${kind}/${item.id}`,
        name: item.name,
        title: item.name,
        mimeType: k.mimeType,
        ...(item.description ? { description: item.description } : {}),
      });
    }
  }
  return out;
}

async function readResource(ctx: CallContext, uri: string) {
  const m = resourceUri.exec(uri);
  if (!m)
    throw new McpError(
      ErrorCode.InvalidParams,
      `No resource ${uri}: resources are workspace://tables/<id> and workspace://sequences/<id>.`,
    );
  const kind = resourceKinds[m[1] as keyof typeof resourceKinds];
  const answer = await ctx.door.call(ctx.app.member_id, { method: 'GET', url: kind.read(m[2]!) });
  if (answer.status === 404) throw new McpError(ErrorCode.InvalidParams, `No resource ${uri} in this workspace.`);
  if (answer.status !== 200) throw new McpError(ErrorCode.InternalError, `Reading ${uri} answered ${answer.status}.`);
  return { contents: [{ uri, mimeType: kind.mimeType, text: JSON.stringify(answer.body) }] };
}

function mcpServer(ctx: CallContext): Server {
  const server = new Server(serverInfo, {
    capabilities: { tools: {}, resources: {} },
    instructions: `Tools are this workspace's API operations, with ${ctx.access} access. Inputs: path and query parameters by name, the JSON body under \`body\`.`,
  });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: appOperations(ctx.door.catalogue(), ctx.access, ctx.app.member_role).map(toolOf),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request) =>
    callTool(ctx, request.params.name, request.params.arguments ?? {}),
  );
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({ resources: await listResources(ctx) }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({
    resourceTemplates: [
      {
        uriTemplate: 'workspace://tables/{table_id}',
        name: 'Table',
        description: 'A table of the workspace, with its columns',
        mimeType: 'application/json',
      },
      {
        uriTemplate: 'workspace://sequences/{sequence_id}',
        name: 'Sequence',
        description: 'A sequence of the workspace, with its steps',
        mimeType: 'application/json',
      },
    ],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => readResource(ctx, request.params.uri));
  return server;
}

/** Writes last_used_at at most once a minute per app per process; the SQL guard covers the rest. */
function lastUsedRecorder(sql: Sql, log: FastifyRequest['log'], now: () => number) {
  const lastMinute = new Map<string, number>();
  return (appId: string) => {
    const minute = Math.floor(now() / 60_000);
    if (lastMinute.get(appId) === minute) return;
    lastMinute.set(appId, minute);
    if (lastMinute.size > 50_000) lastMinute.clear();
    touchAppLastUsed(sql, appId).catch((err: unknown) =>
      log.warn({ err }, 'could not record a connected app last_used_at'),
    );
  };
}

export const mcpRoutes =
  ({ sql, temporal, integrations, rateLimit }: RouteDeps): FastifyPluginAsync =>
  async (app) => {
    const limiter = new RateLimiter(rateLimit);
    const recordUse = lastUsedRecorder(sql, app.log, limiter.now);

    function challenge(reply: FastifyReply, e: Endpoints, status: 401 | 403, extra: string, detail: string) {
      return reply
        .code(status)
        .header('www-authenticate', `Bearer resource_metadata="${resourceMetadataUrl(e)}"${extra}`)
        .header('cache-control', 'no-store')
        .send({ detail });
    }

    const routeConfig = { access: 'public', crossOrigin: true } as const;

    app.post(mcpPath, { schema: { hide: true }, config: routeConfig }, async (request, reply) => {
      const e = endpointsOf(integrations.publicBaseUrl, request);
      const rebound = reboundOrigin(request, e);
      if (rebound) {
        return reply.code(403).send({
          detail: `Requests from ${rebound.slice(0, 200)} are not accepted: this service is ${e.base}, not ${request.host.slice(0, 200)}.`,
        });
      }
      const token = bearerOf(request);
      const authorised = await authoriseCall(sql, token, e);
      if (!authorised.ok) {
        // The scopes an app may ask for (RFC 6750 3, a SHOULD of the MCP spec); the person chooses on the consent page.
        const scope = ', scope="read write"';
        return challenge(
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
      if (authorised.access === 'read') {
        const writeOnly = new Set(
          appOperations(door.catalogue(), 'write', authorised.app.member_role)
            .filter((op) => op.access === 'write')
            .map((op) => op.name),
        );
        const refused = calledTools(request.body).find((name) => writeOnly.has(name));
        if (refused) {
          const why =
            authorised.app.access === 'write'
              ? 'the workspace is not on the paid plan, so connected apps only read there'
              : 'this app was approved to read only';
          return challenge(
            reply,
            e,
            403,
            ', error="insufficient_scope", scope="read write"',
            `${refused} makes changes, and ${why}.`,
          );
        }
      }
      const server = mcpServer({ sql, temporal, door, app: authorised.app, access: authorised.access });
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
