/**
 * Enrichment providers (interface spec: Enrichment provider; listEnrichmentProviders) and the runs
 * that fill enrichment columns. A provider is one small contract: it declares its input, output and
 * option fields and turns one row's inputs into output values. Implementations live in
 * activities/enrichment-providers/; the run engine (workflows/column-run.ts) knows only this
 * contract, so a new provider touches nothing else.
 */
import { z } from 'zod';
import { NameSchema, queryInteger, textSchema, TimestampSchema, UuidSchema } from '../shared/common.js';
import type { CellValue } from './tables.js';

// ---------------------------------------------------------------------------------------------
// The provider contract

export const providerCredentials = ['platform', 'workspace'] as const;
export type ProviderCredentials = (typeof providerCredentials)[number];

export interface EnrichmentInputField {
  name: string;
  description: string;
  required: boolean;
}
export interface EnrichmentOutputField {
  name: string;
  description: string;
  type: 'text' | 'number' | 'boolean';
}
export interface EnrichmentOptionField {
  name: string;
  description: string;
  required: boolean;
  max_length: number;
}

export interface EnrichmentProviderInfo {
  key: string;
  display_name: string;
  description: string;
  /** Whose account the provider spends: the platform's, or the workspace's own. */
  credentials: ProviderCredentials;
  inputs: EnrichmentInputField[];
  /** Inputs may also be mapped under names of the column's choosing (a formula or prompt reads them as {name}). */
  named_inputs: boolean;
  outputs: EnrichmentOutputField[];
  options: EnrichmentOptionField[];
  /** Credits a row costs when the provider returns a result; an empty result or a failure costs nothing. */
  price_credits: number;
  /** Rows of one run in flight at once. */
  concurrency: number;
  /** One call's time limit. */
  timeout_seconds: number;
}

export type EnrichmentValue = string | number | boolean | null;

/** What a provider answers for one row: values by output field, or nothing found. */
export type EnrichmentOutcome =
  { kind: 'result'; values: Record<string, EnrichmentValue> } | { kind: 'empty'; reason: string };

export interface EnrichmentRequest {
  /** Input values by input name: every mapped input, null when its cell is empty. */
  inputs: ReadonlyMap<string, CellValue>;
  options: ReadonlyMap<string, string>;
}

export interface EnrichmentProvider {
  info: EnrichmentProviderInfo;
  /** Throws EnrichmentError; anything else counts as a retryable failure. */
  run(request: EnrichmentRequest, signal: AbortSignal): Promise<EnrichmentOutcome>;
}

/** A provider's failure: retryable ones (timeouts, 5xx, rate limits) are tried again, the others end the cell in error. */
export class EnrichmentError extends Error {
  override name = 'EnrichmentError';
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

/** Keys of providers and names of their fields: what a `{name}` reference can hold. */
export const fieldNamePattern = /^[A-Za-z_][A-Za-z0-9_]{0,99}$/;
/** At most 64 characters: a key travels in a path, and Fastify answers 414 past 100. */
export const providerKeyPattern = /^[a-z][a-z0-9_]{0,63}$/;

/** Every `{name}` a prompt or formula refers to, in order of first use. */
export function templateReferences(template: string): string[] {
  const names = [...template.matchAll(/\{([A-Za-z_][A-Za-z0-9_]{0,99})\}/g)].map((m) => m[1]!);
  return [...new Set(names)];
}

/** The template with each mapped `{name}` replaced by its input's text (empty when the cell is); other braces stay. */
export function fillTemplate(template: string, inputs: ReadonlyMap<string, CellValue>): string {
  return template.replace(/\{([A-Za-z_][A-Za-z0-9_]{0,99})\}/g, (whole, name: string) => {
    if (!inputs.has(name)) return whole;
    const value = inputs.get(name);
    return value === null || value === undefined ? '' : String(value);
  });
}

// ---------------------------------------------------------------------------------------------
// listEnrichmentProviders and a provider's description

export const ProviderCredentialsSchema = z.enum(providerCredentials).meta({ id: 'EnrichmentProviderCredentials' });

export const EnrichmentProviderSchema = z
  .object({
    key: z.string(),
    display_name: z.string(),
    description: z.string(),
    credentials: ProviderCredentialsSchema.describe(
      "`platform`: runs on the service's own account; `workspace`: on the workspace's own",
    ),
  })
  .meta({ id: 'EnrichmentProvider', description: 'Enrichment provider (2.9)' });
export type EnrichmentProviderSummary = z.infer<typeof EnrichmentProviderSchema>;

export const EnrichmentProviderListSchema = z
  .object({
    providers: z.array(EnrichmentProviderSchema).describe('Alphabetical by key; only providers something here runs on'),
  })
  .meta({ id: 'EnrichmentProviderList' });

export const EnrichmentProviderDetailSchema = EnrichmentProviderSchema.extend({
  inputs: z.array(z.object({ name: z.string(), description: z.string(), required: z.boolean() })),
  named_inputs: z
    .boolean()
    .describe('Columns may also be mapped under names of your choosing, read as {name} by a prompt or formula'),
  outputs: z.array(
    z.object({ name: z.string(), description: z.string(), type: z.enum(['text', 'number', 'boolean']) }),
  ),
  options: z.array(z.object({ name: z.string(), description: z.string(), required: z.boolean(), max_length: z.int() })),
  price_credits: z.int().describe('Credits per row that gets a result; an empty result or a failure costs nothing'),
  concurrency: z.int().describe('Rows of one run in flight at once'),
  timeout_seconds: z.int().describe("One call's time limit"),
}).meta({ id: 'EnrichmentProviderDetail' });

export function providerSummary(info: EnrichmentProviderInfo): EnrichmentProviderSummary {
  return {
    key: info.key,
    display_name: info.display_name,
    description: info.description,
    credentials: info.credentials,
  };
}

// ---------------------------------------------------------------------------------------------
// Enrichment columns

export const enrichmentFieldsMax = 50;
export const optionTextMax = 20_000;

const FieldNameSchema = z
  .string()
  .regex(fieldNamePattern, 'must be letters, digits and _, starting with a letter or _, at most 100');

/** A map with at most `max` entries, said in the document too, so the schema alone decides. */
const boundedRecord = <V extends z.ZodType>(value: V, max: number, description: string) =>
  z
    .record(FieldNameSchema, value)
    .refine((r) => Object.keys(r).length <= max, `at most ${max} entries`)
    .meta({ maxProperties: max, description });

export const EnrichmentColumnCreateSchema = z.object({
  kind: z.literal('enrichment'),
  name: NameSchema,
  provider: z
    .string()
    .max(64)
    .regex(providerKeyPattern, 'must be a provider key')
    .describe('A provider key of GET /table-enrichments/providers/'),
  input_mappings: boundedRecord(
    UuidSchema,
    enrichmentFieldsMax,
    'Provider input name to the table column that feeds it',
  ).default({}),
  output_fields: z
    .array(FieldNameSchema)
    .min(1)
    .max(enrichmentFieldsMax)
    .optional()
    .describe('Output fields to fan out into child columns; every output of the provider when omitted'),
  output_column_names: boundedRecord(
    NameSchema,
    enrichmentFieldsMax,
    'Names of the child columns by output field; a taken name falls back to the derived one',
  ).optional(),
  options: boundedRecord(textSchema(0, optionTextMax), 20, "The provider's options (a prompt, a formula)").optional(),
  position: z
    .int()
    .min(0)
    .max(1_000_000)
    .optional()
    .describe('0 is the first column; past the last column appends. The output columns follow it.'),
});
export type EnrichmentColumnCreate = z.infer<typeof EnrichmentColumnCreateSchema>;

/** What an enrichment column keeps in table_columns.config. */
export interface StoredEnrichmentConfig {
  provider: string;
  /** Input name to column id. */
  inputs: Record<string, string>;
  outputs: string[];
  options: Record<string, string>;
}

export const EnrichmentColumnConfigSchema = z
  .object({
    provider: z.string(),
    input_mappings: z.record(z.string(), UuidSchema),
    output_fields: z.array(z.string()),
    options: z.record(z.string(), z.string()),
  })
  .meta({ id: 'EnrichmentColumnConfig' });
export type EnrichmentColumnConfig = z.infer<typeof EnrichmentColumnConfigSchema>;

export function enrichmentConfigView(config: Partial<StoredEnrichmentConfig>): EnrichmentColumnConfig | null {
  if (typeof config.provider !== 'string') return null;
  return {
    provider: config.provider,
    input_mappings: config.inputs ?? {},
    output_fields: config.outputs ?? [],
    options: config.options ?? {},
  };
}

/** A child column's name when none is given, or the given one is taken. */
export function derivedOutputName(parentName: string, field: string): string {
  const suffix = ` · ${field}`;
  return `${parentName.slice(0, 255 - suffix.length)}${suffix}`;
}

// ---------------------------------------------------------------------------------------------
// Runs

export const columnRunStatuses = ['queued', 'running', 'cancelling', 'completed', 'cancelled', 'failed'] as const;
export const ColumnRunStatusSchema = z.enum(columnRunStatuses).meta({ id: 'ColumnRunStatus' });
export type ColumnRunStatus = z.infer<typeof ColumnRunStatusSchema>;
export const activeRunStatuses: readonly ColumnRunStatus[] = ['queued', 'running', 'cancelling'];

export const runRowsMax = 1000;

export const ColumnRunSchema = z
  .object({
    id: UuidSchema,
    table_id: UuidSchema,
    column_id: UuidSchema,
    provider: z.string(),
    status: ColumnRunStatusSchema,
    trigger: z.enum(['manual', 'auto']).describe('auto: started by rows added to a table with auto_run'),
    scope: z
      .enum(['all', 'rows', 'new_rows'])
      .describe('Every row, the rows named, or the rows with no cell of the column yet'),
    keep_existing_results: z.boolean().describe('Cells that already have a result were left alone'),
    rows_total: z.int().describe('Rows the run covers so far (it grows when rows are added while it goes)'),
    rows_processed: z.int().describe('Rows finished one way or another'),
    rows_done: z.int().describe('Rows the provider returned a result for'),
    rows_empty: z.int().describe('Rows the provider found nothing for (no charge)'),
    rows_failed: z.int().describe('Rows whose cell ended in error after retries (no charge)'),
    rows_skipped: z.int().describe('Rows without a value for a required input'),
    rows_kept: z.int().describe('Rows whose result was kept (keep_existing_results)'),
    credits_charged: z.int(),
    progress: z.number().min(0).max(1).describe('rows_processed / rows_total'),
    error: z.string().nullable().describe('Why the run stopped early (out of credits, provider gone)'),
    workflow_id: z.string().describe('The Temporal workflow running it, column-run/<id>'),
    created_at: TimestampSchema,
    started_at: TimestampSchema.nullable(),
    cancel_requested_at: TimestampSchema.nullable(),
    finished_at: TimestampSchema.nullable(),
  })
  .meta({ id: 'ColumnRun' });
export type ColumnRun = z.infer<typeof ColumnRunSchema>;

export const ColumnRunCreateSchema = z
  .object({
    row_ids: z
      .array(UuidSchema)
      .min(1)
      .max(runRowsMax)
      .optional()
      .describe('Only these rows; every row of the table when omitted'),
    keep_existing_results: z
      .boolean()
      .optional()
      .describe("Leave cells that already have a result alone; the table's setting when omitted"),
  })
  .meta({ id: 'ColumnRunCreate' });
export type ColumnRunCreate = z.infer<typeof ColumnRunCreateSchema>;

export const ColumnRunListQuerySchema = z.object({
  active: z
    .enum(['true', 'false'])
    .transform((v) => v === 'true')
    .optional()
    .describe('Only runs still going (true) or only finished ones (false)'),
  limit: queryInteger(z.int().min(1).max(200).default(50)),
});
export type ColumnRunListQuery = z.infer<typeof ColumnRunListQuerySchema>;

export const ColumnRunListSchema = z
  .object({ runs: z.array(ColumnRunSchema).describe('Newest first') })
  .meta({ id: 'ColumnRunList' });
