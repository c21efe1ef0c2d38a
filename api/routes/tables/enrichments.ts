/**
 * Enrichment providers (listEnrichmentProviders) and column runs: start a run of an enrichment
 * column, watch its progress on the table or the column, cancel it. A run is a Temporal workflow;
 * everything read here comes from its record in Postgres.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import {
  ColumnRunCreateSchema,
  ColumnRunListQuerySchema,
  ColumnRunListSchema,
  ColumnRunSchema,
  EnrichmentProviderDetailSchema,
  EnrichmentProviderListSchema,
  providerKeyPattern,
  providerSummary,
} from '../../../domain/tables/enrichments.js';
import { notFound } from '../../../domain/shared/errors.js';
import {
  cancelColumnRun,
  createColumnRun,
  getColumnRun,
  listColumnRuns,
  toColumnRun,
} from '../../../services/tables/column-runs.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

const providerTags = ['table-enrichments'];
const runTags = ['column-runs'];
const TableParamsSchema = z.object({ table_id: UuidSchema });
const ColumnParamsSchema = z.object({ table_id: UuidSchema, column_id: UuidSchema });
const RunParamsSchema = z.object({ table_id: UuidSchema, run_id: UuidSchema });

export const enrichmentProviderRoutes =
  ({ integrations: { enrichmentProviders } }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/table-enrichments/providers/',
      {
        schema: {
          operationId: 'listEnrichmentProviders',
          tags: providerTags,
          summary: 'Enrichment providers something here runs on, alphabetical by key (endpoint 10)',
          description:
            'A provider whose model, key or service is not configured in this environment is left out, not listed as broken.',
          response: { 200: EnrichmentProviderListSchema },
        },
      },
      async () => ({ providers: enrichmentProviders.list().map((p) => providerSummary(p.info)) }),
    );

    app.get(
      '/table-enrichments/providers/:provider_key/',
      {
        schema: {
          operationId: 'readEnrichmentProvider',
          tags: providerTags,
          summary: "A provider's inputs, outputs, options, price and limits: what an enrichment column of it needs",
          params: z.object({ provider_key: z.string().max(64).regex(providerKeyPattern) }),
          response: { 200: EnrichmentProviderDetailSchema },
        },
      },
      async (request) => {
        const provider = enrichmentProviders.get(request.params.provider_key);
        if (!provider) throw notFound('Provider');
        return provider.info;
      },
    );
  };

export const columnRunRoutes =
  ({ sql, temporal, integrations: { enrichmentProviders } }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/tables/:table_id/columns/:column_id/runs/',
      {
        schema: {
          operationId: 'startColumnRun',
          tags: runTags,
          summary: 'Run an enrichment column over every row, or the rows named',
          description:
            'Each row holds the provider’s price in credits when it starts; the hold is charged when the provider returns a result and returned for an empty ' +
            'result or a failure (after retries). With keep_existing_results, cells that already have a result are left alone. One run per column goes at a time.',
          params: ColumnParamsSchema,
          body: ColumnRunCreateSchema,
          response: {
            201: ColumnRunSchema,
            409: DetailBodySchema.describe(
              'Not an enrichment column, its provider is not available here, or a run of it is already going',
            ),
          },
        },
      },
      async (request, reply) => {
        const run = await createColumnRun(
          sql,
          temporal,
          enrichmentProviders,
          {
            workspaceId: principalOf(request).workspaceId,
            tableId: request.params.table_id,
            columnId: request.params.column_id,
          },
          request.body,
        );
        return reply.code(201).send(toColumnRun(run));
      },
    );

    app.get(
      '/tables/:table_id/columns/:column_id/runs/',
      {
        schema: {
          operationId: 'listColumnRuns',
          tags: runTags,
          summary: "The column's runs, newest first, with their progress",
          params: ColumnParamsSchema,
          querystring: ColumnRunListQuerySchema,
          response: { 200: ColumnRunListSchema },
        },
      },
      async (request) => {
        const { table_id: tableId, column_id: columnId } = request.params;
        const runs = await listColumnRuns(sql, principalOf(request).workspaceId, tableId, {
          ...request.query,
          columnId,
        });
        return { runs: runs.map(toColumnRun) };
      },
    );

    app.get(
      '/tables/:table_id/runs/',
      {
        schema: {
          operationId: 'listTableRuns',
          tags: runTags,
          summary: "The table's column runs, newest first; `active=true` for the ones going",
          params: TableParamsSchema,
          querystring: ColumnRunListQuerySchema,
          response: { 200: ColumnRunListSchema },
        },
      },
      async (request) => ({
        runs: (await listColumnRuns(sql, principalOf(request).workspaceId, request.params.table_id, request.query)).map(
          toColumnRun,
        ),
      }),
    );

    app.get(
      '/tables/:table_id/runs/:run_id/',
      {
        schema: {
          operationId: 'readColumnRun',
          tags: runTags,
          summary: 'A run: status, counts and progress',
          params: RunParamsSchema,
          response: { 200: ColumnRunSchema },
        },
      },
      async (request) =>
        toColumnRun(
          await getColumnRun(sql, principalOf(request).workspaceId, request.params.table_id, request.params.run_id),
        ),
    );

    app.post(
      '/tables/:table_id/runs/:run_id/cancel/',
      {
        schema: {
          operationId: 'cancelColumnRun',
          tags: runTags,
          summary: 'Stop a run: no more rows start, rows in flight finish, rows not reached keep what they held',
          description: 'Answers the run as `cancelling`; it reads `cancelled` once the rows in flight are done.',
          params: RunParamsSchema,
          response: { 200: ColumnRunSchema, 409: DetailBodySchema.describe('The run has already finished') },
        },
      },
      async (request) =>
        toColumnRun(
          await cancelColumnRun(
            sql,
            temporal,
            principalOf(request).workspaceId,
            request.params.table_id,
            request.params.run_id,
          ),
        ),
    );
  };
