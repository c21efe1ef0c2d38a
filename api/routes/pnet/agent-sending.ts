/**
 * The agent sending switch (interface spec: Browser agent records). Anyone with write access may
 * pause; only an admin unpauses.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { agentSendingHistory, readAgentSending, updateAgentSending } from '../../../store/pnet/agent-sending.js';
import { requireAdmin } from '../../../domain/platform/roles.js';
import { AgentSendingHistorySchema, AgentSendingSchema, AgentSendingUpdateSchema } from '../../../domain/pnet/agent.js';
import type { AppDeps } from '../../deps.js';
import { memberIdpUserId } from '../../../store/platform/members.js';
import { principalOf } from '../../plugins/auth.js';

const tags = ['pnet-agent-sending'];

export const agentSendingRoutes =
  ({ sql }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/pnet/agent-sending/',
      {
        schema: {
          operationId: 'readAgentSending',
          tags,
          summary: "Whether the agent's own sending is paused here or everywhere",
          response: { 200: AgentSendingSchema },
        },
      },
      async (request) => readAgentSending(sql, principalOf(request).workspaceId),
    );

    app.patch(
      '/pnet/agent-sending/',
      {
        // Pausing is anyone's (a stop must never wait for an admin); undoing it is an admin's.
        config: { adminOnly: 'when unpausing' },
        schema: {
          operationId: 'updateAgentSending',
          tags,
          summary: "Pause or unpause the agent's own sending, with a reason kept in the history",
          description:
            'Unpausing is for admins only (403 for members). While paused, no metered step is handed to a browser.',
          body: AgentSendingUpdateSchema,
          response: { 200: AgentSendingSchema },
        },
      },
      async (request) => {
        const principal = principalOf(request);
        if (!request.body.paused) requireAdmin(principal);
        const changedBy = principal.memberId ? await memberIdpUserId(sql, principal.memberId) : null;
        return updateAgentSending(sql, principal.workspaceId, {
          paused: request.body.paused,
          reason: request.body.reason,
          changedBy,
        });
      },
    );

    app.get(
      '/pnet/agent-sending/history/',
      {
        schema: {
          operationId: 'listAgentSendingChanges',
          tags,
          summary: 'Changes of the switch, newest first',
          response: { 200: AgentSendingHistorySchema },
        },
      },
      async (request) => ({ changes: await agentSendingHistory(sql, principalOf(request).workspaceId) }),
    );
  };
