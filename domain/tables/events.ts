/**
 * The grid's change feed (the interface spec's Events section; names and payloads ours):
 * server-sent events of one table's row and cell changes. Each event's id is the id of its change
 * in the change log, so a client that reconnects with Last-Event-ID gets every change after it
 * still kept (24 h).
 */
import { z } from 'zod';
import { UuidSchema } from '../shared/common.js';
import { cellStates } from './tables.js';

/** Changes are kept this long; a Last-Event-ID older than what is kept gets `reset`. */
export const tableChangeRetentionHours = 24;
/** A comment line this often keeps proxies from closing a quiet stream. */
export const tableEventsHeartbeatSeconds = 15;
/** What an EventSource waits before reconnecting (the `retry` field of the first event). */
export const tableEventsRetryMs = 3000;
/** Rows or cells one event lists at most (the migration's chunk): a larger write is several events. */
export const tableChangeChunk = 1000;

export const TableEventsQuerySchema = z.object({
  once: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true')
    .describe(
      'true: send the first event and every change already made after Last-Event-ID, then close the stream ' +
        '(for polling, and for HTTP tools that read a response to its end); false: keep the stream open',
    ),
});

export const TableEventsHeadersSchema = z.looseObject({
  'last-event-id': z
    .string()
    .regex(/^[0-9]{1,15}$/, 'must be the id of an event of this stream')
    .optional()
    .describe(
      'The id of the last event received: the stream continues after it (an EventSource sends it when it reconnects)',
    ),
});

// Each event's `data` is JSON; these describe it (the document says so with contentSchema).
const CellValueOutSchema = z
  .union([z.string(), z.number(), z.boolean(), z.null()])
  .describe('The new value; null: the cell was emptied');

const ReadyDataSchema = z.object({ table_id: UuidSchema });
const ResetDataSchema = z.object({
  table_id: UuidSchema,
  reason: z
    .enum(['expired', 'unknown'])
    .describe(
      'expired: changes after Last-Event-ID are past the retention window; unknown: this service never gave that id',
    ),
});
const RowIdsDataSchema = z.object({
  table_id: UuidSchema,
  row_ids: z.array(UuidSchema).min(1).max(tableChangeChunk).describe('In the grid’s insertion order'),
});
const RowsUpdatedDataSchema = z.object({
  table_id: UuidSchema,
  rows: z
    .array(
      z.object({
        id: UuidSchema,
        cells: z.record(UuidSchema, CellValueOutSchema).describe('Only the input cells that changed, by column id'),
      }),
    )
    .min(1)
    .max(tableChangeChunk),
});
const CellsUpdatedDataSchema = z.object({
  table_id: UuidSchema,
  cells: z
    .array(
      z.object({
        row_id: UuidSchema,
        column_id: UuidSchema,
        state: z.enum(cellStates),
        value: z.unknown().describe('The result once done; null otherwise'),
        error: z.string().nullable(),
        cost: z.int().describe('Credits the cell cost'),
      }),
    )
    .min(1)
    .max(tableChangeChunk)
    .describe('Computed cells as they are now (a formula computed again, a run moving a cell)'),
});

const ColumnsChangedDataSchema = z.object({
  table_id: UuidSchema,
  change: z
    .enum(['added', 'updated', 'deleted'])
    .describe('updated: a name, position or setting changed (adding one column moves the ones after it)'),
  column_ids: z.array(UuidSchema).min(1).describe('In column order; read the columns again for their settings'),
});
const ColumnRecomputedDataSchema = z.object({
  table_id: UuidSchema,
  column_id: UuidSchema.describe('Every cell of this column was computed again: read its cells again'),
});

export type TableEventData = {
  ready: z.infer<typeof ReadyDataSchema>;
  reset: z.infer<typeof ResetDataSchema>;
  rows_added: z.infer<typeof RowIdsDataSchema>;
  rows_deleted: z.infer<typeof RowIdsDataSchema>;
  rows_updated: z.infer<typeof RowsUpdatedDataSchema>;
  cells_updated: z.infer<typeof CellsUpdatedDataSchema>;
  columns_changed: z.infer<typeof ColumnsChangedDataSchema>;
  column_recomputed: z.infer<typeof ColumnRecomputedDataSchema>;
};
export type TableEventName = keyof TableEventData;

/** An event as Server-Sent Events frame it: the `data` string holds the JSON described by contentSchema. */
function eventSchema(event: TableEventName, data: z.ZodType, description: string) {
  const { $schema: _, ...contentSchema } = z.toJSONSchema(data, {
    target: 'draft-2020-12',
    io: 'output',
    unrepresentable: 'any',
  });
  return z
    .object({
      event: z.literal(event),
      id: z
        .string()
        .regex(/^[0-9]+$/)
        .describe('The change id: reconnect with it as Last-Event-ID'),
      data: z.string().meta({ contentMediaType: 'application/json', contentSchema }),
      retry: z.int().optional().describe('Milliseconds an EventSource waits before reconnecting (first event only)'),
    })
    .describe(description);
}

export const TableEventSchema = z
  .union([
    eventSchema(
      'ready',
      ReadyDataSchema,
      'First event: the stream is live from its id (Last-Event-ID when given, else the table as it is now)',
    ),
    eventSchema(
      'reset',
      ResetDataSchema,
      'First event instead of ready, or at any point: changes were lost to this stream; load the grid again, then apply what follows',
    ),
    eventSchema('rows_added', RowIdsDataSchema, 'Rows were added'),
    eventSchema('rows_updated', RowsUpdatedDataSchema, 'Input cells of rows changed'),
    eventSchema('rows_deleted', RowIdsDataSchema, 'Rows were deleted'),
    eventSchema('cells_updated', CellsUpdatedDataSchema, 'Computed cells changed'),
    eventSchema('columns_changed', ColumnsChangedDataSchema, 'Columns were added, changed or deleted'),
    eventSchema(
      'column_recomputed',
      ColumnRecomputedDataSchema,
      'A formula column was computed again over every row (it was added, or its formula or an input changed): one event instead of one per thousand cells',
    ),
  ])
  .meta({
    id: 'TableEvent',
    description:
      'One server-sent event of a table’s change feed. Events come in change order; a write of more than ' +
      `${tableChangeChunk} rows or cells is several events. Applying an event twice is harmless, so open the stream, ` +
      'then load the grid. Lines starting with ":" are heartbeats.',
  });
