/**
 * The assistant's settings (operationIds readAssistantSettings, updateAssistantSettings), the
 * grants given from cards, the cards with approve, dismiss and approve-all, and the activity log
 * (docs/decisions/034-assistant-turns-and-cards.md). A decision goes to the card's turn as an
 * Update (the person waits for its answer) through services/assistant/cards.ts; the lists and
 * reads come from Postgres.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { ApiError } from '../../../domain/shared/errors.js';
import {
  ActivityListQuerySchema,
  ActivityListSchema,
  alwaysAsks,
  ApproveAllRequestSchema,
  ApproveRequestSchema,
  AssistantSettingsSchema,
  AssistantSettingsUpdateSchema,
  GrantListSchema,
  ProposalActionsSchema,
  ProposalListQuerySchema,
  ProposalListSchema,
  ProposalSchema,
  verbs,
} from '../../../domain/assistant/assistant.js';
import { approveCards, approveOrDismissCard } from '../../../services/assistant/cards.js';
import { listActivity } from '../../../store/assistant/activity.js';
import { findProposal, listProposals, toProposal } from '../../../store/assistant/proposals.js';
import { listGrants, readSettings, revokeGrant, updateSettings } from '../../../store/assistant/settings.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { cardCallerOf } from '../../request-actor.js';

const tags = ['assistant'];
const CardParamsSchema = z.object({ proposal_id: UuidSchema });
const GrantParamsSchema = z.object({ grant_id: UuidSchema });
const IdempotencyHeadersSchema = z.object({
  'idempotency-key': z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe('The same key sent again (a retried request) is the same decision'),
});

export const assistantCardRoutes =
  ({ sql, temporal }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/assistant/settings/',
      {
        schema: {
          operationId: 'readAssistantSettings',
          tags,
          summary: "The assistant's approval threshold and default grants",
          response: { 200: AssistantSettingsSchema },
        },
      },
      async (request) => readSettings(sql, principalOf(request).workspaceId),
    );

    app.patch(
      '/assistant/settings/',
      {
        schema: {
          operationId: 'updateAssistantSettings',
          tags,
          summary: 'Set the threshold, the default grants, or both (endpoint 4)',
          description: `A field left out keeps its value. A verb that always asks (${[...alwaysAsks].join(', ')}) cannot be granted: 422 naming it. Verbs: ${verbs.join(', ')}.`,
          body: AssistantSettingsUpdateSchema,
          response: { 200: AssistantSettingsSchema },
        },
      },
      async (request) => {
        return updateSettings(sql, principalOf(request).workspaceId, request.body);
      },
    );

    app.get(
      '/assistant/grants/',
      {
        schema: {
          operationId: 'listAssistantGrants',
          tags,
          summary: 'Standing grants given from cards (thread, project_me, project_all), oldest first',
          response: { 200: GrantListSchema },
        },
      },
      async (request) => ({ grants: await listGrants(sql, principalOf(request).workspaceId) }),
    );

    app.delete(
      '/assistant/grants/:grant_id/',
      {
        schema: {
          operationId: 'revokeAssistantGrant',
          tags,
          summary: 'Revoke a standing grant; cards of its verb ask again',
          params: GrantParamsSchema,
          response: { 200: DetailBodySchema },
        },
      },
      async (request) => {
        if (!(await revokeGrant(sql, principalOf(request).workspaceId, request.params.grant_id)))
          throw new ApiError('not_found', 'Grant not found.');
        return { detail: 'Revoked.' };
      },
    );

    app.get(
      '/assistant/actions/',
      {
        schema: {
          operationId: 'listAssistantActions',
          tags,
          summary: "The workspace's cards in the order made, with filters by status and conversation",
          querystring: ProposalListQuerySchema,
          response: { 200: ProposalListSchema },
        },
      },
      async (request) =>
        listProposals(sql, principalOf(request).workspaceId, {
          status: request.query.status,
          conversationId: request.query.conversation_id,
          limit: request.query.limit,
          offset: request.query.offset,
        }),
    );

    app.get(
      '/assistant/actions/:proposal_id/',
      {
        schema: {
          operationId: 'readAssistantAction',
          tags,
          summary: 'Read a card as it stands now',
          params: CardParamsSchema,
          response: { 200: ProposalSchema },
        },
      },
      async (request) =>
        toProposal(await findProposal(sql, principalOf(request).workspaceId, request.params.proposal_id)),
    );

    app.post(
      '/assistant/actions/:proposal_id/approve/',
      {
        schema: {
          operationId: 'approveAssistantAction',
          tags,
          summary: 'Approve a card: it is applied once, charged at most its quote',
          description:
            'Holds the quoted credits, runs the verb, charges what it cost up to the quote and returns the rest. Answers the card as it stands after the apply: ' +
            '`applied` or `failed`, or `applying` while work it started (a column run) goes on. `scope` other than `once` also grants the verb ' +
            '(listed under /assistant/grants/); a card that can never be granted (a send, a destructive card) refuses those with 422. ' +
            'A card already decided is 409, and so is a second approval racing the first.',
          params: CardParamsSchema,
          headers: IdempotencyHeadersSchema,
          body: ApproveRequestSchema,
          response: { 200: ProposalSchema, 409: DetailBodySchema.describe('Already decided, or expired') },
        },
      },
      async (request) =>
        toProposal(
          await approveOrDismissCard(
            { sql, temporal },
            {
              workspaceId: principalOf(request).workspaceId,
              cardId: request.params.proposal_id,
              decision: 'approved',
              scope: request.body.scope,
              key: request.headers['idempotency-key'] ?? randomUUID(),
              caller: cardCallerOf(request),
            },
          ),
        ),
    );

    app.post(
      '/assistant/actions/:proposal_id/dismiss/',
      {
        schema: {
          operationId: 'dismissAssistantAction',
          tags,
          summary: 'Dismiss a card; a column it prepared is removed',
          params: CardParamsSchema,
          headers: IdempotencyHeadersSchema,
          response: { 200: ProposalSchema, 409: DetailBodySchema.describe('Already decided, or expired') },
        },
      },
      async (request) =>
        toProposal(
          await approveOrDismissCard(
            { sql, temporal },
            {
              workspaceId: principalOf(request).workspaceId,
              cardId: request.params.proposal_id,
              decision: 'rejected',
              scope: 'once',
              key: request.headers['idempotency-key'] ?? randomUUID(),
              caller: cardCallerOf(request),
            },
          ),
        ),
    );

    app.post(
      '/assistant/actions/approve-all/',
      {
        schema: {
          operationId: 'approveAllAssistantActions',
          tags,
          summary: 'Approve up to 50 cards, each applied on its own',
          description:
            'A failure never stops the rest. The answer names every card in the order asked, as it stands now; a card already decided comes back unchanged. ' +
            'An id that is not a card of this workspace is 404 and nothing is decided.',
          headers: IdempotencyHeadersSchema,
          body: ApproveAllRequestSchema,
          response: {
            200: ProposalActionsSchema,
            404: DetailBodySchema.describe('An id that is not a card of this workspace; nothing was decided'),
          },
        },
      },
      async (request) => {
        const cards = await approveCards(
          { sql, temporal },
          {
            workspaceId: principalOf(request).workspaceId,
            cardIds: request.body.proposal_ids,
            scope: request.body.scope,
            key: request.headers['idempotency-key'] ?? randomUUID(),
            caller: cardCallerOf(request),
          },
        );
        return { actions: cards.map(toProposal) };
      },
    );

    app.get(
      '/assistant/activity/',
      {
        schema: {
          operationId: 'listAssistantActivity',
          tags,
          summary: 'Every decision and outcome of cards, newest first; per conversation with `conversation_id`',
          querystring: ActivityListQuerySchema,
          response: { 200: ActivityListSchema },
        },
      },
      async (request) =>
        listActivity(sql, principalOf(request).workspaceId, {
          conversationId: request.query.conversation_id,
          limit: request.query.limit,
          offset: request.query.offset,
        }),
    );
  };
