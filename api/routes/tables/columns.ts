/** A table's columns (input and formula) and column templates: a column's configuration kept for reuse. */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { notFound } from '../../../domain/shared/errors.js';
import {
  ColumnCreateSchema,
  ColumnFromTemplateSchema,
  ColumnListSchema,
  ColumnSchema,
  ColumnTemplateCreateSchema,
  ColumnTemplateListSchema,
  ColumnTemplateSchema,
  ColumnTemplateUpdateSchema,
  ColumnUpdateSchema,
} from '../../../domain/tables/tables.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import {
  createColumn,
  createColumnFromTemplate,
  deleteColumn,
  deleteColumnTemplate,
  getColumn,
  getColumnTemplate,
  listColumns,
  listColumnTemplates,
  loadColumns,
  saveColumnTemplate,
  updateColumn,
  updateColumnTemplate,
} from '../../../store/tables/columns.js';
import { createEnrichmentColumn } from '../../../services/tables/enrichments.js';
import { requireTable } from '../../../store/tables/tables.js';
import { dropSortIndexes } from '../../../store/tables/rows.js';

const TableParamsSchema = z.object({ table_id: UuidSchema });
const ColumnParamsSchema = z.object({ table_id: UuidSchema, column_id: UuidSchema });
const TemplateParamsSchema = z.object({ template_id: UuidSchema });
const tags = ['table-columns'];
const templateTags = ['column-templates'];
const columnConflict = DetailBodySchema.describe(
  'A column of that name exists, the table has its most columns, or an enrichment names a provider, input, output or option this environment does not have',
);

export const tableColumnRoutes =
  ({ sql, integrations: { enrichmentProviders } }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/tables/:table_id/columns/',
      {
        schema: {
          operationId: 'createTableColumn',
          tags,
          summary:
            'Add an input, formula or enrichment column; a formula is computed for every row at once, an enrichment by a run',
          description:
            'An enrichment column names a provider of GET /table-enrichments/providers/, maps its inputs to columns and fans its output fields out ' +
            'into output columns placed right after it. Its cells are filled by POST /tables/{table_id}/columns/{column_id}/runs/, or for new rows by auto_run.',
          params: TableParamsSchema,
          body: ColumnCreateSchema,
          response: { 201: ColumnSchema, 409: columnConflict },
        },
      },
      async (request, reply) => {
        if (request.body.kind === 'enrichment') {
          return reply
            .code(201)
            .send(
              await createEnrichmentColumn(
                sql,
                principalOf(request).workspaceId,
                request.params.table_id,
                request.body,
                enrichmentProviders,
              ),
            );
        }
        return reply
          .code(201)
          .send(await createColumn(sql, principalOf(request).workspaceId, request.params.table_id, request.body));
      },
    );

    app.post(
      '/tables/:table_id/columns/from-template/',
      {
        schema: {
          operationId: 'createTableColumnFromTemplate',
          tags,
          summary: "Add a column from a column template; a formula's names refer to this table's columns",
          params: TableParamsSchema,
          body: ColumnFromTemplateSchema,
          response: { 201: ColumnSchema, 409: columnConflict },
        },
      },
      async (request, reply) =>
        reply
          .code(201)
          .send(
            await createColumnFromTemplate(
              sql,
              principalOf(request).workspaceId,
              request.params.table_id,
              request.body,
            ),
          ),
    );

    app.get(
      '/tables/:table_id/columns/',
      {
        schema: {
          operationId: 'listTableColumns',
          tags,
          summary: 'The columns in order',
          params: TableParamsSchema,
          response: { 200: ColumnListSchema },
        },
      },
      async (request) => {
        await requireTable(sql, principalOf(request).workspaceId, request.params.table_id);
        return { columns: listColumns(await loadColumns(sql, request.params.table_id)) };
      },
    );

    app.get(
      '/tables/:table_id/columns/:column_id/',
      {
        schema: {
          operationId: 'readTableColumn',
          tags,
          summary: 'Read a column',
          params: ColumnParamsSchema,
          response: { 200: ColumnSchema },
        },
      },
      async (request) =>
        getColumn(sql, principalOf(request).workspaceId, request.params.table_id, request.params.column_id),
    );

    app.patch(
      '/tables/:table_id/columns/:column_id/',
      {
        schema: {
          operationId: 'updateTableColumn',
          tags,
          summary: "Rename a column, move it, or change a formula column's formula",
          params: ColumnParamsSchema,
          body: ColumnUpdateSchema,
          response: {
            200: ColumnSchema,
            409: DetailBodySchema.describe('The name is taken, or a formula given for a column of another kind'),
          },
        },
      },
      async (request) =>
        updateColumn(
          sql,
          principalOf(request).workspaceId,
          request.params.table_id,
          request.params.column_id,
          request.body,
        ),
    );

    app.delete(
      '/tables/:table_id/columns/:column_id/',
      {
        schema: {
          operationId: 'deleteTableColumn',
          tags,
          summary: 'Delete a column and its cells; it also leaves the saved views',
          params: ColumnParamsSchema,
          response: { 204: z.null().describe('Deleted'), 409: DetailBodySchema.describe('A formula reads the column') },
        },
      },
      async (request, reply) => {
        await deleteColumn(sql, principalOf(request).workspaceId, request.params.table_id, request.params.column_id);
        // Not awaited: a concurrent drop waits for the transactions using the index (decision 059).
        void dropSortIndexes(sql, request.params.column_id).catch((error: unknown) =>
          request.log.warn({ err: error }, "dropping a deleted column's sort indexes failed"),
        );
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/tables/:table_id/columns/:column_id/template/',
      {
        schema: {
          operationId: 'saveColumnTemplate',
          tags,
          summary: "Save the column's configuration as a column template for other tables",
          params: ColumnParamsSchema,
          body: ColumnTemplateCreateSchema,
          response: { 201: ColumnTemplateSchema, 409: DetailBodySchema.describe('A template of that name exists') },
        },
      },
      async (request, reply) =>
        reply
          .code(201)
          .send(
            await saveColumnTemplate(
              sql,
              principalOf(request).workspaceId,
              request.params.table_id,
              request.params.column_id,
              request.body.name,
            ),
          ),
    );

    app.get(
      '/column-templates/',
      {
        schema: {
          operationId: 'listColumnTemplates',
          tags: templateTags,
          summary: 'Column templates, by name',
          response: { 200: ColumnTemplateListSchema },
        },
      },
      async (request) => ({ templates: await listColumnTemplates(sql, principalOf(request).workspaceId) }),
    );

    app.get(
      '/column-templates/:template_id/',
      {
        schema: {
          operationId: 'readColumnTemplate',
          tags: templateTags,
          summary: 'Read a column template',
          params: TemplateParamsSchema,
          response: { 200: ColumnTemplateSchema },
        },
      },
      async (request) => {
        const template = await getColumnTemplate(sql, principalOf(request).workspaceId, request.params.template_id);
        if (!template) throw notFound('Column template');
        return template;
      },
    );

    app.patch(
      '/column-templates/:template_id/',
      {
        schema: {
          operationId: 'updateColumnTemplate',
          tags: templateTags,
          summary: 'Rename a column template or the column name it gives',
          params: TemplateParamsSchema,
          body: ColumnTemplateUpdateSchema,
          response: { 200: ColumnTemplateSchema, 409: DetailBodySchema.describe('A template of that name exists') },
        },
      },
      async (request) => {
        const template = await updateColumnTemplate(
          sql,
          principalOf(request).workspaceId,
          request.params.template_id,
          request.body,
        );
        if (!template) throw notFound('Column template');
        return template;
      },
    );

    app.delete(
      '/column-templates/:template_id/',
      {
        schema: {
          operationId: 'deleteColumnTemplate',
          tags: templateTags,
          summary: 'Delete a column template; columns made from it stay',
          params: TemplateParamsSchema,
          response: { 204: z.null().describe('Deleted') },
        },
      },
      async (request, reply) => {
        if (!(await deleteColumnTemplate(sql, principalOf(request).workspaceId, request.params.template_id)))
          throw notFound('Column template');
        return reply.code(204).send(null);
      },
    );
  };
