/**
 * API key management (the interface spec's API keys). Paths are ours (the open items of its
 * Endpoints section leave them open).
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import {
  ApiKeyCountSchema,
  ApiKeyCreateSchema,
  ApiKeyCreatedSchema,
  ApiKeyListSchema,
  ApiKeySchema,
  ApiKeyScopesSchema,
  ApiKeyUpdateSchema,
  defaultScope,
  scopesForPlan,
} from '../../../domain/platform/api-keys.js';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { ApiError, notFound } from '../../../domain/shared/errors.js';
import {
  countApiKeys,
  createApiKey,
  deleteApiKey,
  getApiKey,
  listApiKeys,
  updateApiKey,
} from '../../../store/platform/api-keys.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

const KeyParamsSchema = z.object({ key_id: UuidSchema });
const tags = ['api-keys'];

export const apiKeyRoutes =
  ({ sql }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/api-keys/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'createApiKey',
          tags,
          summary: 'Create an API key; its secret is returned only in this response',
          body: ApiKeyCreateSchema,
          response: { 201: ApiKeyCreatedSchema, 409: DetailBodySchema },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const scope = request.body.scope ?? defaultScope(principal.plan);
        if (!scopesForPlan(principal.plan).includes(scope)) {
          throw new ApiError(
            'forbidden',
            `A ${principal.plan} workspace may mint ${scopesForPlan(principal.plan).join(' and ')} keys only.`,
          );
        }
        const created = await createApiKey(sql, {
          workspaceId: principal.workspaceId,
          createdBy: principal.memberId,
          name: request.body.name,
          scope,
          expireAt: request.body.expire_at ?? null,
        });
        return reply.code(201).send(created);
      },
    );

    app.get(
      '/api-keys/',
      {
        schema: {
          operationId: 'listApiKeys',
          tags,
          summary: 'List the live API keys, newest first',
          response: { 200: ApiKeyListSchema },
        },
      },
      async (request) => ({ api_keys: await listApiKeys(sql, principalOf(request).workspaceId) }),
    );

    app.get(
      '/api-keys/count/',
      {
        schema: {
          operationId: 'countApiKeys',
          tags,
          summary: 'Count the live API keys',
          response: { 200: ApiKeyCountSchema },
        },
      },
      async (request) => ({ count: await countApiKeys(sql, principalOf(request).workspaceId) }),
    );

    app.get(
      '/api-keys/scopes/',
      {
        schema: {
          operationId: 'readApiKeyScopes',
          tags,
          summary: 'The scopes this workspace may mint',
          response: { 200: ApiKeyScopesSchema },
        },
      },
      async (request) => ({ scopes: scopesForPlan(principalOf(request).plan) }),
    );

    app.get(
      '/api-keys/:key_id/',
      {
        schema: {
          operationId: 'readApiKey',
          tags,
          summary: 'Read an API key',
          params: KeyParamsSchema,
          response: { 200: ApiKeySchema },
        },
      },
      async (request) => {
        const key = await getApiKey(sql, principalOf(request).workspaceId, request.params.key_id);
        if (!key) throw notFound('API key');
        return key;
      },
    );

    app.patch(
      '/api-keys/:key_id/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'updateApiKey',
          tags,
          summary: 'Rename an API key or change its expiry',
          params: KeyParamsSchema,
          body: ApiKeyUpdateSchema,
          response: { 200: ApiKeySchema, 409: DetailBodySchema },
        },
      },
      async (request) => {
        const key = await updateApiKey(sql, principalOf(request).workspaceId, request.params.key_id, request.body);
        if (!key) throw notFound('API key');
        return key;
      },
    );

    app.delete(
      '/api-keys/:key_id/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'deleteApiKey',
          tags,
          summary: 'Delete an API key; it stops authenticating at once',
          params: KeyParamsSchema,
          response: { 204: z.null().describe('Deleted') },
        },
      },
      async (request, reply) => {
        if (!(await deleteApiKey(sql, principalOf(request).workspaceId, request.params.key_id)))
          throw notFound('API key');
        return reply.code(204).send(null);
      },
    );
  };
