/**
 * Tables (interface spec: Table summary) and their folders, and listUnfiledTables: tables still
 * waiting to be filed since folders replaced tags.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { notFound } from '../../../domain/shared/errors.js';
import {
  FolderCreateSchema,
  FolderListSchema,
  FolderSchema,
  FolderUpdateSchema,
  TableCreateSchema,
  TableListQuerySchema,
  TableListSchema,
  TableSchema,
  TableUpdateSchema,
  UnfiledTableListSchema,
} from '../../../domain/tables/tables.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { tableCallerOf } from '../../request-actor.js';
import {
  createFolder,
  createTable,
  deleteFolder,
  deleteTable,
  getFolder,
  getTable,
  listFolders,
  listTables,
  listUnfiledTables,
  recordTableView,
  restoreTable,
  updateFolder,
  updateTable,
} from '../../../store/tables/tables.js';

const TableParamsSchema = z.object({ table_id: UuidSchema });
const FolderParamsSchema = z.object({ folder_id: UuidSchema });
const tags = ['tables'];
const folderTags = ['table-folders'];

export const tableRoutes =
  ({ sql }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/tables/',
      {
        schema: {
          operationId: 'createTable',
          tags,
          summary: 'Create a table, owned by the caller, at the top level or in a folder',
          body: TableCreateSchema,
          response: { 201: TableSchema, 404: DetailBodySchema.describe('The folder is not in this workspace') },
        },
      },
      async (request, reply) => reply.code(201).send(await createTable(sql, tableCallerOf(request), request.body)),
    );

    app.get(
      '/tables/',
      {
        schema: {
          operationId: 'listTables',
          tags,
          summary: 'List tables: by folder, archived, favourites, or the trash',
          querystring: TableListQuerySchema,
          response: { 200: TableListSchema },
        },
      },
      async (request) => listTables(sql, tableCallerOf(request), request.query),
    );

    app.get(
      '/tables/unfiled/',
      {
        schema: {
          operationId: 'listUnfiledTables',
          tags,
          summary:
            'Tables that carried more than one tag when folders replaced tags, each with its former tags (endpoint 9)',
          description:
            'Moving such a table anywhere, the top level included (`PATCH /tables/{table_id}/` with `folder_id`), files it and it leaves this list.',
          response: { 200: UnfiledTableListSchema },
        },
      },
      async (request) => ({ tables: await listUnfiledTables(sql, tableCallerOf(request)) }),
    );

    app.get(
      '/tables/:table_id/',
      {
        schema: {
          operationId: 'readTable',
          tags,
          summary: 'Read a table (a deleted one is 404; see the trash)',
          params: TableParamsSchema,
          response: { 200: TableSchema },
        },
      },
      async (request) => {
        const table = await getTable(sql, tableCallerOf(request), request.params.table_id);
        if (!table) throw notFound('Table');
        return table;
      },
    );

    app.patch(
      '/tables/:table_id/',
      {
        schema: {
          operationId: 'updateTable',
          tags,
          summary: 'Rename, describe, archive, favourite, move to a folder, hand over, or change run settings',
          description:
            'A field left out keeps its value. `folder_id: null` moves to the top level; any move files a table waiting to be filed.',
          params: TableParamsSchema,
          body: TableUpdateSchema,
          response: {
            200: TableSchema,
            409: DetailBodySchema.describe('A favourite asked for by an API key with no member behind it'),
          },
        },
      },
      async (request) => {
        const table = await updateTable(sql, tableCallerOf(request), request.params.table_id, request.body);
        if (!table) throw notFound('Table');
        return table;
      },
    );

    app.post(
      '/tables/:table_id/viewed/',
      {
        schema: {
          operationId: 'recordTableView',
          tags,
          summary: 'Record that the caller opened the table (its last_viewed_at)',
          params: TableParamsSchema,
          response: { 200: TableSchema, 409: DetailBodySchema.describe('An API key with no member behind it') },
        },
      },
      async (request) => {
        const table = await recordTableView(sql, tableCallerOf(request), request.params.table_id);
        if (!table) throw notFound('Table');
        return table;
      },
    );

    app.delete(
      '/tables/:table_id/',
      {
        schema: {
          operationId: 'deleteTable',
          tags,
          summary: 'Delete a table: it goes to the trash (deleted_at) and can be restored',
          params: TableParamsSchema,
          response: { 204: z.null().describe('Deleted') },
        },
      },
      async (request, reply) => {
        if (!(await deleteTable(sql, principalOf(request).workspaceId, request.params.table_id)))
          throw notFound('Table');
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/tables/:table_id/restore/',
      {
        schema: {
          operationId: 'restoreTable',
          tags,
          summary: 'Bring a table back from the trash',
          params: TableParamsSchema,
          response: { 200: TableSchema, 409: DetailBodySchema.describe('The table is not in the trash') },
        },
      },
      async (request) => {
        const table = await restoreTable(sql, tableCallerOf(request), request.params.table_id);
        if (!table) throw notFound('Table');
        return table;
      },
    );

    app.post(
      '/table-folders/',
      {
        schema: {
          operationId: 'createTableFolder',
          tags: folderTags,
          summary: 'Create a folder at the top level or inside another',
          body: FolderCreateSchema,
          response: {
            201: FolderSchema,
            404: DetailBodySchema.describe('The parent folder is not in this workspace'),
            409: DetailBodySchema.describe('A sibling has that name, or the folder would nest too deep'),
          },
        },
      },
      async (request, reply) =>
        reply.code(201).send(await createFolder(sql, principalOf(request).workspaceId, request.body)),
    );

    app.get(
      '/table-folders/',
      {
        schema: {
          operationId: 'listTableFolders',
          tags: folderTags,
          summary: 'Every folder, in tree order, each with its path from the top level',
          response: { 200: FolderListSchema },
        },
      },
      async (request) => ({ folders: await listFolders(sql, principalOf(request).workspaceId) }),
    );

    app.get(
      '/table-folders/:folder_id/',
      {
        schema: {
          operationId: 'readTableFolder',
          tags: folderTags,
          summary: 'Read a folder',
          params: FolderParamsSchema,
          response: { 200: FolderSchema },
        },
      },
      async (request) => {
        const folder = await getFolder(sql, principalOf(request).workspaceId, request.params.folder_id);
        if (!folder) throw notFound('Folder');
        return folder;
      },
    );

    app.patch(
      '/table-folders/:folder_id/',
      {
        schema: {
          operationId: 'updateTableFolder',
          tags: folderTags,
          summary: 'Rename a folder or move it (null: to the top level)',
          params: FolderParamsSchema,
          body: FolderUpdateSchema,
          response: {
            200: FolderSchema,
            409: DetailBodySchema.describe('A sibling has that name, the move makes a loop, or it would nest too deep'),
          },
        },
      },
      async (request) => {
        const folder = await updateFolder(
          sql,
          principalOf(request).workspaceId,
          request.params.folder_id,
          request.body,
        );
        if (!folder) throw notFound('Folder');
        return folder;
      },
    );

    app.delete(
      '/table-folders/:folder_id/',
      {
        schema: {
          operationId: 'deleteTableFolder',
          tags: folderTags,
          summary: 'Delete an empty folder',
          params: FolderParamsSchema,
          response: {
            204: z.null().describe('Deleted'),
            409: DetailBodySchema.describe('The folder still holds tables or folders'),
          },
        },
      },
      async (request, reply) => {
        if (!(await deleteFolder(sql, principalOf(request).workspaceId, request.params.folder_id)))
          throw notFound('Folder');
        return reply.code(204).send(null);
      },
    );
  };
