/**
 * Tables of rows (interface spec: Table summary) and everything inside them: folders, columns, rows
 * and cells, saved views, column templates, CSV import and export. Shared by the API and the tests.
 *
 * Bounds live in the schemas, never in a refinement, so a request the schema accepts is never
 * refused with 422. Checks that need the table (an unknown column, a computed column written to)
 * answer 409, except in bulk operations, where each row gets its own answer.
 */
import { z } from 'zod';
import { NameSchema, queryInteger, textSchema, TimestampSchema, UuidSchema } from '../shared/common.js';
import { EnrichmentColumnConfigSchema, EnrichmentColumnCreateSchema } from './enrichments.js';
import { AgentColumnConfigSchema } from '../agents/saved-agents.js';

export const descriptionMax = 2000;
export const columnsPerTable = 500;
/** Folders nest at most this deep, so a path from the root stays short enough to show. */
export const folderDepthMax = 10;
export const cellTextMax = 10_000;
export const formulaMax = 2000;
export const bulkRowsMax = 1000;
export const rowPageMax = 1000;
/** A filtered grid's count stops at this many rows (docs/decisions/059-grid-at-a-million-rows.md). */
export const countExactMax = 1000;
export const filtersMax = 20;
/** Filters given in a query string: few and short, so the request line stays within what HTTP servers read. */
export const queryFiltersMax = 5;
export const sortsMax = 5;
/** A CSV upload may be this large; it is streamed, never held whole. */
export const csvBytesMax = 50 * 1024 * 1024;
/** Rejected CSV lines listed in the report; the count covers all of them. */
export const csvRejectedListed = 1000;

const bool = (description: string) => z.boolean().describe(description);
const queryBool = z.enum(['true', 'false']).transform((v) => v === 'true');

// ---------------------------------------------------------------------------------------------
// Folders and tables (interface spec: Table summary)

export const FolderRefSchema = z.object({ id: UuidSchema, name: z.string() }).meta({ id: 'FolderRef' });
export type FolderRef = z.infer<typeof FolderRefSchema>;

export const FolderPathSchema = z
  .array(FolderRefSchema)
  .describe('From the top level down to the folder itself; empty at the top level');

export const TableSchema = z
  .object({
    id: UuidSchema,
    name: z.string(),
    description: z.string().nullable(),
    auto_run: bool('Run computed columns on new rows as they arrive'),
    keep_existing_results: bool('A run leaves cells that already have a result alone'),
    row_count: z.int(),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
    ai_made: bool('Made by the AI assistant'),
    archived_at: TimestampSchema.nullable(),
    deleted_at: TimestampSchema.nullable(),
    folder_id: UuidSchema.nullable(),
    folder_path: FolderPathSchema,
    former_tags: z.array(z.string()).describe('The tags the table carried when folders replaced tags'),
    is_favorite: bool("The caller's favourite"),
    last_viewed_at: TimestampSchema.nullable().describe('When the caller last opened the table'),
    owner_display_name: z.string().nullable(),
    owner_user_id: z.string().nullable().describe("The owner's identity-provider user id"),
    shared_as_template: bool('Offered to the workspace as a template'),
  })
  .meta({ id: 'Table', description: 'Table summary (2.8)' });
export type Table = z.infer<typeof TableSchema>;

const DescriptionSchema = textSchema(0, descriptionMax).nullable();

export const TableCreateSchema = z
  .object({
    name: NameSchema,
    description: DescriptionSchema.optional(),
    folder_id: UuidSchema.nullable().optional().describe('The folder to file it in; the top level when omitted'),
    auto_run: z.boolean().optional(),
    keep_existing_results: z.boolean().optional(),
    ai_made: z.boolean().optional(),
    shared_as_template: z.boolean().optional(),
  })
  .meta({ id: 'TableCreate' });
export type TableCreate = z.infer<typeof TableCreateSchema>;

export const TableUpdateSchema = z
  .object({
    name: NameSchema.optional(),
    description: DescriptionSchema.optional(),
    auto_run: z.boolean().optional(),
    keep_existing_results: z.boolean().optional(),
    shared_as_template: z.boolean().optional(),
    archived: z.boolean().optional().describe('Archive (true) or bring back (false); sets archived_at'),
    is_favorite: z.boolean().optional().describe("The caller's own favourite"),
    folder_id: UuidSchema.nullable()
      .optional()
      .describe('Move into this folder, or to the top level with null. Moving files a table waiting to be filed.'),
    owner_user_id: NameSchema.optional().describe('Hand the table to another member (their user id)'),
  })
  .meta({ id: 'TableUpdate' });
export type TableUpdate = z.infer<typeof TableUpdateSchema>;

export const TableOrderSchema = z.enum(['name', 'recent', 'created', 'updated']);

export const TableListQuerySchema = z.object({
  folder_id: UuidSchema.optional().describe('Only tables directly in this folder'),
  top_level: queryBool.optional().describe('Only tables at the top level (in no folder)'),
  archived: z.enum(['exclude', 'include', 'only']).default('exclude'),
  deleted: queryBool.default(false).describe('The trash: deleted tables only'),
  favorite: queryBool.optional().describe("Only the caller's favourites"),
  order: TableOrderSchema.default('updated').describe(
    'name A to Z; recent: last viewed by the caller first; created or updated: newest first',
  ),
  limit: queryInteger(z.int().min(1).max(200).default(50)),
  offset: queryInteger(z.int().min(0).max(1_000_000).default(0)),
});
export type TableListQuery = z.infer<typeof TableListQuerySchema>;

export const TableListSchema = z
  .object({ tables: z.array(TableSchema), total_count: z.int() })
  .meta({ id: 'TableList' });
export const UnfiledTableListSchema = z.object({ tables: z.array(TableSchema) }).meta({
  id: 'UnfiledTableList',
  description: 'Tables that carried more than one tag and wait to be filed (endpoint 9)',
});

export const FolderSchema = z
  .object({
    id: UuidSchema,
    name: z.string(),
    parent_id: UuidSchema.nullable(),
    folder_path: FolderPathSchema,
    table_count: z.int().describe('Tables directly in the folder, not deleted'),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
  })
  .meta({ id: 'TableFolder' });
export type Folder = z.infer<typeof FolderSchema>;

export const FolderCreateSchema = z
  .object({
    name: NameSchema,
    parent_id: UuidSchema.nullable().optional().describe('The parent folder; the top level when omitted'),
  })
  .meta({ id: 'TableFolderCreate' });
export const FolderUpdateSchema = z
  .object({
    name: NameSchema.optional(),
    parent_id: UuidSchema.nullable().optional().describe('Move under this folder, or to the top level with null'),
  })
  .meta({ id: 'TableFolderUpdate' });
export const FolderListSchema = z.object({ folders: z.array(FolderSchema) }).meta({ id: 'TableFolderList' });

// ---------------------------------------------------------------------------------------------
// Columns and column templates

/** Input columns hold what people and imports write; the other kinds compute their cells. */
export const columnKinds = ['input', 'formula', 'enrichment', 'agent'] as const;
export const ColumnKindSchema = z.enum(columnKinds).meta({ id: 'ColumnKind' });
export type ColumnKind = z.infer<typeof ColumnKindSchema>;
export const computedKinds: ReadonlySet<ColumnKind> = new Set(['formula', 'enrichment', 'agent']);

const FormulaSchema = textSchema(1, formulaMax).describe(
  'An expression over the row, with columns written {Column name}: arithmetic, comparisons, and/or/not, `cond ? a : b`, and functions such as concat, lower, upper, trim, len, contains, round, min, max. ' +
    'A formula that cannot be used, or fails on a row, makes error cells, never a refusal.',
);
const PositionSchema = z.int().min(0).max(1_000_000).describe('0 is the first column; past the last column appends');

export const ColumnSchema = z
  .object({
    id: UuidSchema,
    table_id: UuidSchema,
    name: z.string(),
    kind: ColumnKindSchema,
    position: z.int(),
    parent_column_id: UuidSchema.nullable().describe(
      'The column this one is an output of; null for a top-level column',
    ),
    formula: z.string().nullable().describe('A formula column’s expression, columns written {Column name}'),
    formula_error: z
      .string()
      .nullable()
      .describe('Why the formula cannot be computed for any row; each of its cells then carries it'),
    enrichment: EnrichmentColumnConfigSchema.nullable().describe(
      "An enrichment column's provider, input mappings, output fields and options",
    ),
    agent: AgentColumnConfigSchema.nullable().describe(
      'An agent column’s saved agent, version, input mappings and output fields (deployed by POST /tables/{table_id}/agent-columns/)',
    ),
    output_field: z
      .string()
      .nullable()
      .describe('The output field an enrichment or agent output column shows; null for other columns'),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
  })
  .meta({ id: 'TableColumn' });
export type Column = z.infer<typeof ColumnSchema>;

export const ColumnCreateSchema = z
  .discriminatedUnion('kind', [
    z.object({ kind: z.literal('input'), name: NameSchema, position: PositionSchema.optional() }),
    z.object({
      kind: z.literal('formula'),
      name: NameSchema,
      formula: FormulaSchema,
      position: PositionSchema.optional(),
    }),
    EnrichmentColumnCreateSchema,
  ])
  .meta({ id: 'TableColumnCreate' });
export type ColumnCreate = z.infer<typeof ColumnCreateSchema>;

export const ColumnUpdateSchema = z
  .object({
    name: NameSchema.optional(),
    position: PositionSchema.optional(),
    formula: FormulaSchema.optional().describe('A formula column’s new expression (409 on another kind)'),
  })
  .meta({ id: 'TableColumnUpdate' });
export type ColumnUpdate = z.infer<typeof ColumnUpdateSchema>;

export const ColumnListSchema = z.object({ columns: z.array(ColumnSchema) }).meta({ id: 'TableColumnList' });

export const ColumnTemplateSchema = z
  .object({
    id: UuidSchema,
    name: z.string(),
    kind: ColumnKindSchema,
    column_name: z.string().describe('The name a column made from it gets unless another is given'),
    formula: z
      .string()
      .nullable()
      .describe('With column names: on another table it refers to that table’s columns of the same names'),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
  })
  .meta({ id: 'ColumnTemplate' });
export type ColumnTemplate = z.infer<typeof ColumnTemplateSchema>;

export const ColumnTemplateCreateSchema = z.object({ name: NameSchema }).meta({ id: 'ColumnTemplateCreate' });
export const ColumnTemplateUpdateSchema = z
  .object({ name: NameSchema.optional(), column_name: NameSchema.optional() })
  .meta({ id: 'ColumnTemplateUpdate' });
export const ColumnTemplateListSchema = z
  .object({ templates: z.array(ColumnTemplateSchema) })
  .meta({ id: 'ColumnTemplateList' });
export const ColumnFromTemplateSchema = z
  .object({ template_id: UuidSchema, name: NameSchema.optional(), position: PositionSchema.optional() })
  .meta({ id: 'TableColumnFromTemplate' });

// ---------------------------------------------------------------------------------------------
// Rows and cells

export const CellValueSchema = z.union([textSchema(0, cellTextMax), z.number(), z.boolean(), z.null()]).meta({
  id: 'CellValue',
  description: `Text up to ${cellTextMax} characters, a number, true/false, or null for an empty cell`,
});
export type CellValue = z.infer<typeof CellValueSchema>;

export const CellsSchema = z
  .record(UuidSchema, CellValueSchema)
  .describe('Values of input columns by column id; null empties a cell');
export type Cells = z.infer<typeof CellsSchema>;

export const cellStates = ['pending', 'running', 'done', 'error', 'skipped'] as const;
export const CellStateSchema = z.enum(cellStates).meta({ id: 'CellState' });
export type CellState = z.infer<typeof CellStateSchema>;

export const ComputedCellSchema = z
  .object({
    state: CellStateSchema,
    value: z.unknown().describe('The result once done; null otherwise'),
    error: z.string().nullable(),
    cost: z.int().describe('Credits the cell cost'),
  })
  .meta({ id: 'ComputedCell' });
export type ComputedCell = z.infer<typeof ComputedCellSchema>;

export const RowSchema = z
  .object({
    id: UuidSchema,
    table_id: UuidSchema,
    cells: z
      .record(UuidSchema, CellValueSchema)
      .describe('Input columns’ values by column id; an empty cell is absent'),
    computed: z.record(UuidSchema, ComputedCellSchema).describe('Computed columns’ cells by column id'),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
  })
  .meta({ id: 'TableRow' });
export type Row = z.infer<typeof RowSchema>;

export const RowWriteSchema = z.object({ cells: CellsSchema.default({}) }).meta({ id: 'TableRowWrite' });

// Bulk rows are checked one by one, so their cells are loose here and a bad row is answered in
// its own result instead of refusing the other rows.
const LooseCellsSchema = z
  .record(z.string(), z.unknown())
  .default({})
  .describe('Values by column id, checked row by row: a row with a bad value is rejected alone');

export const BulkRowsCreateSchema = z
  .object({
    rows: z
      .array(z.object({ cells: LooseCellsSchema }))
      .min(1)
      .max(bulkRowsMax),
  })
  .meta({ id: 'TableRowsBulkCreate' });
export const BulkRowsUpdateSchema = z
  .object({
    rows: z
      .array(z.object({ id: z.string().max(100), cells: LooseCellsSchema }))
      .min(1)
      .max(bulkRowsMax),
  })
  .meta({ id: 'TableRowsBulkUpdate' });
export const BulkRowsDeleteSchema = z
  .object({ row_ids: z.array(z.string().max(100)).min(1).max(bulkRowsMax) })
  .meta({ id: 'TableRowsBulkDelete' });

export const BulkRowResultSchema = z
  .object({
    index: z.int().describe('Position in the request'),
    id: z.string().nullable().describe('The row’s id; null when none was made or named'),
    status: z.enum(['created', 'updated', 'deleted', 'rejected', 'not_found']),
    detail: z.string().nullable().describe('Why the row was rejected or not found'),
  })
  .meta({ id: 'TableRowBulkResult' });
export type BulkRowResult = z.infer<typeof BulkRowResultSchema>;
export const BulkRowsResultSchema = z
  .object({ results: z.array(BulkRowResultSchema), succeeded: z.int(), failed: z.int() })
  .meta({ id: 'TableRowsBulkResult' });

// ---------------------------------------------------------------------------------------------
// Filters, sorts and views

export const filterOps = [
  'eq',
  'neq',
  'contains',
  'not_contains',
  'starts_with',
  'ends_with',
  'gt',
  'gte',
  'lt',
  'lte',
  'is_empty',
  'is_not_empty',
] as const;
export const FilterOpSchema = z.enum(filterOps).meta({
  id: 'FilterOp',
  description:
    'Text matches ignore case; gt/gte/lt/lte compare as numbers when the value reads as one, else as text; eq compares numbers as numbers',
});
export type FilterOp = z.infer<typeof FilterOpSchema>;

export const FilterSchema = z
  .object({ column_id: UuidSchema, op: FilterOpSchema, value: textSchema(0, cellTextMax).default('') })
  .meta({ id: 'TableFilter' });
export type Filter = z.infer<typeof FilterSchema>;
export const SortSchema = z
  .object({ column_id: UuidSchema, direction: z.enum(['asc', 'desc']).default('asc') })
  .meta({ id: 'TableSort', description: 'Numbers in order before text; empty cells always last' });
export type Sort = z.infer<typeof SortSchema>;
export const FilterModeSchema = z.enum(['all', 'any']).describe('Rows matching all filters, or any of them');
export type FilterMode = z.infer<typeof FilterModeSchema>;

const uuidText = '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}';
const FilterParamSchema = z
  .string()
  .max(250)
  .regex(new RegExp(`^${uuidText}:(${filterOps.join('|')})(:[^\\u0000]*)?$`), 'must be <column_id>:<op>[:<value>]');
const SortParamSchema = z.string().regex(new RegExp(`^${uuidText}(:(asc|desc))?$`), 'must be <column_id>[:asc|:desc]');
const repeated = <T extends z.ZodType<string>>(item: T, max: number) =>
  z.union([item, z.array(item).max(max)]).transform((v) => (Array.isArray(v) ? v : [v]));

export function parseFilterParam(param: string): Filter {
  const [columnId, op, ...rest] = param.split(':');
  return { column_id: columnId!.toLowerCase(), op: op as FilterOp, value: rest.join(':') };
}
export function parseSortParam(param: string): Sort {
  const [columnId, direction] = param.split(':');
  return { column_id: columnId!.toLowerCase(), direction: direction === 'desc' ? 'desc' : 'asc' };
}

/** What the grid shows: a saved view, or filters and sorts given here (which replace the view’s). */
export const RowQuerySchema = z.object({
  view_id: UuidSchema.optional().describe('Apply a saved view: its filters, sorts and visible columns'),
  filter: repeated(FilterParamSchema, queryFiltersMax)
    .optional()
    .describe(
      `<column_id>:<op>[:<value>], up to 250 characters, repeatable up to ${queryFiltersMax} (a saved view holds more); replaces the view’s filters`,
    ),
  filter_mode: FilterModeSchema.optional(),
  sort: repeated(SortParamSchema, sortsMax)
    .optional()
    .describe(`<column_id>[:asc|:desc], repeatable up to ${sortsMax}; replaces the view’s sorts`),
});
export const RowListQuerySchema = RowQuerySchema.extend({
  limit: queryInteger(z.int().min(1).max(rowPageMax).default(100)),
  offset: queryInteger(z.int().min(0).max(100_000_000).default(0)),
  after: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/, 'a next_cursor (base64url)')
    .max(16_384)
    .optional()
    .describe(
      'A next_cursor of the same grid (same sorts): the page starts after that row, as fast deep in the grid as at its start; offset then counts from there',
    ),
});
export type RowQuery = z.infer<typeof RowQuerySchema>;
export type RowListQuery = z.infer<typeof RowListQuerySchema>;

export const RowPageSchema = z
  .object({
    rows: z.array(RowSchema),
    total_count: z
      .int()
      .describe(
        `Rows matching the filters; with filters, counted up to ${countExactMax.toLocaleString('en-US')} (then total_count_exact is false and there are more)`,
      ),
    total_count_exact: z.boolean().describe('False when total_count is the bound of a filtered count, not the count'),
    limit: z.int(),
    offset: z.int(),
    next_cursor: z
      .string()
      .nullable()
      .describe('Pass as `after` for the next page (keyset paging); null when this page is the last'),
    column_ids: z.array(UuidSchema).describe('The columns to show, in order (a view hides and orders them)'),
  })
  .meta({ id: 'TableRowPage' });

const ColumnIdListSchema = z.array(UuidSchema).max(columnsPerTable);

export const ViewSchema = z
  .object({
    id: UuidSchema,
    table_id: UuidSchema,
    name: z.string(),
    filters: z.array(FilterSchema),
    filter_mode: FilterModeSchema,
    sorts: z.array(SortSchema),
    hidden_column_ids: z.array(UuidSchema),
    column_order: z.array(UuidSchema).describe('Columns listed first, in this order; the others follow in table order'),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
  })
  .meta({ id: 'TableView' });
export type View = z.infer<typeof ViewSchema>;

export const ViewCreateSchema = z
  .object({
    name: NameSchema,
    filters: z.array(FilterSchema).max(filtersMax).default([]),
    filter_mode: FilterModeSchema.default('all'),
    sorts: z.array(SortSchema).max(sortsMax).default([]),
    hidden_column_ids: ColumnIdListSchema.default([]),
    column_order: ColumnIdListSchema.default([]),
  })
  .meta({ id: 'TableViewCreate' });
export type ViewCreate = z.infer<typeof ViewCreateSchema>;

export const ViewUpdateSchema = z
  .object({
    name: NameSchema.optional(),
    filters: z.array(FilterSchema).max(filtersMax).optional(),
    filter_mode: FilterModeSchema.optional(),
    sorts: z.array(SortSchema).max(sortsMax).optional(),
    hidden_column_ids: ColumnIdListSchema.optional(),
    column_order: ColumnIdListSchema.optional(),
  })
  .meta({ id: 'TableViewUpdate' });
export type ViewUpdate = z.infer<typeof ViewUpdateSchema>;
export const ViewListSchema = z.object({ views: z.array(ViewSchema) }).meta({ id: 'TableViewList' });

// ---------------------------------------------------------------------------------------------
// CSV

export const csvMapMax = 200;
export const CsvImportQuerySchema = z.object({
  map: repeated(
    z.string().regex(new RegExp(`^${uuidText}:[1-9][0-9]{0,2}$`), 'must be <column_id>:<field number>'),
    csvMapMax,
  )
    .optional()
    .describe(
      `<column_id>:<n> puts the n-th field (1 is the first) into that input column, up to ${csvMapMax}; ` +
        'any other header goes to the column of the same name (case ignored)',
    ),
  unmapped: z
    .enum(['create', 'skip'])
    .default('create')
    .describe('A header with no column: make an input column for it, or leave its field out'),
  delimiter: z.enum([',', ';', '\t', '|']).default(','),
});
export type CsvImportQuery = z.infer<typeof CsvImportQuerySchema>;

export const CsvRejectedLineSchema = z
  .object({ line: z.int().describe('1 is the header line'), reason: z.string() })
  .meta({ id: 'CsvRejectedLine' });
export type CsvRejectedLine = z.infer<typeof CsvRejectedLineSchema>;

export const CsvImportReportSchema = z
  .object({
    lines_read: z.int().describe('Lines of the file, the header included'),
    rows_added: z.int(),
    rejected_count: z.int(),
    rejected: z.array(CsvRejectedLineSchema).describe(`The first ${csvRejectedListed} rejected lines, in file order`),
    columns_created: z.array(ColumnSchema),
    mapping: z.array(
      z.object({ header: z.string(), column_id: UuidSchema.nullable().describe('null: the field was left out') }),
    ),
  })
  .meta({ id: 'CsvImportReport' });
export type CsvImportReport = z.infer<typeof CsvImportReportSchema>;

// ---------------------------------------------------------------------------------------------
// What a person sees

/** An input value as the grid shows it: text as written, numbers and true/false as text, empty as nothing. */
export function displayValue(value: CellValue | undefined): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

/** A computed cell as the grid shows it: the result once done, `#ERROR` for an error, else nothing. */
export function displayComputed(cell: Pick<ComputedCell, 'state' | 'value'> | undefined): string {
  if (!cell) return '';
  if (cell.state === 'error') return '#ERROR';
  return cell.state === 'done' ? displayValue(cell.value as CellValue) : '';
}
