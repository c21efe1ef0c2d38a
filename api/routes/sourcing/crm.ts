/**
 * CRM connections (/integrations/crm/connections/), a table's imports (/tables/{table_id}/imports/)
 * and write-backs (/tables/{table_id}/write-backs/) (decision 042). No answer carries a token.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { notFound } from '../../../domain/shared/errors.js';
import {
  CrmConnectionCreateSchema,
  CrmConnectionListSchema,
  CrmConnectionSchema,
  ImportCreateSchema,
  ImportListSchema,
  ImportSchema,
  WriteBackCreateSchema,
  WriteBackRowPageSchema,
  WriteBackRowQuerySchema,
  WriteBackSchema,
} from '../../../domain/sourcing/crm.js';
import { connectCrm } from '../../../services/sourcing/crm.js';
import { createImport, createWriteBack, startImportRun } from '../../../services/sourcing/imports.js';
import {
  deleteCrmConnection,
  deleteImport,
  getCrmConnection,
  getImport,
  getWriteBack,
  listCrmConnections,
  listImports,
  listWriteBackRows,
  shownConnection,
  toImports,
  toWriteBack,
} from '../../../store/sourcing/crm.js';
import { requireTable } from '../../../store/tables/tables.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { deleteImportSchedule } from '../../../services/sourcing/schedules.js';

const tags = ['sourcing'];
const ConnectionParams = z.object({ connection_id: UuidSchema });
const TableParams = z.object({ table_id: UuidSchema });
const ImportParams = z.object({ table_id: UuidSchema, import_id: UuidSchema });
const WriteBackParams = z.object({ table_id: UuidSchema, write_back_id: UuidSchema });
const noTable = DetailBodySchema.describe("No table with this id in the caller's workspace");

export const crmRoutes =
  ({ sql, temporal, integrations }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/integrations/crm/connections/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'createCrmConnection',
          tags,
          summary:
            "Connect a HubSpot-shaped CRM with a private app's token: checked against the CRM, stored encrypted, never shown again",
          body: CrmConnectionCreateSchema,
          response: {
            201: CrmConnectionSchema,
            409: DetailBodySchema.describe('The workspace already has a connection of this name'),
            502: DetailBodySchema.describe('The CRM could not be reached to check the token'),
          },
        },
      },
      async (request, reply) =>
        reply.code(201).send(shownConnection(await connectCrm(sql, integrations, principalOf(request), request.body))),
    );

    app.get(
      '/integrations/crm/connections/',
      {
        schema: {
          operationId: 'listCrmConnections',
          tags,
          summary: "The workspace's CRM connections (never their tokens)",
          response: { 200: CrmConnectionListSchema },
        },
      },
      async (request) => ({
        connections: (await listCrmConnections(sql, principalOf(request).workspaceId)).map(shownConnection),
      }),
    );

    app.get(
      '/integrations/crm/connections/:connection_id/',
      {
        schema: {
          operationId: 'getCrmConnection',
          tags,
          summary: 'A CRM connection (never its token)',
          params: ConnectionParams,
          response: {
            200: CrmConnectionSchema,
            404: DetailBodySchema.describe("No CRM connection with this id in the caller's workspace"),
          },
        },
      },
      async (request) => {
        const c = await getCrmConnection(sql, principalOf(request).workspaceId, request.params.connection_id);
        if (!c) throw notFound('CRM connection');
        return shownConnection(c);
      },
    );

    app.delete(
      '/integrations/crm/connections/:connection_id/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'deleteCrmConnection',
          tags,
          summary: 'Disconnect a CRM: its stored token is deleted, with the imports and write-backs that use it',
          params: ConnectionParams,
          response: {
            204: z.null().describe('Deleted'),
            404: DetailBodySchema.describe("No CRM connection with this id in the caller's workspace"),
          },
        },
      },
      async (request, reply) => {
        if (!(await deleteCrmConnection(sql, principalOf(request).workspaceId, request.params.connection_id)))
          throw notFound('CRM connection');
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/tables/:table_id/imports/',
      {
        schema: {
          operationId: 'createImport',
          tags,
          summary:
            'Import a CRM list or filtered object set, or a CSV at an address, into the table through a column mapping',
          description:
            'Rows are keyed by `key_field` (the CRM record id by default, a CSV column for a CSV): a record landed before updates its row, never adds another. ' +
            'Each run reads only what changed since the last (a watermark on the CRM change time; an unchanged CSV reads nothing). ' +
            '`run_now` (default true) starts a run at once. Recurring runs: POST /import-schedules/.',
          params: TableParams,
          body: ImportCreateSchema,
          response: {
            201: ImportSchema,
            404: DetailBodySchema.describe('No table, or no CRM connection, with this id in the caller’s workspace'),
            409: DetailBodySchema.describe('A mapped column of that name is computed'),
          },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const { imp } = await createImport(sql, temporal, principal, request.params.table_id, request.body);
        const [shown] = await toImports(sql, [(await getImport(sql, principal.workspaceId, null, imp.id))!]);
        return reply.code(201).send(shown!);
      },
    );

    app.get(
      '/tables/:table_id/imports/',
      {
        schema: {
          operationId: 'listImports',
          tags,
          summary: "The table's imports with their latest runs",
          params: TableParams,
          response: { 200: ImportListSchema, 404: noTable },
        },
      },
      async (request) => {
        const { workspaceId } = principalOf(request);
        await requireTable(sql, workspaceId, request.params.table_id);
        return { imports: await toImports(sql, await listImports(sql, workspaceId, request.params.table_id)) };
      },
    );

    app.get(
      '/tables/:table_id/imports/:import_id/',
      {
        schema: {
          operationId: 'getImport',
          tags,
          summary: 'An import with its watermark and latest runs',
          params: ImportParams,
          response: {
            200: ImportSchema,
            404: DetailBodySchema.describe("No such import of this table in the caller's workspace"),
          },
        },
      },
      async (request) => {
        const imp = await getImport(
          sql,
          principalOf(request).workspaceId,
          request.params.table_id,
          request.params.import_id,
        );
        if (!imp) throw notFound('Import');
        return (await toImports(sql, [imp]))[0]!;
      },
    );

    app.post(
      '/tables/:table_id/imports/:import_id/runs/',
      {
        schema: {
          operationId: 'runImport',
          tags,
          summary: 'Run the import now: it reads what changed since the last run',
          params: ImportParams,
          response: {
            202: z.object({ run_id: UuidSchema, detail: z.string() }),
            404: DetailBodySchema.describe("No such import of this table in the caller's workspace"),
          },
        },
      },
      async (request, reply) => {
        const imp = await getImport(
          sql,
          principalOf(request).workspaceId,
          request.params.table_id,
          request.params.import_id,
        );
        if (!imp) throw notFound('Import');
        const runId = await startImportRun(temporal, imp);
        return reply.code(202).send({ run_id: runId, detail: 'The run started; it is listed in the import’s runs.' });
      },
    );

    app.delete(
      '/tables/:table_id/imports/:import_id/',
      {
        schema: {
          operationId: 'deleteImport',
          tags,
          summary: 'Delete the import and its schedule (rows it landed stay)',
          params: ImportParams,
          response: {
            204: z.null().describe('Deleted'),
            404: DetailBodySchema.describe("No such import of this table in the caller's workspace"),
          },
        },
      },
      async (request, reply) => {
        const { workspaceId } = principalOf(request);
        const imp = await getImport(sql, workspaceId, request.params.table_id, request.params.import_id);
        if (!imp) throw notFound('Import');
        if (imp.schedule_id) await deleteImportSchedule(sql, temporal, workspaceId, imp.schedule_id);
        await deleteImport(sql, workspaceId, request.params.table_id, imp.id);
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/tables/:table_id/write-backs/',
      {
        schema: {
          operationId: 'createWriteBack',
          tags,
          summary: "Write the table's rows back to the CRM: batch upserts by an id property, a result per row",
          description:
            'Rows go in batches of 100, upserted by `id_property`. A row the CRM refuses fails alone (its error is its result); the others are written. ' +
            'A row whose values the CRM already has from the last write-back is `unchanged` and not sent again. With `result_column_name`, each row’s result is also written to that column.',
          params: TableParams,
          body: WriteBackCreateSchema,
          response: {
            202: WriteBackSchema,
            404: DetailBodySchema.describe('No table, or no CRM connection, with this id in the caller’s workspace'),
            409: DetailBodySchema.describe('The result column is computed, or is also mapped'),
          },
        },
      },
      async (request, reply) =>
        reply
          .code(202)
          .send(
            toWriteBack(
              await createWriteBack(sql, temporal, principalOf(request), request.params.table_id, request.body),
            ),
          ),
    );

    app.get(
      '/tables/:table_id/write-backs/:write_back_id/',
      {
        schema: {
          operationId: 'getWriteBack',
          tags,
          summary: 'A write-back with its counts',
          params: WriteBackParams,
          response: {
            200: WriteBackSchema,
            404: DetailBodySchema.describe("No such write-back of this table in the caller's workspace"),
          },
        },
      },
      async (request) => {
        const w = await getWriteBack(
          sql,
          principalOf(request).workspaceId,
          request.params.table_id,
          request.params.write_back_id,
        );
        if (!w) throw notFound('Write-back');
        return toWriteBack(w);
      },
    );

    app.get(
      '/tables/:table_id/write-backs/:write_back_id/rows/',
      {
        schema: {
          operationId: 'listWriteBackRows',
          tags,
          summary: "Each row's result: written (with the CRM record id), unchanged, or failed with why",
          params: WriteBackParams,
          querystring: WriteBackRowQuerySchema,
          response: {
            200: WriteBackRowPageSchema,
            404: DetailBodySchema.describe("No such write-back of this table in the caller's workspace"),
          },
        },
      },
      async (request) => {
        const w = await getWriteBack(
          sql,
          principalOf(request).workspaceId,
          request.params.table_id,
          request.params.write_back_id,
        );
        if (!w) throw notFound('Write-back');
        return listWriteBackRows(sql, w.id, request.query);
      },
    );
  };
