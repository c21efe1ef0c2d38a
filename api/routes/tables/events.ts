/**
 * The grid's change feed (the interface spec's Events section): server-sent events of one table's
 * row and cell changes.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { UuidSchema } from '../../../domain/shared/common.js';
import {
  tableChangeChunk,
  tableChangeRetentionHours,
  TableEventSchema,
  TableEventsHeadersSchema,
  TableEventsQuerySchema,
  tableEventsHeartbeatSeconds,
} from '../../../domain/tables/events.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import type { TableEventHub } from '../../../services/tables/events.js';
import { requireTable } from '../../../store/tables/tables.js';

const TableParamsSchema = z.object({ table_id: UuidSchema });

export const tableEventRoutes =
  ({ sql }: AppDeps, hub: TableEventHub): FastifyPluginAsyncZod =>
  async (app) => {
    app.addHook('onReady', async () => hub.startPruning());
    // Before the server waits for its connections to end: open streams would keep it waiting.
    app.addHook('preClose', async () => hub.close());

    app.get(
      '/tables/:table_id/events/',
      {
        schema: {
          operationId: 'streamTableEvents',
          tags: ['table-rows'],
          summary: 'The grid’s change feed: server-sent events of row, cell and column changes, live',
          description:
            'text/event-stream. The first event is `ready` (or `reset`), then one event per change in change order: `rows_added`, ' +
            '`rows_updated` (the input cells that changed), `rows_deleted`, `cells_updated` (computed cells), `columns_changed` ' +
            '(columns added, changed or deleted), `column_recomputed` (a formula column computed again over every row: read its ' +
            'cells again); a write of more than ' +
            `${tableChangeChunk} rows or cells is several events. Each event's id is its change id: a client that reconnects with ` +
            `Last-Event-ID gets every change after it, from any API process. Changes are kept ${tableChangeRetentionHours} h; ` +
            'a Last-Event-ID older than that gets `reset`: load the grid again. Open the stream before loading the grid ' +
            `(applying a change twice is harmless). A comment line every ${tableEventsHeartbeatSeconds} s keeps proxies from ` +
            'closing a quiet stream. `once=true` sends what is there and closes.',
          params: TableParamsSchema,
          querystring: TableEventsQuerySchema,
          headers: TableEventsHeadersSchema,
          response: {
            200: {
              description: 'The event stream; each event is described by TableEvent',
              content: { 'text/event-stream': { schema: TableEventSchema } },
            },
          },
        },
      },
      async (request, reply) => {
        const { workspaceId } = principalOf(request);
        await requireTable(sql, workspaceId, request.params.table_id);
        const lastEventId = request.headers['last-event-id'];
        const done = new AbortController();
        // Also ends a HEAD request's stream, which Fastify would otherwise read forever.
        reply.raw.once('close', () => done.abort());
        const stream = await hub.open(request.params.table_id, {
          lastEventId: lastEventId === undefined ? undefined : Number(lastEventId),
          once: request.query.once,
          signal: done.signal,
        });
        return (
          reply
            .type('text/event-stream; charset=utf-8')
            .header('cache-control', 'no-cache, no-transform')
            // nginx and similar proxies buffer responses unless told not to.
            .header('x-accel-buffering', 'no')
            .send(stream as never)
        );
      },
    );
  };
