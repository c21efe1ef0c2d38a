/**
 * Saved agents (interface spec: Browser agent records for the agent settings, prompt template,
 * reach, step actions and outcomes; Deploy a saved agent onto a table; Limits): the schemas the
 * API, the activities and the tests share, and the pure rules (which tools a run offers, what reach
 * it bills as, its price, how a training run's answers are compared with the expected ones).
 */
import { z } from 'zod';
import { textOf } from '../shared/text.js';
import { NameSchema, TimestampSchema, UuidSchema, lineSchema, textSchema } from '../shared/common.js';

export const promptSegmentsMax = 200;
export const promptTextMax = 20_000;
export const agentInputsMax = 50;
export const agentOutputFieldsMax = 50;
export const mcpServersMax = 10;
export const examplesPerAgentMax = 200;
export const deployFieldsMax = 50;
export const runRowsMax = 50;
export const exampleValueMax = 10_000;
/** What one step's observation keeps (and the model reads back): enough to research with, small enough for history. */
export const observationMax = 4000;

// ---------------------------------------------------------------------------------------------
// Enums of the interface spec's Browser agent records

export const agentActions = [
  'search',
  'fetch_page',
  'map',
  'scrape',
  'crawl',
  'mcp_tool',
  'workspace_action',
  'find_work_email',
  'read_pnet_profile',
  'find_people_at_company',
  'finish',
] as const;
export const AgentActionSchema = z.enum(agentActions).meta({
  id: 'AgentStepAction',
  description: '`fetch_page` is historical: stored traces still carry it, new runs refuse it (scrape reads a page)',
});
export type AgentAction = z.infer<typeof AgentActionSchema>;

export const AgentStepOutcomeSchema = z.enum(['completed', 'failed', 'refused']).meta({ id: 'AgentStepOutcome' });
export type AgentStepOutcome = z.infer<typeof AgentStepOutcomeSchema>;

export const agentReaches = ['none', 'mcp', 'web'] as const;
export const AgentReachSchema = z.enum(agentReaches).meta({
  id: 'AgentReach',
  description:
    '`none`: one plain completion; `mcp`: a research loop over the attached MCP tools only; `web`: full web research. A run with both web and MCP runs and bills as `web`.',
});
export type AgentReach = z.infer<typeof AgentReachSchema>;

export const AgentEffortSchema = z
  .enum(['low', 'standard', 'high'])
  .meta({ id: 'AgentEffort', description: 'How many research steps a run may take: low 4, standard 8, high 16' });
export type AgentEffort = z.infer<typeof AgentEffortSchema>;
export const maxStepsFor: Record<AgentEffort, number> = { low: 4, standard: 8, high: 16 };

/** Tools that reach the open web (and bill the run as `web`). */
export const webActions: ReadonlySet<AgentAction> = new Set([
  'search',
  'fetch_page',
  'map',
  'scrape',
  'crawl',
  'find_work_email',
  'read_pnet_profile',
  'find_people_at_company',
]);

// ---------------------------------------------------------------------------------------------
// Prompt template, inputs, output fields, settings

export const contextSections = ['all', 'agent', 'row'] as const;

export const PromptSegmentSchema = z
  .discriminatedUnion('type', [
    z.object({ type: z.literal('text'), text: textSchema(0, promptTextMax) }),
    z.object({
      type: z.literal('input_ref'),
      input_id: UuidSchema.describe("An input's id: the prompt reads that input's value, whatever it is named"),
    }),
    z.object({
      type: z.literal('context_ref'),
      section: z
        .enum(contextSections)
        .default('all')
        .describe("`agent`: the settings' context; `row`: the row's other cells (when use_row_context); `all`: both"),
    }),
  ])
  .meta({ id: 'AgentPromptSegment' });
export type PromptSegment = z.infer<typeof PromptSegmentSchema>;

export const PromptTemplateSchema = z.object({ segments: z.array(PromptSegmentSchema).max(promptSegmentsMax) }).meta({
  id: 'AgentPromptTemplate',
  description: `At most ${promptSegmentsMax} segments; a text segment at most ${promptTextMax} characters`,
});
export type PromptTemplate = z.infer<typeof PromptTemplateSchema>;

export const AgentInputSchema = z
  .object({ id: UuidSchema, name: NameSchema, description: z.string().nullable() })
  .meta({ id: 'AgentInput' });
export type AgentInput = z.infer<typeof AgentInputSchema>;
export const AgentInputWriteSchema = z
  .object({
    id: UuidSchema.optional().describe(
      "An existing input's id to keep it (a rename keeps every reference); a new id is made when omitted",
    ),
    name: NameSchema,
    description: textSchema(0, 2000).nullable().optional(),
  })
  .meta({ id: 'AgentInputWrite' });

export const outputKeyPattern = /^[A-Za-z_][A-Za-z0-9_]{0,99}$/;
export const AgentOutputTypeSchema = z.enum(['text', 'number', 'boolean']).meta({ id: 'AgentOutputType' });
export const AgentOutputFieldSchema = z
  .object({
    key: z
      .string()
      .min(1)
      .max(100)
      .regex(outputKeyPattern, 'must be letters, digits and _, starting with a letter or _'),
    name: NameSchema,
    type: AgentOutputTypeSchema.default('text'),
    description: textSchema(0, 2000).nullable().default(null),
  })
  .meta({ id: 'AgentOutputField' });
export type AgentOutputField = z.infer<typeof AgentOutputFieldSchema>;

const settingsFields = {
  kind: z.literal('agent').default('agent'),
  allow_fetch: z.boolean().default(true).describe('May read pages (scrape, map, crawl)'),
  allow_search: z.boolean().default(true).describe('May search the web'),
  context: textSchema(0, promptTextMax)
    .nullable()
    .default(null)
    .describe('Standing context the prompt reads through a context_ref'),
  effort: AgentEffortSchema.default('standard'),
  saved_agent_id: UuidSchema.nullable().default(null).describe("Set by the service: the saved agent's own id"),
  use_row_context: z.boolean().default(true).describe("Let the prompt read the row's other cells"),
};
const startingUrlColumn = 'The table column whose value is where research starts';

export const AgentSettingsSchema = z
  .object({
    ...settingsFields,
    starting_url_column_id: UuidSchema.nullable().describe(startingUrlColumn),
    stay_on_domain: z.boolean().describe('Read pages of the starting URL’s domain only'),
  })
  .meta({ id: 'AgentSettings', description: 'Agent settings for the web-research action (2.4)' });
export type AgentSettings = z.infer<typeof AgentSettingsSchema>;

/**
 * Settings as written: stay_on_domain true requires a starting URL column, said by the schema
 * itself (one of two shapes), so a request without one is refused with 422 like any bound.
 */
export const AgentSettingsWriteSchema = z
  .union([
    z.object({
      ...settingsFields,
      stay_on_domain: z.literal(true),
      starting_url_column_id: UuidSchema.describe(startingUrlColumn),
    }),
    z.object({
      ...settingsFields,
      stay_on_domain: z.literal(false).default(false),
      starting_url_column_id: UuidSchema.nullable().default(null).describe(startingUrlColumn),
    }),
  ])
  .meta({
    id: 'AgentSettingsWrite',
    description:
      'Agent settings (2.4); omitted fields take their defaults. stay_on_domain true requires starting_url_column_id (422 without).',
  });

export const McpServerSchema = z
  .object({
    url: z
      .url({ protocol: /^https?$/ })
      .max(2000)
      .describe('A streamable-HTTP MCP endpoint (JSON-RPC over POST)'),
    name: NameSchema.nullable().default(null),
  })
  .meta({ id: 'AgentMcpServer' });
export type McpServer = z.infer<typeof McpServerSchema>;

export const SavedAgentSchema = z
  .object({
    id: UuidSchema,
    name: z.string(),
    description: z.string().nullable(),
    prompt: PromptTemplateSchema,
    inputs: z.array(AgentInputSchema),
    output_fields: z.array(AgentOutputFieldSchema),
    settings: AgentSettingsSchema,
    reach: AgentReachSchema,
    mcp_servers: z.array(McpServerSchema),
    price_credits: z
      .int()
      .describe('Credits a run with a result costs (its billed reach); nothing for an empty result or a failure'),
    version: z.int().describe('1 when made, one more on every edit'),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
  })
  .meta({ id: 'SavedAgent' });
export type SavedAgent = z.infer<typeof SavedAgentSchema>;

export const SavedAgentCreateSchema = z
  .object({
    name: NameSchema,
    description: textSchema(0, 2000).nullable().optional(),
    prompt: PromptTemplateSchema.default({ segments: [] }),
    inputs: z.array(AgentInputWriteSchema).max(agentInputsMax).default([]),
    output_fields: z.array(AgentOutputFieldSchema).min(1).max(agentOutputFieldsMax),
    settings: AgentSettingsWriteSchema.default(() => AgentSettingsWriteSchema.parse({})),
    reach: AgentReachSchema.default('web'),
    mcp_servers: z.array(McpServerSchema).max(mcpServersMax).default([]),
  })
  .meta({ id: 'SavedAgentCreate' });
export type SavedAgentCreate = z.infer<typeof SavedAgentCreateSchema>;

export const SavedAgentUpdateSchema = z
  .object({
    name: NameSchema.optional(),
    description: textSchema(0, 2000).nullable().optional(),
    prompt: PromptTemplateSchema.optional(),
    inputs: z
      .array(AgentInputWriteSchema)
      .max(agentInputsMax)
      .optional()
      .describe('The whole list; keep an input by giving its id'),
    output_fields: z.array(AgentOutputFieldSchema).min(1).max(agentOutputFieldsMax).optional(),
    settings: AgentSettingsWriteSchema.optional().describe(
      'The whole settings object; omitted fields take their defaults',
    ),
    reach: AgentReachSchema.optional(),
    mcp_servers: z.array(McpServerSchema).max(mcpServersMax).optional(),
  })
  .meta({ id: 'SavedAgentUpdate' });
export type SavedAgentUpdate = z.infer<typeof SavedAgentUpdateSchema>;

export const SavedAgentListSchema = z
  .object({ agents: z.array(SavedAgentSchema).describe('Most recently edited first') })
  .meta({ id: 'SavedAgentList' });

// ---------------------------------------------------------------------------------------------
// Training

const ExampleValueSchema = z.union([textSchema(0, exampleValueMax), z.number(), z.boolean(), z.null()]);
/** A map of at most `max` entries, said in the document too (zod has no size check on records). */
const boundedRecord = <K extends z.ZodType<string>, V extends z.ZodType>(
  key: K,
  value: V,
  max: number,
  description: string,
) =>
  z
    .record(key, value)
    .refine((r) => Object.keys(r).length <= max, `at most ${max} entries`)
    .meta({ maxProperties: max, description });

export const AgentExampleSchema = z
  .object({
    id: UuidSchema,
    agent_id: UuidSchema,
    label: z.string().nullable(),
    inputs: z.record(z.string(), ExampleValueSchema).describe('Input values by input id'),
    expected: z.record(z.string(), ExampleValueSchema).describe('Expected value by output field key'),
    created_at: TimestampSchema,
  })
  .meta({ id: 'SavedAgentExample' });
export type AgentExample = z.infer<typeof AgentExampleSchema>;

export const AgentExampleCreateSchema = z
  .object({
    label: NameSchema.nullable().optional(),
    inputs: boundedRecord(
      UuidSchema,
      ExampleValueSchema,
      agentInputsMax,
      'Input values by input id (an unknown id is 422)',
    ).default({}),
    expected: boundedRecord(
      lineSchema(1, 100),
      ExampleValueSchema,
      agentOutputFieldsMax,
      'Expected values by output field key (an unknown key is 422)',
    ),
  })
  .meta({ id: 'SavedAgentExampleCreate' });
export type AgentExampleCreate = z.infer<typeof AgentExampleCreateSchema>;
export const AgentExampleListSchema = z
  .object({ examples: z.array(AgentExampleSchema).describe('Oldest first') })
  .meta({ id: 'SavedAgentExampleList' });

export const FieldAgreementSchema = z
  .object({
    key: z.string(),
    compared: z.int().describe('Examples that expect a value for the field'),
    exact: z.int().describe('Answers equal to the expected value as written'),
    normalised: z
      .int()
      .describe(
        'Answers equal once case, spacing, trailing punctuation and number formatting are set aside (exact ones included)',
      ),
    rate: z.number().min(0).max(1).nullable().describe('normalised / compared; null when nothing was compared'),
  })
  .meta({ id: 'AgentFieldAgreement' });
export type FieldAgreement = z.infer<typeof FieldAgreementSchema>;

export const TrainingResultSchema = z
  .object({
    example_id: UuidSchema.nullable().describe('null once the example was deleted'),
    agent_run_id: UuidSchema,
    status: z.enum(['queued', 'running', 'completed', 'failed', 'cancelled']),
    values: z.record(z.string(), z.unknown()).nullable(),
    error: z.string().nullable(),
    matches: z
      .record(z.string(), z.enum(['exact', 'normalised', 'mismatch']))
      .describe('By output field key the example expects'),
  })
  .meta({ id: 'AgentTrainingResult' });

export const TrainingRunSchema = z
  .object({
    id: UuidSchema,
    agent_id: UuidSchema,
    agent_version: z.int(),
    status: z.enum(['running', 'completed', 'failed']),
    examples_total: z.int(),
    examples_finished: z.int(),
    fields: z.array(FieldAgreementSchema).describe('Per output field, once the run has finished'),
    overall_rate: z
      .number()
      .min(0)
      .max(1)
      .nullable()
      .describe('Normalised matches over every compared field of every example'),
    previous: z
      .object({ id: UuidSchema, agent_version: z.int(), overall_rate: z.number().nullable() })
      .nullable()
      .describe('The finished training run before this one, to compare a change with'),
    change: z.number().nullable().describe('overall_rate minus the previous run’s; positive is better'),
    results: z.array(TrainingResultSchema),
    error: z.string().nullable(),
    workflow_id: z.string(),
    created_at: TimestampSchema,
    finished_at: TimestampSchema.nullable(),
  })
  .meta({ id: 'AgentTrainingRun' });
export type TrainingRun = z.infer<typeof TrainingRunSchema>;
export const TrainingRunListSchema = z
  .object({ training_runs: z.array(TrainingRunSchema).describe('Newest first') })
  .meta({ id: 'AgentTrainingRunList' });

// ---------------------------------------------------------------------------------------------
// Runs and steps

export const AgentStepSchema = z
  .object({
    n: z.int().describe('0 is the first step'),
    action: AgentActionSchema,
    detail: z.string().describe('What the step was asked: a query, a URL, a tool and its arguments'),
    duration_ms: z.int(),
    observation: z.string().describe(`What it found or why it could not, at most ${observationMax} characters`),
    outcome: AgentStepOutcomeSchema,
    thought: z.string().nullable().describe("The model's reason for the step"),
    created_at: TimestampSchema,
  })
  .meta({ id: 'AgentStep' });
export type AgentStep = z.infer<typeof AgentStepSchema>;

/** `cancelled`: a person cancelled it (POST …/cancel/); its cells are `skipped` and its hold went back. */
export const agentRunStatuses = ['queued', 'running', 'completed', 'failed', 'cancelled'] as const;
export type AgentRunStatus = (typeof agentRunStatuses)[number];

export const AgentRunSchema = z
  .object({
    id: UuidSchema,
    agent_id: UuidSchema.nullable(),
    agent_version: z.int(),
    target: z.enum(['cell', 'example']),
    table_id: UuidSchema.nullable(),
    column_id: UuidSchema.nullable(),
    row_id: UuidSchema.nullable(),
    training_run_id: UuidSchema.nullable(),
    example_id: UuidSchema.nullable(),
    status: z
      .enum(agentRunStatuses)
      .describe(
        'queued, running, then completed (an answer, or nothing found), failed (error says why) or cancelled (by a person; error "cancelled")',
      ),
    billed_reach: AgentReachSchema.nullable(),
    price_credits: z.int().describe('Credits held while it runs; charged only with a result'),
    credits_charged: z.int(),
    values: z.record(z.string(), z.unknown()).nullable().describe('The answer by output field key'),
    error: z.string().nullable(),
    model_key: z.string().nullable().describe('The chat model that ran it'),
    workflow_id: z.string(),
    steps: z.array(AgentStepSchema),
    created_at: TimestampSchema,
    started_at: TimestampSchema.nullable(),
    finished_at: TimestampSchema.nullable(),
  })
  .meta({ id: 'AgentRun' });
export type AgentRun = z.infer<typeof AgentRunSchema>;
export const AgentRunListSchema = z
  .object({ runs: z.array(AgentRunSchema).describe('Newest first') })
  .meta({ id: 'AgentRunList' });

/**
 * How the runs' workflows are named (workflows/agents/agent-run.contract.ts): the store writes the
 * ids on the records it creates and shows, and its callers pass the contract's naming in.
 */
export interface AgentRunWorkflowIds {
  /** A research run on one row of an agent column; each run its own id. */
  cellRun(columnId: string, rowId: string, runId: string): string;
  /** A research run on one example of a training run. */
  exampleRun(trainingRunId: string, exampleId: string): string;
  /** A training run over every example. */
  training(trainingRunId: string): string;
}

// ---------------------------------------------------------------------------------------------
// Deploy (interface spec: Deploy a saved agent onto a table)

export const AgentDeploySchema = z
  .object({
    saved_agent_id: UuidSchema,
    column_name: NameSchema.nullable().optional().describe("The parent column's name; the agent's name when omitted"),
    input_mappings: boundedRecord(UuidSchema, UuidSchema, agentInputsMax, 'Agent input id to table column id').default(
      {},
    ),
    output_field_names: z
      .array(lineSchema(1, 100))
      .max(deployFieldsMax)
      .optional()
      .describe('Output field keys to fan out into child columns; every output field when omitted'),
    output_column_names: boundedRecord(
      lineSchema(1, 100),
      NameSchema,
      deployFieldsMax,
      'Names per output field; a taken name falls back to the derived one',
    ).optional(),
    position: z
      .int()
      .min(0)
      .max(1_000_000)
      .nullable()
      .optional()
      .describe('0 is the first column; appended when omitted. The output columns follow it.'),
    run_rows: z
      .int()
      .min(1)
      .max(runRowsMax)
      .nullable()
      .optional()
      .describe('The first rows (in row order) to run right after creation; omitted means unrun; there is no run-all'),
    use_row_context: z
      .boolean()
      .nullable()
      .optional()
      .describe("Stamped onto the column; null keeps the agent's stored answer"),
  })
  .meta({ id: 'AgentDeploy', description: 'Deploy a saved agent onto a table (2.16)' });
export type AgentDeploy = z.infer<typeof AgentDeploySchema>;

export const AgentRowsRunSchema = z
  .object({
    row_ids: z
      .array(UuidSchema)
      .min(1)
      .max(runRowsMax)
      .describe('Rows to run the agent column on (there is no run-all)'),
  })
  .meta({ id: 'AgentColumnRowsRun' });

/** What an agent column shows of its configuration. */
export const AgentColumnConfigSchema = z
  .object({
    saved_agent_id: UuidSchema,
    agent_version: z.int().describe('The version deployed: the column runs it as it was then'),
    input_mappings: z.record(z.string(), UuidSchema),
    output_fields: z.array(z.string()),
    use_row_context: z.boolean(),
  })
  .meta({ id: 'AgentColumnConfig' });
export type AgentColumnConfig = z.infer<typeof AgentColumnConfigSchema>;

/** The agent as a run uses it, kept on the column and on each run. */
export interface AgentDefinition {
  id: string;
  name: string;
  version: number;
  prompt: PromptTemplate;
  inputs: AgentInput[];
  output_fields: AgentOutputField[];
  settings: AgentSettings;
  reach: AgentReach;
  mcp_servers: McpServer[];
}

/** What an agent column keeps in table_columns.config (`inputs` so a mapped column cannot be deleted under it). */
export interface StoredAgentColumnConfig {
  saved_agent_id: string;
  agent_version: number;
  inputs: Record<string, string>;
  outputs: string[];
  use_row_context: boolean;
  agent: AgentDefinition;
}

export function agentColumnConfigView(config: Partial<StoredAgentColumnConfig>): AgentColumnConfig | null {
  if (typeof config.saved_agent_id !== 'string') return null;
  return {
    saved_agent_id: config.saved_agent_id,
    agent_version: config.agent_version ?? 1,
    input_mappings: config.inputs ?? {},
    output_fields: config.outputs ?? [],
    use_row_context: config.use_row_context ?? true,
  };
}

// ---------------------------------------------------------------------------------------------
// Rules

/** The toolsets a run offers: web research for `web`, the attached MCP tools for `mcp` and `web`. */
export function runToolsets(reach: AgentReach, mcpServerCount: number): { web: boolean; mcp: boolean } {
  return { web: reach === 'web', mcp: reach !== 'none' && mcpServerCount > 0 };
}

/** What a run bills as: a run with both web and MCP bills as web; one with no tools is a plain completion. */
export function billedReach(toolsets: { web: boolean; mcp: boolean }): AgentReach {
  return toolsets.web ? 'web' : toolsets.mcp ? 'mcp' : 'none';
}

export const reachPriceCredits: Record<AgentReach, number> = { none: 1, mcp: 2, web: 5 };

/** Credits a run with a result costs. */
export function agentRunPrice(reach: AgentReach, mcpServerCount: number): number {
  return reachPriceCredits[billedReach(runToolsets(reach, mcpServerCount))];
}

/** The actions a run's model may choose from, `finish` always among them. */
export function offeredActions(
  reach: AgentReach,
  settings: Pick<AgentSettings, 'allow_fetch' | 'allow_search'>,
  mcpServerCount: number,
): AgentAction[] {
  const sets = runToolsets(reach, mcpServerCount);
  const actions: AgentAction[] = [];
  if (sets.web) {
    if (settings.allow_search) actions.push('search');
    if (settings.allow_fetch) actions.push('scrape', 'map', 'crawl');
    actions.push('find_work_email', 'read_pnet_profile', 'find_people_at_company', 'workspace_action');
  }
  if (sets.mcp) actions.push('mcp_tool');
  actions.push('finish');
  return actions;
}

/** A value as training compares it: case, spacing, trailing punctuation and number formatting set aside. */
export function normaliseAnswer(value: unknown): string {
  const text = textOf(value)
    .trim()
    .toLowerCase()
    .replace(/\s+/g, ' ')
    .replace(/[.!,;:]+$/, '');
  const number = Number(text.replace(/,/g, ''));
  return text !== '' && Number.isFinite(number) ? String(number) : text;
}

export function compareAnswer(expected: unknown, actual: unknown): 'exact' | 'normalised' | 'mismatch' {
  if (textOf(expected) === textOf(actual)) return 'exact';
  return normaliseAnswer(expected) === normaliseAnswer(actual) ? 'normalised' : 'mismatch';
}

/** Per-field agreement over results; a failed run answers nothing, so it disagrees with every field it was expected to fill. */
export function scoreAgreement(
  keys: string[],
  results: { expected: Record<string, unknown>; values: Record<string, unknown> | null }[],
): { fields: FieldAgreement[]; overall_rate: number | null } {
  let compared = 0;
  let matched = 0;
  const fields = keys.map((key) => {
    const field = { key, compared: 0, exact: 0, normalised: 0, rate: null as number | null };
    for (const r of results) {
      if (!Object.hasOwn(r.expected, key)) continue;
      field.compared += 1;
      const match = compareAnswer(r.expected[key], r.values?.[key] ?? null);
      if (r.values && match === 'exact') field.exact += 1;
      if (r.values && match !== 'mismatch') field.normalised += 1;
    }
    field.rate = field.compared > 0 ? field.normalised / field.compared : null;
    compared += field.compared;
    matched += field.normalised;
    return field;
  });
  return { fields, overall_rate: compared > 0 ? matched / compared : null };
}

/**
 * The prompt as the model reads it: text as written, each input reference replaced by that
 * input's value (empty when it has none), each context reference by the context section asked for.
 */
export function renderPrompt(
  template: PromptTemplate,
  values: Record<string, unknown>,
  context: { agent: string | null; row: string | null },
): string {
  const section = (name: (typeof contextSections)[number]) => {
    const parts = [name !== 'row' ? context.agent : null, name !== 'agent' ? context.row : null].filter(
      (p): p is string => !!p,
    );
    return parts.join('\n\n');
  };
  return template.segments
    .map((s) => {
      if (s.type === 'text') return s.text;
      if (s.type === 'input_ref') {
        return textOf(values[s.input_id]);
      }
      return section(s.section);
    })
    .join('');
}
