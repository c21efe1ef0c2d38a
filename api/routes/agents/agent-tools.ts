/**
 * Agent tool availability (interface spec: Browser agent records). A tool is available when
 * something here supplies it: reading a network profile needs a connected pnet account of the
 * workspace (its browser does the reading); finding a work email needs an email-finder service
 * configured (WORK_EMAIL_FINDER_URL), judged from the same injected suppliers the research runs
 * call, so the switch and the runs never disagree. Switching on an unavailable tool is refused (409)
 * and changes nothing.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { AgentSuppliers } from '../../../integrations/agent-tools/index.js';
import type { Sql } from '../../../db/sql.js';
import { DetailBodySchema } from '../../../domain/shared/common.js';
import { ApiError } from '../../../domain/shared/errors.js';
import {
  AgentToolKeySchema,
  AgentToolListSchema,
  AgentToolSchema,
  AgentToolUpdateSchema,
  type AgentTool,
  type AgentToolKey,
} from '../../../domain/pnet/agent.js';
import { agentToolSwitches, hasConnectedPnetAccount, setAgentToolEnabled } from '../../../store/agents/agent-tools.js';
import type { RouteDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

const tags = ['agent-tools'];

async function supplierGap(
  sql: Sql,
  suppliers: AgentSuppliers,
  workspaceId: string,
  key: AgentToolKey,
): Promise<string | null> {
  if (key === 'find_work_email') {
    return suppliers.workEmail ? null : 'No email-finder service is configured (WORK_EMAIL_FINDER_URL).';
  }
  return (await hasConnectedPnetAccount(sql, workspaceId))
    ? null
    : 'No pnet account of this workspace is connected to read profiles with.';
}

async function readTools(sql: Sql, suppliers: AgentSuppliers, workspaceId: string): Promise<AgentTool[]> {
  const rows = await agentToolSwitches(sql, workspaceId);
  return Promise.all(
    AgentToolKeySchema.options.map(async (key) => {
      const gap = await supplierGap(sql, suppliers, workspaceId, key);
      // An enabled tool whose supplier went away reads as off: it cannot run.
      const enabled = (rows.find((r) => r.key === key)?.enabled ?? false) && gap === null;
      return { key, available: gap === null, enabled, unavailable_reason: gap };
    }),
  );
}

export const agentToolRoutes =
  ({ sql, agentSuppliers: suppliers }: RouteDeps): FastifyPluginAsyncZod =>
  async (app) => {
    // Read at each request: the suppliers object is the one the runs are given.
    app.get(
      '/agent-tools/',
      {
        schema: {
          operationId: 'listAgentTools',
          tags,
          summary: "The agent's tools, whether each is available here and switched on",
          response: { 200: AgentToolListSchema },
        },
      },
      async (request) => ({ tools: await readTools(sql, suppliers, principalOf(request).workspaceId) }),
    );

    app.patch(
      '/agent-tools/:key/',
      {
        schema: {
          operationId: 'updateAgentTool',
          tags,
          summary: 'Switch a tool on or off; switching on a tool whose supplier is unavailable is refused',
          params: z.object({ key: AgentToolKeySchema }),
          body: AgentToolUpdateSchema,
          response: { 200: AgentToolSchema, 409: DetailBodySchema },
        },
      },
      async (request) => {
        const { workspaceId } = principalOf(request);
        const { key } = request.params;
        if (request.body.enabled) {
          const gap = await supplierGap(sql, suppliers, workspaceId, key);
          if (gap) throw new ApiError('conflict', `${key} cannot be switched on: ${gap}`);
        }
        await setAgentToolEnabled(sql, workspaceId, key, request.body.enabled);
        return (await readTools(sql, suppliers, workspaceId)).find((t) => t.key === key)!;
      },
    );
  };
