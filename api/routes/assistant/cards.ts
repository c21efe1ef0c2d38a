/**
 * The assistant's settings (endpoint 4, 2.11), the grants given from cards, the cards (2.12)
 * with approve, dismiss and approve-all, and the activity log. A decision goes to the card's turn
 * as an Update (the person waits for its answer); the lists and reads come from Postgres.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyRequest } from 'fastify';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { ApiError, ValidationRefusal } from '../../../domain/shared/errors.js';
import {
  ActivityListQuerySchema,
  ActivityListSchema,
  alwaysAsks,
  ApproveAllRequestSchema,
  ApproveRequestSchema,
  AssistantSettingsSchema,
  AssistantSettingsUpdateSchema,
  GrantListSchema,
  isGrantable,
  ProposalActionsSchema,
  ProposalListQuerySchema,
  ProposalListSchema,
  ProposalSchema,
  verbs,
  type ApprovalScope,
} from '../../../domain/assistant/assistant.js';
import { decideCards } from '../../../services/assistant/turn-client.js';
import { listActivity } from '../../../store/assistant/activity.js';
import { memberDisplayName } from '../../../store/assistant/conversations.js';
import {
  findProposal,
  listProposals,
  proposalsByIds,
  toProposal,
  type ProposalRow,
} from '../../../store/assistant/proposals.js';
import { listGrants, readSettings, revokeGrant, updateSettings } from '../../../store/assistant/settings.js';
import type { Actor } from '../../../workflows/assistant/assistant-turn.contract.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

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

const decidedConflict = (card: ProposalRow) =>
  new ApiError('conflict', `This card was already decided (it is ${card.status}).`);

export const assistantCardRoutes =
  ({ sql, temporal }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    async function actorOf(request: FastifyRequest): Promise<Actor> {
      const principal = principalOf(request);
      return {
        kind: principal.via === 'api_key' ? 'api' : 'user',
        memberId: principal.memberId,
        displayName: principal.memberId ? await memberDisplayName(sql, principal.memberId) : null,
      };
    }

    /** Refuses a standing grant from a card that can never have one (a send, a destructive card). */
    function checkScope(card: ProposalRow, scope: ApprovalScope) {
      if (scope === 'once' || card.status !== 'pending' || isGrantable(card)) return;
      throw new ValidationRefusal([
        {
          loc: ['body', 'scope'],
          msg: `${card.verb} cannot be granted: approve it once; it asks again every time`,
          type: 'value_error',
          input: scope,
        },
      ]);
    }

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

    async function decideOne(
      request: FastifyRequest,
      proposalId: string,
      decision: 'approved' | 'rejected',
      scope: ApprovalScope,
      key: string,
    ) {
      const { workspaceId } = principalOf(request);
      const card = await findProposal(sql, workspaceId, proposalId);
      if (card.status !== 'pending' || !card.message_id) throw decidedConflict(card);
      if (decision === 'approved') checkScope(card, scope);
      const [decided] = await decideCards(temporal, card.message_id, {
        cardIds: [card.id],
        decision,
        scope,
        key,
        actor: await actorOf(request),
      });
      const now = await findProposal(sql, workspaceId, proposalId);
      if (!decided?.won) throw decidedConflict(now);
      return toProposal(now);
    }

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
        decideOne(
          request,
          request.params.proposal_id,
          'approved',
          request.body.scope,
          request.headers['idempotency-key'] ?? randomUUID(),
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
        decideOne(
          request,
          request.params.proposal_id,
          'rejected',
          'once',
          request.headers['idempotency-key'] ?? randomUUID(),
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
        const { workspaceId } = principalOf(request);
        const ids = request.body.proposal_ids.map((id) => id.toLowerCase());
        const found = await proposalsByIds(sql, workspaceId, ids);
        const missing = ids.filter((id) => !found.has(id));
        if (missing.length > 0) throw new ApiError('not_found', `Card ${missing.join(', ')} not found.`);
        const scopeOf = (card: ProposalRow): ApprovalScope =>
          request.body.scope === 'once' || isGrantable(card) ? request.body.scope : 'once';
        const byAnswer = new Map<string, Map<ApprovalScope, string[]>>();
        for (const card of new Set(ids)) {
          const row = found.get(card)!;
          if (row.status !== 'pending' || !row.message_id) continue;
          const scopes = byAnswer.get(row.message_id) ?? new Map<ApprovalScope, string[]>();
          byAnswer.set(row.message_id, scopes);
          scopes.set(scopeOf(row), [...(scopes.get(scopeOf(row)) ?? []), row.id]);
        }
        const key = request.headers['idempotency-key'] ?? randomUUID();
        const actor = await actorOf(request);
        await Promise.allSettled(
          [...byAnswer].flatMap(([messageId, scopes]) =>
            [...scopes].map(([scope, cardIds]) =>
              decideCards(temporal, messageId, { cardIds, decision: 'approved', scope, key, actor }),
            ),
          ),
        );
        const now = await proposalsByIds(sql, workspaceId, ids);
        return { actions: ids.map((id) => toProposal(now.get(id)!)) };
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
