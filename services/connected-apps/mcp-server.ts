/**
 * The MCP server a connected AI app talks to (api/routes/connected-apps/mcp.ts mounts it, one per
 * request): its tools are the workspace's own API operations as the approving member may call
 * them (domain/connected-apps appOperations), called in-process through the operation door; its
 * resources are the workspace's tables and sequences. A write the assistant's grant rule would
 * ask about (priced at or over the approval threshold, destructive, or a send) raises an assistant
 * card instead of running (services/connected-apps/app-cards.ts), and the result names the card.
 */
import type { FastifyBaseLogger } from 'fastify';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
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
  type Tool,
} from '@modelcontextprotocol/sdk/types.js';
import type { Sql } from '../../db/sql.js';
import { runsWithoutAsking } from '../../domain/assistant/assistant.js';
import { operationRequest, type CatalogueOperation } from '../../domain/assistant/operations.js';
import { isDestructiveOperation, sendingOperations, type OperationDoor } from '../../domain/assistant/tool-cards.js';
import { appOperations, type Access } from '../../domain/connected-apps/connected-apps.js';
import { readSettings } from '../../store/assistant/settings.js';
import { touchAppLastUsed, type AccessTokenRow } from '../../store/connected-apps/oauth.js';
import { raiseAppCard } from './app-cards.js';
import type { TemporalHandle } from '../deps.js';

const serverInfo = { name: 'outreach-workspace', version: '1.0.0' };

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

/** One authorised call: the app behind the token, with the access the plan leaves it. */
export interface CallContext {
  sql: Sql;
  temporal: TemporalHandle;
  door: OperationDoor;
  app: AccessTokenRow;
  access: Access;
}

export async function callAppTool(
  ctx: CallContext,
  name: string,
  args: Record<string, unknown>,
): Promise<CallToolResult> {
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

/** The server for one request of one app, with the access it has now. */
export function mcpServerFor(ctx: CallContext): Server {
  const server = new Server(serverInfo, {
    capabilities: { tools: {}, resources: {} },
    instructions: `Tools are this workspace's API operations, with ${ctx.access} access. Inputs: path and query parameters by name, the JSON body under \`body\`.`,
  });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: appOperations(ctx.door.catalogue(), ctx.access, ctx.app.member_role).map(toolOf),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request) =>
    callAppTool(ctx, request.params.name, request.params.arguments ?? {}),
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
export function lastUsedRecorder(sql: Sql, log: FastifyBaseLogger, now: () => number) {
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
