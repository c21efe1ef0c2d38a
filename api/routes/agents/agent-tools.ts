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
import { DetailBodySchema } from '../../../domain/shared/common.js';
import {
  AgentToolKeySchema,
  AgentToolListSchema,
  AgentToolSchema,
  AgentToolUpdateSchema,
} from '../../../domain/pnet/agent.js';
import { readAgentTools, switchAgentTool } from '../../../services/agents/agent-tool-switches.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

const tags = ['agent-tools'];

export const agentToolRoutes =
  ({ sql, integrations: { agentSuppliers: suppliers } }: AppDeps): FastifyPluginAsyncZod =>
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
      async (request) => ({ tools: await readAgentTools({ sql, suppliers }, principalOf(request).workspaceId) }),
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
      async (request) =>
        switchAgentTool({ sql, suppliers }, principalOf(request).workspaceId, request.params.key, request.body.enabled),
    );
  };
