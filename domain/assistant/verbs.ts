/**
 * The workspace verbs as the model sees them: each verb's input schema (validated before a card is
 * raised; a bad input is the tool call's error, never a card) and the tool definition offered to
 * the model. Verbs whose supplier this service does not have yet are named with the reason they
 * are refused, so the assistant says so instead of pretending.
 */
import { z } from 'zod';
import { NameSchema, UuidSchema } from '../shared/common.js';
import { ColumnCreateSchema } from '../tables/tables.js';
import { runRowsMax } from '../tables/enrichments.js';
import { enrolRowsMax } from '../sequences/sequences.js';
import type { Verb } from './assistant.js';
import { LeadSearchKindSchema, LeadSearchQuerySchema, leadSearchMaxResults } from '../sourcing/lead-search.js';

export const VerbInputSchemas = {
  add_column: z.strictObject({
    table_id: UuidSchema,
    column: ColumnCreateSchema.describe(
      'The column to add; an enrichment column runs over the table once the card is approved',
    ),
  }),
  run_column: z.strictObject({ table_id: UuidSchema, column_id: UuidSchema.describe('An enrichment column') }),
  enrich_rows: z.strictObject({
    table_id: UuidSchema,
    column_id: UuidSchema.describe('An enrichment column'),
    row_ids: z.array(UuidSchema).min(1).max(runRowsMax),
  }),
  add_contacts_to_sequence: z.strictObject({
    sequence_id: UuidSchema,
    row_ids: z.array(UuidSchema).min(1).max(enrolRowsMax).describe("Rows of the sequence's audience table"),
    sender_profile_id: UuidSchema.nullable().default(null),
  }),
  start_search: z.strictObject({
    table_id: UuidSchema.describe('The table the results land in (deduplicated by profile URL, email or domain)'),
    kind: LeadSearchKindSchema.default('people'),
    query: LeadSearchQuerySchema,
    max_results: z.int().min(1).max(leadSearchMaxResults).default(100),
  }),
  create_table_from_search: z.strictObject({
    table_name: NameSchema.optional().describe('The new table’s name; made from the query when omitted'),
    kind: LeadSearchKindSchema.default('people'),
    query: LeadSearchQuerySchema,
    max_results: z.int().min(1).max(leadSearchMaxResults).default(100),
  }),
  call_endpoint: z.strictObject({
    url: z.string().min(1).max(2000).describe('An http or https address on the public internet'),
    method: z.enum(['POST', 'PUT']).default('POST'),
    body: z.record(z.string(), z.unknown()).default({}).describe('Sent as JSON'),
  }),
} satisfies Partial<Record<Verb, z.ZodType>>;
export type BuiltVerb = keyof typeof VerbInputSchemas;
export type VerbInput<V extends BuiltVerb> = z.infer<(typeof VerbInputSchemas)[V]>;

export const isBuiltVerb = (name: string): name is BuiltVerb => Object.hasOwn(VerbInputSchemas, name);

/** Why a verb is refused in this build: its supplier is another part of the service not built yet. */
export const refusedVerbs: Partial<Record<Verb, string>> = {
  push_to_destination:
    'Pushing rows to a destination is not available yet: no destination (CRM write-back) can be connected.',
};

const descriptions: Record<BuiltVerb, string> = {
  add_column:
    'Add a column to a table (input, formula or enrichment). Proposes a card; an enrichment column is priced per row that gets a result.',
  run_column:
    'Run an enrichment column over every row of its table. Proposes a card priced per row that gets a result.',
  enrich_rows: 'Run an enrichment column over chosen rows. Proposes a card priced per row that gets a result.',
  add_contacts_to_sequence: "Enrol rows of a sequence's audience table as contacts of the sequence. Proposes a card.",
  start_search:
    'Search for people or companies (titles, seniorities, departments, locations, company domains, industries, head counts, keywords) and land each result as a row of an existing table. Proposes a card; each new row costs the provider’s price, charged as it lands, and duplicates cost nothing.',
  create_table_from_search:
    'Make a new table and fill it from a search for people or companies. Proposes a card; each new row costs the provider’s price, charged as it lands.',
  call_endpoint:
    'Send JSON to an outside endpoint (a webhook of another tool). Proposes a card; the request is sent at most once.',
};

export interface ToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** The tools offered to the model for the verbs this build runs. */
export function verbTools(): ToolDefinition[] {
  return (Object.keys(VerbInputSchemas) as BuiltVerb[]).map((verb) => ({
    name: verb,
    description: descriptions[verb],
    parameters: z.toJSONSchema(VerbInputSchemas[verb], { io: 'input', unrepresentable: 'any' }),
  }));
}

/** Reads the assistant does at once, without a card. */
export const readTools: ToolDefinition[] = [
  {
    name: 'read_attachment',
    description:
      "Read pages of a file attached to this conversation (a PDF's pages, or a spreadsheet's rows), laid out as printed. " +
      'Answers the pages and `next_offset` to continue from.',
    parameters: {
      type: 'object',
      properties: {
        attachment_id: { type: 'string', format: 'uuid' },
        offset: { type: 'integer', minimum: 0, default: 0 },
        limit: { type: 'integer', minimum: 1, maximum: 10, default: 10 },
      },
      required: ['attachment_id'],
      additionalProperties: false,
    },
  },
];
