/** Saved views of a table: filters, sorts, hidden and ordered columns. The grid read and CSV export apply one with `view_id`. */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { notFound } from '../../../domain/shared/errors.js';
import { ViewCreateSchema, ViewListSchema, ViewSchema, ViewUpdateSchema } from '../../../domain/tables/tables.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { loadColumns } from '../../../store/tables/columns.js';
import { createView, deleteView, getView, listViews, updateView } from '../../../store/tables/views.js';
import { requireTable } from '../../../store/tables/tables.js';

const TableParamsSchema = z.object({ table_id: UuidSchema });
const ViewParamsSchema = z.object({ table_id: UuidSchema, view_id: UuidSchema });
const tags = ['table-views'];
const viewConflict = DetailBodySchema.describe(
  'A view of that name exists, or the view names a column the table does not have',
);

export const tableViewRoutes =
  ({ sql }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/tables/:table_id/views/',
      {
        schema: {
          operationId: 'createTableView',
          tags,
          summary: 'Save a view: filters, sorts, hidden and ordered columns',
          params: TableParamsSchema,
          body: ViewCreateSchema,
          response: { 201: ViewSchema, 409: viewConflict },
        },
      },
      async (request, reply) => {
        const { workspaceId } = principalOf(request);
        await requireTable(sql, workspaceId, request.params.table_id);
        const columns = await loadColumns(sql, request.params.table_id);
        return reply.code(201).send(await createView(sql, workspaceId, request.params.table_id, columns, request.body));
      },
    );

    app.get(
      '/tables/:table_id/views/',
      {
        schema: {
          operationId: 'listTableViews',
          tags,
          summary: 'Saved views, by name',
          params: TableParamsSchema,
          response: { 200: ViewListSchema },
        },
      },
      async (request) => {
        await requireTable(sql, principalOf(request).workspaceId, request.params.table_id);
        return { views: await listViews(sql, request.params.table_id) };
      },
    );

    app.get(
      '/tables/:table_id/views/:view_id/',
      {
        schema: {
          operationId: 'readTableView',
          tags,
          summary: 'Read a saved view',
          params: ViewParamsSchema,
          response: { 200: ViewSchema },
        },
      },
      async (request) => {
        await requireTable(sql, principalOf(request).workspaceId, request.params.table_id);
        const view = await getView(sql, request.params.table_id, request.params.view_id);
        if (!view) throw notFound('View');
        return view;
      },
    );

    app.patch(
      '/tables/:table_id/views/:view_id/',
      {
        schema: {
          operationId: 'updateTableView',
          tags,
          summary: 'Change a saved view; a field left out keeps its value',
          params: ViewParamsSchema,
          body: ViewUpdateSchema,
          response: { 200: ViewSchema, 409: viewConflict },
        },
      },
      async (request) => {
        await requireTable(sql, principalOf(request).workspaceId, request.params.table_id);
        const columns = await loadColumns(sql, request.params.table_id);
        const view = await updateView(sql, request.params.table_id, request.params.view_id, columns, request.body);
        if (!view) throw notFound('View');
        return view;
      },
    );

    app.delete(
      '/tables/:table_id/views/:view_id/',
      {
        schema: {
          operationId: 'deleteTableView',
          tags,
          summary: 'Delete a saved view',
          params: ViewParamsSchema,
          response: { 204: z.null().describe('Deleted') },
        },
      },
      async (request, reply) => {
        await requireTable(sql, principalOf(request).workspaceId, request.params.table_id);
        if (!(await deleteView(sql, request.params.table_id, request.params.view_id))) throw notFound('View');
        return reply.code(204).send(null);
      },
    );
  };
