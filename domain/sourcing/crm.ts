/**
 * CRM connections, imports (a CRM object set or a CSV at an address) with column mappings, import
 * runs, recurring import schedules and write-backs (decision 042). Pure schemas and rules.
 */
import { z } from 'zod';
import { textOf } from '../shared/text.js';
import { lineSchema, NameSchema, queryInteger, textSchema, TimestampSchema, UuidSchema } from '../shared/common.js';

export const CrmObjectTypeSchema = z.enum(['contacts', 'companies']);
export type CrmObjectType = z.infer<typeof CrmObjectTypeSchema>;

const PropertyNameSchema = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[a-z0-9_]+$/i, 'must be a CRM property name (letters, digits, underscores)');

// ---------------------------------------------------------------------------------------------
// Connections

export const CrmConnectionCreateSchema = z
  .strictObject({
    name: NameSchema,
    access_token: z
      .string()
      .min(8)
      .max(512)
      .regex(/^[\x21-\x7e]+$/, 'must be a token without spaces')
      .describe("A private app's access token; checked against the CRM, then stored encrypted, never shown again"),
  })
  .meta({ id: 'CrmConnectionCreate' });

export const CrmConnectionSchema = z
  .object({
    id: UuidSchema,
    provider: z.literal('hubspot'),
    name: z.string(),
    auth_kind: z.enum(['private_app', 'oauth']),
    account_id: z.string().nullable().describe("The CRM account (HubSpot's portal id)"),
    status: z.enum(['connected', 'reconnect_required']),
    last_error: z.string().nullable(),
    created_at: TimestampSchema,
  })
  .meta({ id: 'CrmConnection', description: 'A connected CRM; never its token' });
export const CrmConnectionListSchema = z.object({ connections: z.array(CrmConnectionSchema) });

// ---------------------------------------------------------------------------------------------
// Imports

export const importMappingMax = 50;
export const importFiltersMax = 5;

export const ImportMappingSchema = z
  .array(
    z.strictObject({
      source: textSchema(1, 255).describe('A CRM property name, or a CSV header'),
      column_name: NameSchema.describe('The input column it fills (made when the table has none of that name)'),
    }),
  )
  .min(1)
  .max(importMappingMax)
  .refine(
    (m) => new Set(m.map((x) => x.column_name.toLowerCase())).size === m.length,
    'each column is filled from one source',
  );

export const CrmFilterSchema = z.strictObject({
  property: PropertyNameSchema,
  operator: z.enum(['EQ', 'NEQ', 'GT', 'GTE', 'LT', 'LTE', 'CONTAINS_TOKEN', 'HAS_PROPERTY', 'NOT_HAS_PROPERTY']),
  value: textSchema(0, 500).optional(),
});

export const ImportCreateSchema = z
  .discriminatedUnion('source', [
    z.strictObject({
      source: z.literal('crm'),
      name: NameSchema,
      connection_id: UuidSchema,
      object_type: CrmObjectTypeSchema,
      list_id: z
        .string()
        .min(1)
        .max(64)
        .regex(/^[A-Za-z0-9_-]+$/)
        .optional()
        .describe('Import the members of this list; omit to import the object set the filters select'),
      filters: z
        .array(CrmFilterSchema)
        .max(importFiltersMax)
        .default([])
        .describe(`All must hold (at most ${importFiltersMax})`),
      mapping: ImportMappingSchema,
      key_field: PropertyNameSchema.default('hs_object_id').describe(
        "The property whose value keys a row (the CRM's record id by default)",
      ),
      run_now: z.boolean().default(true),
    }),
    z.strictObject({
      source: z.literal('csv_url'),
      name: NameSchema,
      csv_url: lineSchema(1, 2048).describe(
        'An http or https address on the public internet, read with the page reader’s address checks',
      ),
      mapping: ImportMappingSchema,
      key_field: textSchema(1, 255).describe('The CSV header whose value keys a row'),
      run_now: z.boolean().default(true),
    }),
  ])
  .meta({ id: 'ImportCreate' });
export type ImportCreate = z.infer<typeof ImportCreateSchema>;

export const ImportRunSchema = z
  .object({
    id: UuidSchema,
    trigger: z.enum(['manual', 'schedule']),
    status: z.enum(['running', 'succeeded', 'failed']),
    records_read: z.int(),
    rows_created: z.int(),
    rows_updated: z.int(),
    rows_unchanged: z.int(),
    rows_rejected: z.int(),
    watermark_from: TimestampSchema.nullable(),
    watermark_to: TimestampSchema.nullable(),
    error: z.string().nullable(),
    started_at: TimestampSchema,
    finished_at: TimestampSchema.nullable(),
  })
  .meta({ id: 'ImportRun' });
export type ImportRun = z.infer<typeof ImportRunSchema>;

export const ImportSchema = z
  .object({
    id: UuidSchema,
    table_id: UuidSchema,
    name: z.string(),
    source: z.enum(['crm', 'csv_url']),
    connection_id: UuidSchema.nullable(),
    object_type: CrmObjectTypeSchema.nullable(),
    list_id: z.string().nullable(),
    filters: z.array(CrmFilterSchema),
    csv_url: z.string().nullable(),
    mapping: z.array(z.object({ source: z.string(), column_name: z.string() })),
    key_field: z.string(),
    watermark: TimestampSchema.nullable().describe('Records changed at or after this are read by the next run'),
    schedule_id: UuidSchema.nullable(),
    created_at: TimestampSchema,
    runs: z.array(ImportRunSchema).describe('The latest runs, newest first (at most 10)'),
  })
  .meta({ id: 'Import' });
export type Import = z.infer<typeof ImportSchema>;
export const ImportListSchema = z.object({ imports: z.array(ImportSchema) });

// ---------------------------------------------------------------------------------------------
// Schedules

export const scheduleIntervalMin = 60;
export const scheduleIntervalMax = 31 * 24 * 3600;

export const ImportScheduleCreateSchema = z
  .strictObject({
    import_id: UuidSchema,
    interval_seconds: z
      .int()
      .min(scheduleIntervalMin)
      .max(scheduleIntervalMax)
      .describe(`How often it runs (${scheduleIntervalMin} s to 31 days)`),
    catchup_window_seconds: z
      .int()
      .min(60)
      .max(scheduleIntervalMax)
      .default(3600)
      .describe('A run missed while the service was down is still made up within this window'),
    paused: z.boolean().default(false),
  })
  .meta({ id: 'ImportScheduleCreate' });

export const ImportScheduleSchema = z
  .object({
    id: UuidSchema,
    import_id: UuidSchema,
    table_id: UuidSchema,
    interval_seconds: z.int(),
    catchup_window_seconds: z.int(),
    overlap: z.literal('skip').describe('A run due while the last one still runs is skipped'),
    paused: z.boolean(),
    next_run_times: z
      .array(TimestampSchema)
      .describe('The next runs as the Temporal Schedule plans them (none while paused)'),
    schedule_id: z.string().describe('The Temporal Schedule id'),
    created_at: TimestampSchema,
  })
  .meta({ id: 'ImportSchedule' });
export type ImportSchedule = z.infer<typeof ImportScheduleSchema>;
export const ImportScheduleListSchema = z.object({ schedules: z.array(ImportScheduleSchema) });

export const importScheduleIdOf = (id: string) => `import-schedule/${id}`;

// ---------------------------------------------------------------------------------------------
// Write-backs

export const writeBackRowsMax = 100_000;

export const WriteBackCreateSchema = z
  .strictObject({
    connection_id: UuidSchema,
    object_type: CrmObjectTypeSchema,
    id_property: PropertyNameSchema.describe(
      'The unique property records are matched by (email for contacts, domain for companies)',
    ),
    mapping: z
      .array(z.strictObject({ column_id: UuidSchema, property: PropertyNameSchema }))
      .min(1)
      .max(importMappingMax)
      .refine(
        (m) => new Set(m.map((x) => x.property.toLowerCase())).size === m.length,
        'each property is written from one column',
      ),
    row_ids: z
      .array(UuidSchema)
      .min(1)
      .max(1000)
      .optional()
      .describe('Only these rows; every row of the table when omitted'),
    result_column_name: NameSchema.optional().describe(
      "An input column (made when missing) that receives each row's result in words",
    ),
  })
  .meta({ id: 'WriteBackCreate' });
export type WriteBackCreate = z.infer<typeof WriteBackCreateSchema>;

export const WriteBackSchema = z
  .object({
    id: UuidSchema,
    table_id: UuidSchema,
    connection_id: UuidSchema,
    object_type: CrmObjectTypeSchema,
    id_property: z.string(),
    status: z.enum(['running', 'succeeded', 'failed']),
    rows_total: z.int(),
    rows_written: z.int(),
    rows_unchanged: z.int().describe('Rows whose values the CRM already has from the last write: not sent again'),
    rows_failed: z.int(),
    error: z.string().nullable(),
    created_at: TimestampSchema,
    finished_at: TimestampSchema.nullable(),
  })
  .meta({ id: 'WriteBack' });
export type WriteBack = z.infer<typeof WriteBackSchema>;

export const WriteBackRowSchema = z
  .object({
    row_id: UuidSchema,
    result: z.enum(['written', 'unchanged', 'failed']),
    object_id: z.string().nullable(),
    error: z.string().nullable(),
  })
  .meta({ id: 'WriteBackRow' });
export const WriteBackRowPageSchema = z.object({ rows: z.array(WriteBackRowSchema), total_count: z.int() });
export const WriteBackRowQuerySchema = z.object({
  result: z.enum(['written', 'unchanged', 'failed']).optional(),
  limit: queryInteger(z.int().min(1).max(500).default(100)),
  offset: queryInteger(z.int().min(0).max(1_000_000).default(0)),
});

/** A cell value as a CRM property value (text); null for an empty cell. */
export function propertyValue(value: unknown): string | null {
  if (value === null || value === undefined || value === '') return null;
  return textOf(value);
}
