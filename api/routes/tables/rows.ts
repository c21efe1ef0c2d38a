/**
 * A table's rows: single and bulk writes, the grid read (paging, filters and sorts on any
 * column, saved views), and CSV upload and export, both streamed.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { validatorCompiler } from 'fastify-type-provider-zod';
import { Readable } from 'node:stream';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { ApiError, notFound } from '../../../domain/shared/errors.js';
import {
  BulkRowsCreateSchema,
  BulkRowsDeleteSchema,
  BulkRowsResultSchema,
  BulkRowsUpdateSchema,
  CsvImportQuerySchema,
  CsvImportReportSchema,
  countExactMax,
  csvBytesMax,
  RowListQuerySchema,
  RowPageSchema,
  RowQuerySchema,
  RowSchema,
  RowWriteSchema,
} from '../../../domain/tables/tables.js';
import { runNewRows } from '../../../services/tables/column-runs.js';
import { runNewAgentRows } from '../../../services/agents/agent-run-client.js';
import { wakeFeedsOfTable } from '../../../services/sequences/sequence-client.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { exportCsv, importCsv } from '../../../services/tables/csv.js';
import {
  bulkCreateRows,
  bulkDeleteRows,
  bulkUpdateRows,
  createRow,
  deleteRow,
  getRow,
  listRows,
  updateRow,
} from '../../../store/tables/rows.js';
import { requireTable } from '../../../store/tables/tables.js';

const TableParamsSchema = z.object({ table_id: UuidSchema });
const RowParamsSchema = z.object({ table_id: UuidSchema, row_id: UuidSchema });
const tags = ['table-rows'];
const cellConflict = DetailBodySchema.describe('A cell names a column the table does not have, or a computed column');
const gridConflict = DetailBodySchema.describe('A filter or sort names a column the table does not have');
const pageConflict = DetailBodySchema.describe(
  'A filter or sort names a column the table does not have, or `after` is not a next_cursor of this grid and its sorts',
);

export const tableRowRoutes =
  ({ sql, temporal, integrations }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const feedPollSeconds = integrations.sequenceFeedPollSeconds;
    // An upload is handed to the route as the request stream itself, so it is never held whole.
    app.addContentTypeParser('text/csv', (_request, payload, done) => done(null, payload));

    app.post(
      '/tables/:table_id/rows/',
      {
        schema: {
          operationId: 'createTableRow',
          tags,
          summary: 'Add a row; its formula cells are computed at once',
          params: TableParamsSchema,
          body: RowWriteSchema,
          response: { 201: RowSchema, 409: cellConflict },
        },
      },
      async (request, reply) => {
        const row = await createRow(sql, principalOf(request).workspaceId, request.params.table_id, request.body.cells);
        await runNewRows(
          { sql, temporal, enrichmentProviders: integrations.enrichmentProviders, log: request.log },
          principalOf(request).workspaceId,
          request.params.table_id,
          1,
        );
        await runNewAgentRows(
          { sql, temporal, agentSuppliers: integrations.agentSuppliers, log: request.log },
          principalOf(request).workspaceId,
          request.params.table_id,
          1,
        );
        await wakeFeedsOfTable(
          { sql, temporal, log: request.log, feedPollSeconds },
          principalOf(request).workspaceId,
          request.params.table_id,
          1,
        );
        return reply.code(201).send(row);
      },
    );

    app.get(
      '/tables/:table_id/rows/',
      {
        schema: {
          operationId: 'listTableRows',
          tags,
          summary: 'A page of the grid: filters and sorts on any column, or a saved view',
          description:
            'Pages by `limit`/`offset`, or by keyset: pass a page’s `next_cursor` as `after` to get the page after ' +
            'it, as fast deep in the grid as at its start (an offset still reads every row it skips). The cursor ' +
            'holds the last row’s sort values and is opaque; it fits only the grid and sorts it was made with (409 otherwise); ' +
            `filters may change between pages. With filters, \`total_count\` is counted up to ${countExactMax.toLocaleString('en-US')} matches; past that ` +
            '`total_count_exact` is false. Sorting a large table by one input column builds an index for that ' +
            'column in the background; until it is ready, such pages are read without it.',
          params: TableParamsSchema,
          querystring: RowListQuerySchema,
          response: { 200: RowPageSchema, 409: pageConflict },
        },
      },
      async (request) => listRows(sql, principalOf(request).workspaceId, request.params.table_id, request.query),
    );

    app.post(
      '/tables/:table_id/rows/bulk/',
      {
        schema: {
          operationId: 'createTableRowsBulk',
          tags,
          summary: 'Add up to 1000 rows; each is answered on its own, and a bad row never stops the others',
          params: TableParamsSchema,
          body: BulkRowsCreateSchema,
          response: { 200: BulkRowsResultSchema },
        },
      },
      async (request) => {
        const result = await bulkCreateRows(
          sql,
          principalOf(request).workspaceId,
          request.params.table_id,
          request.body.rows,
        );
        await runNewRows(
          { sql, temporal, enrichmentProviders: integrations.enrichmentProviders, log: request.log },
          principalOf(request).workspaceId,
          request.params.table_id,
          result.succeeded,
        );
        await runNewAgentRows(
          { sql, temporal, agentSuppliers: integrations.agentSuppliers, log: request.log },
          principalOf(request).workspaceId,
          request.params.table_id,
          result.succeeded,
        );
        await wakeFeedsOfTable(
          { sql, temporal, log: request.log, feedPollSeconds },
          principalOf(request).workspaceId,
          request.params.table_id,
          result.succeeded,
        );
        return result;
      },
    );

    app.patch(
      '/tables/:table_id/rows/bulk/',
      {
        schema: {
          operationId: 'updateTableRowsBulk',
          tags,
          summary: 'Change cells of up to 1000 rows; each is answered on its own',
          params: TableParamsSchema,
          body: BulkRowsUpdateSchema,
          response: { 200: BulkRowsResultSchema },
        },
      },
      async (request) =>
        bulkUpdateRows(sql, principalOf(request).workspaceId, request.params.table_id, request.body.rows),
    );

    app.post(
      '/tables/:table_id/rows/bulk-delete/',
      {
        schema: {
          operationId: 'deleteTableRowsBulk',
          tags,
          summary: 'Delete up to 1000 rows; each is answered on its own',
          params: TableParamsSchema,
          body: BulkRowsDeleteSchema,
          response: { 200: BulkRowsResultSchema },
        },
      },
      async (request) =>
        bulkDeleteRows(sql, principalOf(request).workspaceId, request.params.table_id, request.body.row_ids),
    );

    app.get(
      '/tables/:table_id/rows/:row_id/',
      {
        schema: {
          operationId: 'readTableRow',
          tags,
          summary: 'Read a row',
          params: RowParamsSchema,
          response: { 200: RowSchema },
        },
      },
      async (request) => getRow(sql, principalOf(request).workspaceId, request.params.table_id, request.params.row_id),
    );

    app.patch(
      '/tables/:table_id/rows/:row_id/',
      {
        schema: {
          operationId: 'updateTableRow',
          tags,
          summary: 'Change some cells of a row (null empties one); its formulas are computed again',
          params: RowParamsSchema,
          body: RowWriteSchema,
          response: { 200: RowSchema, 409: cellConflict },
        },
      },
      async (request) =>
        updateRow(
          sql,
          principalOf(request).workspaceId,
          request.params.table_id,
          request.params.row_id,
          request.body.cells,
        ),
    );

    app.delete(
      '/tables/:table_id/rows/:row_id/',
      {
        schema: {
          operationId: 'deleteTableRow',
          tags,
          summary: 'Delete a row',
          params: RowParamsSchema,
          response: { 204: z.null().describe('Deleted') },
        },
      },
      async (request, reply) => {
        if (!(await deleteRow(sql, principalOf(request).workspaceId, request.params.table_id, request.params.row_id)))
          throw notFound('Row');
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/tables/:table_id/csv/',
      {
        // The body is the raw stream, checked line by line as it is read; only the path and the
        // query go through the schemas.
        validatorCompiler: (route) =>
          route.httpPart === 'body' ? (data: unknown) => ({ value: data }) : validatorCompiler(route as never),
        schema: {
          operationId: 'importTableCsv',
          tags,
          summary:
            'Upload a CSV (text/csv, up to 50 MiB) as new rows; the answer lists rejected lines while every good line lands',
          description:
            'The first line is the header. A field goes to the column `map` names for its number, else to the column named like its header (case ignored), ' +
            'else to a new input column (`unmapped=create`) or nowhere (`unmapped=skip`). Quoted fields may hold delimiters, quotes (doubled) and line breaks; ' +
            'a byte order mark and any line ending are accepted; empty lines are passed over. A line with the wrong number of fields, ' +
            'a field over 10,000 characters or a NUL is rejected with its line number (where the record starts). ' +
            'Nothing is written when the upload is refused as a whole (413, 409).',
          consumes: ['text/csv'],
          params: TableParamsSchema,
          querystring: CsvImportQuerySchema,
          // Any bytes are a CSV to read (bad lines are reported, not refused), so the schema constrains nothing.
          body: z.any().describe('CSV text, UTF-8'),
          response: {
            200: CsvImportReportSchema,
            409: DetailBodySchema.describe(
              'A mapped column is computed or unknown, a mapped field is past the header, or the new columns would pass the most a table has',
            ),
            413: DetailBodySchema.describe('The upload is larger than 50 MiB'),
            415: DetailBodySchema.describe('The body is not text/csv'),
          },
        },
      },
      async (request) => {
        const { workspaceId } = principalOf(request);
        const raw: unknown = request.body;
        const body = raw instanceof Readable ? raw : undefined;
        try {
          await requireTable(sql, workspaceId, request.params.table_id);
          if (!body)
            throw new ApiError('unsupported_media_type', 'Send the file as the body with Content-Type: text/csv.');
          if (Number(request.headers['content-length'] ?? 0) > csvBytesMax) {
            throw new ApiError('payload_too_large', `A CSV upload is at most ${csvBytesMax} bytes (50 MiB).`);
          }
        } catch (error) {
          body?.resume(); // unread, so the connection stays usable for the answer
          throw error;
        }
        const report = await importCsv(sql, workspaceId, request.params.table_id, body, request.query);
        await runNewRows(
          { sql, temporal, enrichmentProviders: integrations.enrichmentProviders, log: request.log },
          workspaceId,
          request.params.table_id,
          report.rows_added,
        );
        await runNewAgentRows(
          { sql, temporal, agentSuppliers: integrations.agentSuppliers, log: request.log },
          workspaceId,
          request.params.table_id,
          report.rows_added,
        );
        await wakeFeedsOfTable(
          { sql, temporal, log: request.log, feedPollSeconds },
          workspaceId,
          request.params.table_id,
          report.rows_added,
        );
        return report;
      },
    );

    app.get(
      '/tables/:table_id/csv/',
      {
        schema: {
          operationId: 'exportTableCsv',
          tags,
          summary: 'Download the grid as CSV, streamed: the visible columns in order and the values a person sees',
          description:
            'A saved view, or filters and sorts as in the grid read, choose and order the rows. A computed cell in error reads `#ERROR`; one not done yet is empty.',
          params: TableParamsSchema,
          querystring: RowQuerySchema,
          response: {
            200: {
              description: 'CSV text, UTF-8, a header line first',
              content: { 'text/csv': { schema: z.string() } },
            },
            409: gridConflict,
          },
        },
      },
      async (request, reply) => {
        const stream = await exportCsv(sql, principalOf(request).workspaceId, request.params.table_id, request.query);
        return reply
          .type('text/csv; charset=utf-8')
          .header('content-disposition', 'attachment; filename="table.csv"')
          .send(stream as never);
      },
    );
  };
