/**
 * Outbound agents (interface spec: Outbound agent conversation): versioned prompts per sequence
 * slot, the conversation read (readOutboundConversation), and which agent writes a sequence's
 * agent-written steps.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema, ValidationBodySchema } from '../../../domain/shared/common.js';
import { notFound } from '../../../domain/shared/errors.js';
import {
  AgentParamsSchema,
  ConversationQuerySchema,
  ConversationSchema,
  OutboundAgentCreateSchema,
  OutboundAgentListSchema,
  OutboundAgentSchema,
  OutboundAgentUpdateSchema,
  OutboundAgentVersionListSchema,
  SequenceAgentBodySchema,
  SequenceAgentSchema,
} from '../../../domain/agents/outbound-agents.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import {
  createAgent,
  getAgent,
  getSequenceAgent,
  listAgents,
  listVersions,
  readConversation,
  setSequenceAgent,
  updateAgent,
} from '../../../store/agents/outbound-agents.js';

const tags = ['outbound-agents'];
const SequenceParamsSchema = z.object({ sequence_id: UuidSchema });

export const outboundAgentRoutes =
  ({ sql }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/outbound-agents/',
      {
        schema: {
          operationId: 'createOutboundAgent',
          tags,
          summary: 'Create an outbound agent: instructions and one prompt per sequence slot (version 1)',
          body: OutboundAgentCreateSchema,
          response: {
            201: OutboundAgentSchema,
            409: DetailBodySchema.describe('A slot key given twice'),
            422: ValidationBodySchema,
          },
        },
      },
      async (request, reply) =>
        reply.code(201).send(await createAgent(sql, principalOf(request).workspaceId, request.body)),
    );

    app.get(
      '/outbound-agents/',
      {
        schema: {
          operationId: 'listOutboundAgents',
          tags,
          summary: "List the workspace's outbound agents, newest first",
          response: { 200: OutboundAgentListSchema },
        },
      },
      async (request) => ({ agents: await listAgents(sql, principalOf(request).workspaceId) }),
    );

    app.get(
      '/outbound-agents/:agent_id/',
      {
        schema: {
          operationId: 'readOutboundAgent',
          tags,
          summary: 'Read an outbound agent at its current version',
          params: AgentParamsSchema,
          response: { 200: OutboundAgentSchema, 404: DetailBodySchema },
        },
      },
      async (request) => {
        const agent = await getAgent(sql, principalOf(request).workspaceId, request.params.agent_id);
        if (!agent) throw notFound('Outbound agent');
        return agent;
      },
    );

    app.patch(
      '/outbound-agents/:agent_id/',
      {
        schema: {
          operationId: 'updateOutboundAgent',
          tags,
          summary: 'Rename an agent or change its prompts',
          description:
            'A field left out keeps its value. A change of `instructions` or `slots` makes a new version (the old one stays readable under ' +
            '`versions/`); messages already written keep the version that wrote them. A rename alone keeps the version.',
          params: AgentParamsSchema,
          body: OutboundAgentUpdateSchema,
          response: {
            200: OutboundAgentSchema,
            404: DetailBodySchema,
            409: DetailBodySchema.describe('A slot key given twice'),
            422: ValidationBodySchema,
          },
        },
      },
      async (request) => {
        const agent = await updateAgent(sql, principalOf(request).workspaceId, request.params.agent_id, request.body);
        if (!agent) throw notFound('Outbound agent');
        return agent;
      },
    );

    app.get(
      '/outbound-agents/:agent_id/versions/',
      {
        schema: {
          operationId: 'listOutboundAgentVersions',
          tags,
          summary:
            "An agent's prompt versions, newest first, each with where it came from (created, edited, or a training session)",
          params: AgentParamsSchema,
          response: { 200: OutboundAgentVersionListSchema, 404: DetailBodySchema },
        },
      },
      async (request) => {
        const versions = await listVersions(sql, principalOf(request).workspaceId, request.params.agent_id);
        if (!versions) throw notFound('Outbound agent');
        return { versions };
      },
    );

    app.get(
      '/outbound-agents/:agent_id/conversations/',
      {
        schema: {
          operationId: 'readOutboundConversation',
          tags,
          summary: 'What the agent found out about one contact and every message it wrote, oldest first (endpoint 5)',
          description:
            'The contact is named by the query parameter `contact_key`: the key the sequence gave the contact, `<sequence_id>:<row_id>` ' +
            '(1 to 255 characters). 404 when the agent has no conversation with that contact (it has not researched or written to it yet).',
          params: AgentParamsSchema,
          querystring: ConversationQuerySchema,
          response: {
            200: ConversationSchema,
            404: DetailBodySchema,
            422: ValidationBodySchema.describe(
              'contact_key missing, empty, over 255 characters or holding a NUL character',
            ),
          },
        },
        // Another workspace's (or no) agent is 404 whatever the query says, so ids never leak through 422s.
        preValidation: async (request) => {
          const { agent_id } = request.params as { agent_id?: string };
          if (!agent_id || !UuidSchema.safeParse(agent_id).success) return;
          if (!(await getAgent(sql, principalOf(request).workspaceId, agent_id))) throw notFound('Outbound agent');
        },
      },
      async (request) => {
        const { workspaceId } = principalOf(request);
        if (!(await getAgent(sql, workspaceId, request.params.agent_id))) throw notFound('Outbound agent');
        const conversation = await readConversation(
          sql,
          workspaceId,
          request.params.agent_id,
          request.query.contact_key,
        );
        if (!conversation) throw notFound('Conversation');
        return conversation;
      },
    );

    app.get(
      '/sequences/:sequence_id/agent/',
      {
        schema: {
          operationId: 'readSequenceAgent',
          tags,
          summary: 'Which outbound agent writes the agent-written steps of a sequence',
          params: SequenceParamsSchema,
          response: { 200: SequenceAgentSchema, 404: DetailBodySchema },
        },
      },
      async (request) => getSequenceAgent(sql, principalOf(request).workspaceId, request.params.sequence_id),
    );

    app.put(
      '/sequences/:sequence_id/agent/',
      {
        schema: {
          operationId: 'setSequenceAgent',
          tags,
          summary: 'Set (or with null, remove) the outbound agent that writes the agent-written steps of a sequence',
          description:
            'Steps written from now on use the agent at its current version; messages already written stay as they are.',
          params: SequenceParamsSchema,
          body: SequenceAgentBodySchema,
          response: {
            200: SequenceAgentSchema,
            404: DetailBodySchema.describe('The sequence or the agent is not in this workspace'),
          },
        },
      },
      async (request) =>
        setSequenceAgent(sql, principalOf(request).workspaceId, request.params.sequence_id, request.body.agent_id),
    );
  };
