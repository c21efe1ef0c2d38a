/**
 * Lead searches (decision 041): the providers this service has, start a search into a new or
 * existing table (202: the search runs as the workflow lead-search/<id>), read and list searches
 * with their progress, cancel one.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { notFound } from '../../../domain/shared/errors.js';
import {
  LeadSearchCreateSchema,
  LeadSearchListQuerySchema,
  LeadSearchPageSchema,
  LeadSearchProvidersSchema,
  LeadSearchSchema,
} from '../../../domain/sourcing/lead-search.js';
import { cancelLeadSearch, createLeadSearch } from '../../../services/sourcing/lead-search.js';
import { getLeadSearch, listLeadSearches, toLeadSearch } from '../../../store/sourcing/lead-searches.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

const tags = ['lead-searches'];
const SearchParamsSchema = z.object({ search_id: UuidSchema });

export const leadSearchRoutes =
  ({ sql, temporal, integrations }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/lead-searches/providers/',
      {
        schema: {
          operationId: 'listLeadSearchProviders',
          tags,
          summary:
            'The search providers this service can run, with their price per landed row (only configured providers are listed)',
          response: { 200: LeadSearchProvidersSchema },
        },
      },
      async () => ({ providers: integrations.sourcing.leadSearch.list().map((p) => p.info) }),
    );

    app.post(
      '/lead-searches/',
      {
        schema: {
          operationId: 'createLeadSearch',
          tags,
          summary:
            'Start a lead search: results land as rows of a new or existing table, deduplicated by profile URL, email or domain',
          description:
            'Answers 202 with the search `pending`; the workflow `lead-search/<id>` pages through the provider, honouring its rate limit. ' +
            'Each new row costs the provider’s `price_per_row` credits, charged when the row is written; a result the table already has ' +
            '(same key) is a duplicate and costs nothing. When credits run out the search ends `failed` with the rows landed so far. ' +
            'No provider configured, an unknown provider or one that cannot search this kind is 422; an unknown table is 404.',
          body: LeadSearchCreateSchema,
          response: {
            202: LeadSearchSchema,
            404: DetailBodySchema.describe("No table with this id in the caller's workspace"),
            409: DetailBodySchema.describe('A column of the table with one of the names the search fills is computed'),
          },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const search = await createLeadSearch(sql, temporal, integrations, principal, request.body);
        return reply.code(202).send(toLeadSearch(search));
      },
    );

    app.get(
      '/lead-searches/',
      {
        schema: {
          operationId: 'listLeadSearches',
          tags,
          summary: "The workspace's lead searches, newest first (optionally one table's)",
          querystring: LeadSearchListQuerySchema,
          response: { 200: LeadSearchPageSchema },
        },
      },
      async (request) => listLeadSearches(sql, principalOf(request).workspaceId, request.query),
    );

    app.get(
      '/lead-searches/:search_id/',
      {
        schema: {
          operationId: 'getLeadSearch',
          tags,
          summary:
            'A lead search with its progress: pages read, rows landed, duplicates, credits charged, rate-limit waits',
          params: SearchParamsSchema,
          response: {
            200: LeadSearchSchema,
            404: DetailBodySchema.describe("No lead search with this id in the caller's workspace"),
          },
        },
      },
      async (request) => {
        const search = await getLeadSearch(sql, principalOf(request).workspaceId, request.params.search_id);
        if (!search) throw notFound('Lead search');
        return toLeadSearch(search);
      },
    );

    app.post(
      '/lead-searches/:search_id/cancel/',
      {
        schema: {
          operationId: 'cancelLeadSearch',
          tags,
          summary:
            'Cancel a pending or running search: no page lands after this; rows landed so far stay (and stay paid for)',
          params: SearchParamsSchema,
          response: {
            200: LeadSearchSchema,
            404: DetailBodySchema.describe("No lead search with this id in the caller's workspace"),
            409: DetailBodySchema.describe('The search is over already'),
          },
        },
      },
      async (request) => cancelLeadSearch(sql, temporal, principalOf(request).workspaceId, request.params.search_id),
    );
  };
