/**
 * Saved agents, their training examples and runs, and deploying one onto a table (interface spec:
 * Deploy a saved agent onto a table). The schemas hold every bound (stay_on_domain without a
 * starting URL is one of them: 422). An agent whose parts disagree (an input reference to no input,
 * a name or key twice) is a conflict (409), so a request the schema accepts is never 422. Examples
 * and deploys that name an input or field the agent does not have answer 422 with `issues`; a table
 * column that is not there 404; a taken parent name or no room for the columns 409; ids of another
 * workspace 404.
 */
import { randomUUID } from 'node:crypto';
import type { Db, Sql } from '../../db/sql.js';
import type { ValidationIssue } from '../../domain/shared/common.js';
import { derivedOutputName } from '../../domain/tables/enrichments.js';
import { ApiError, notFound, ValidationRefusal } from '../../domain/shared/errors.js';
import {
  agentRunPrice,
  compareAnswer,
  type AgentDefinition,
  type AgentDeploy,
  type AgentExample,
  type AgentExampleCreate,
  type AgentRun,
  type AgentStep,
  type PromptTemplate,
  type SavedAgent,
  type SavedAgentCreate,
  type SavedAgentUpdate,
  type StoredAgentColumnConfig,
  type TrainingRun,
  type AgentRunWorkflowIds,
} from '../../domain/agents/saved-agents.js';
import { columnsPerTable, type Column } from '../../domain/tables/tables.js';
import { loadColumns, toColumn } from '../tables/columns.js';
import { requireTable } from '../tables/tables.js';

/** A refusal of request values that only the agent can judge: answered 422 with `issues`. */
const issue = (field: string, msg: string, input: unknown): ValidationIssue => ({
  loc: ['body', field],
  msg,
  type: 'value_error',
  input: input ?? {},
});
const refuse = (issues: ValidationIssue[]) => {
  if (issues.length > 0) throw new ValidationRefusal(issues);
};
const conflict = (detail: string) => new ApiError('conflict', detail);

interface AgentRecord extends Omit<AgentDefinition, 'id'> {
  id: string;
  workspace_id: string;
  description: string | null;
  created_at: Date;
  updated_at: Date;
}

export function toSavedAgent(a: AgentRecord): SavedAgent {
  return {
    id: a.id,
    name: a.name,
    description: a.description,
    prompt: a.prompt,
    inputs: a.inputs,
    output_fields: a.output_fields,
    settings: { ...a.settings, saved_agent_id: a.id },
    reach: a.reach,
    mcp_servers: a.mcp_servers,
    price_credits: agentRunPrice(a.reach, a.mcp_servers.length),
    version: a.version,
    created_at: a.created_at.toISOString(),
    updated_at: a.updated_at.toISOString(),
  };
}

export const definitionOf = (a: AgentRecord): AgentDefinition => ({
  id: a.id,
  name: a.name,
  version: a.version,
  prompt: a.prompt,
  inputs: a.inputs,
  output_fields: a.output_fields,
  settings: { ...a.settings, saved_agent_id: a.id },
  reach: a.reach,
  mcp_servers: a.mcp_servers,
});

/** The agent as it will be stored, after the checks that need all of it at once. */
function checkedAgent(
  agent: Omit<AgentDefinition, 'id' | 'version' | 'name' | 'inputs'> & {
    inputs: { id?: string; name: string; description?: string | null }[];
  },
) {
  const issues: ValidationIssue[] = [];
  const inputs = agent.inputs.map((i) => ({
    id: (i.id ?? randomUUID()).toLowerCase(),
    name: i.name,
    description: i.description ?? null,
  }));
  const names = new Set<string>();
  const ids = new Set<string>();
  for (const i of inputs) {
    if (names.has(i.name.toLowerCase())) issues.push(issue('inputs', `two inputs are named "${i.name}"`, i.name));
    if (ids.has(i.id)) issues.push(issue('inputs', `two inputs have the id ${i.id}`, i.id));
    names.add(i.name.toLowerCase());
    ids.add(i.id);
  }
  for (const s of agent.prompt.segments) {
    if (s.type === 'input_ref' && !ids.has(s.input_id.toLowerCase()))
      issues.push(
        issue('prompt', `the prompt refers to input ${s.input_id}, which is not among the inputs`, s.input_id),
      );
  }
  const keys = new Set<string>();
  for (const f of agent.output_fields) {
    if (keys.has(f.key)) issues.push(issue('output_fields', `two output fields have the key "${f.key}"`, f.key));
    keys.add(f.key);
  }
  if (issues.length > 0) throw conflict(`The agent does not hold together: ${issues.map((i) => i.msg).join('; ')}.`);
  const prompt: PromptTemplate = {
    segments: agent.prompt.segments.map((s) =>
      s.type === 'input_ref' ? { ...s, input_id: s.input_id.toLowerCase() } : s,
    ),
  };
  return { ...agent, inputs, prompt };
}

async function requireAgent(db: Db, workspaceId: string, id: string, lock = false): Promise<AgentRecord> {
  const [row] = await db<
    AgentRecord[]
  >`select * from saved_agents where workspace_id = ${workspaceId} and id = ${id} ${lock ? db`for update` : db``}`;
  if (!row) throw notFound('Saved agent');
  return row;
}

export async function createSavedAgent(sql: Sql, workspaceId: string, input: SavedAgentCreate): Promise<SavedAgent> {
  const agent = checkedAgent(input);
  const [row] = await sql<AgentRecord[]>`
    insert into saved_agents (workspace_id, name, description, prompt, inputs, output_fields, settings, reach, mcp_servers)
    values (${workspaceId}, ${input.name}, ${input.description ?? null}, ${sql.json(agent.prompt)}, ${sql.json(agent.inputs)},
      ${sql.json(agent.output_fields)}, ${sql.json({ ...agent.settings, saved_agent_id: null })}, ${agent.reach}, ${sql.json(agent.mcp_servers)})
    returning *`;
  return toSavedAgent(row!);
}

export async function listSavedAgents(db: Db, workspaceId: string): Promise<SavedAgent[]> {
  const rows = await db<
    AgentRecord[]
  >`select * from saved_agents where workspace_id = ${workspaceId} order by updated_at desc, id`;
  return rows.map(toSavedAgent);
}

export const getSavedAgent = async (db: Db, workspaceId: string, id: string) =>
  toSavedAgent(await requireAgent(db, workspaceId, id));

/** Replaces what the patch names and bumps the version. */
export async function updateSavedAgent(
  sql: Sql,
  workspaceId: string,
  id: string,
  patch: SavedAgentUpdate,
): Promise<SavedAgent> {
  return sql.begin(async (tx) => {
    const current = await requireAgent(tx, workspaceId, id, true);
    const agent = checkedAgent({
      prompt: patch.prompt ?? current.prompt,
      inputs: patch.inputs ?? current.inputs,
      output_fields: patch.output_fields ?? current.output_fields,
      settings: patch.settings ?? current.settings,
      reach: patch.reach ?? current.reach,
      mcp_servers: patch.mcp_servers ?? current.mcp_servers,
    });
    const description = patch.description === undefined ? current.description : patch.description;
    const [row] = await tx<AgentRecord[]>`
      update saved_agents set name = ${patch.name ?? current.name}, description = ${description}, prompt = ${tx.json(agent.prompt)},
        inputs = ${tx.json(agent.inputs)}, output_fields = ${tx.json(agent.output_fields)},
        settings = ${tx.json({ ...agent.settings, saved_agent_id: null })}, reach = ${agent.reach}, mcp_servers = ${tx.json(agent.mcp_servers)},
        version = version + 1, updated_at = now()
      where id = ${id} returning *`;
    return toSavedAgent(row!);
  });
}

/** Deployed columns keep the version they were deployed with, so they go on working. */
export async function deleteSavedAgent(db: Db, workspaceId: string, id: string): Promise<boolean> {
  const rows = await db`delete from saved_agents where workspace_id = ${workspaceId} and id = ${id} returning id`;
  return rows.length > 0;
}

// ---------------------------------------------------------------------------------------------
// Examples and training

interface ExampleRecord {
  id: string;
  agent_id: string;
  label: string | null;
  inputs: Record<string, string | number | boolean | null>;
  expected: Record<string, string | number | boolean | null>;
  created_at: Date;
}
const toExample = (e: ExampleRecord): AgentExample => ({ ...e, created_at: e.created_at.toISOString() });

export async function createExample(
  sql: Sql,
  workspaceId: string,
  agentId: string,
  input: AgentExampleCreate,
  max: number,
): Promise<AgentExample> {
  return sql.begin(async (tx) => {
    const agent = await requireAgent(tx, workspaceId, agentId, true);
    const inputIds = new Set(agent.inputs.map((i) => i.id));
    const keys = new Set(agent.output_fields.map((f) => f.key));
    const inputs = Object.fromEntries(Object.entries(input.inputs).map(([k, v]) => [k.toLowerCase(), v]));
    refuse([
      ...Object.keys(inputs)
        .filter((id) => !inputIds.has(id))
        .map((id) => issue('inputs', `${id} is not an input of the agent`, id)),
      ...Object.keys(input.expected)
        .filter((k) => !keys.has(k))
        .map((k) => issue('expected', `"${k}" is not an output field of the agent`, k)),
    ]);
    const [kept] = await tx<
      { count: number }[]
    >`select count(*)::int as count from saved_agent_examples where agent_id = ${agentId}`;
    if (kept!.count >= max) throw conflict(`An agent keeps at most ${max} examples; delete one first.`);
    const [row] = await tx<ExampleRecord[]>`
      insert into saved_agent_examples (workspace_id, agent_id, label, inputs, expected)
      values (${workspaceId}, ${agentId}, ${input.label ?? null}, ${tx.json(inputs)}, ${tx.json(input.expected)})
      returning id, agent_id, label, inputs, expected, created_at`;
    return toExample(row!);
  });
}

export async function listExamples(db: Db, workspaceId: string, agentId: string): Promise<AgentExample[]> {
  await requireAgent(db, workspaceId, agentId);
  const rows = await db<ExampleRecord[]>`
    select id, agent_id, label, inputs, expected, created_at from saved_agent_examples where agent_id = ${agentId} order by created_at, id`;
  return rows.map(toExample);
}

export async function deleteExample(db: Db, workspaceId: string, agentId: string, exampleId: string): Promise<boolean> {
  const rows =
    await db`delete from saved_agent_examples where workspace_id = ${workspaceId} and agent_id = ${agentId} and id = ${exampleId} returning id`;
  return rows.length > 0;
}

interface RunRecord {
  id: string;
  workspace_id: string;
  agent_id: string | null;
  agent_version: number;
  target: 'cell' | 'example';
  table_id: string | null;
  column_id: string | null;
  row_id: string | null;
  training_run_id: string | null;
  example_id: string | null;
  status: AgentRun['status'];
  billed_reach: AgentRun['billed_reach'];
  price_credits: number;
  credits_charged: number;
  result: Record<string, unknown> | null;
  error: string | null;
  model_key: string | null;
  workflow_id: string;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
}

interface StepRecord extends Omit<AgentStep, 'created_at'> {
  run_id: string;
  created_at: Date;
}

async function withSteps(db: Db, runs: RunRecord[]): Promise<AgentRun[]> {
  const steps = runs.length
    ? await db<
        StepRecord[]
      >`select * from agent_run_steps where run_id = any(${runs.map((r) => r.id)}::uuid[]) order by run_id, n`
    : [];
  return runs.map((r) => ({
    id: r.id,
    agent_id: r.agent_id,
    agent_version: r.agent_version,
    target: r.target,
    table_id: r.table_id,
    column_id: r.column_id,
    row_id: r.row_id,
    training_run_id: r.training_run_id,
    example_id: r.example_id,
    status: r.status,
    billed_reach: r.billed_reach,
    price_credits: r.price_credits,
    credits_charged: r.credits_charged,
    values: r.result,
    error: r.error,
    model_key: r.model_key,
    workflow_id: r.workflow_id,
    steps: steps
      .filter((s) => s.run_id === r.id)
      .map((s) => ({
        n: s.n,
        action: s.action,
        detail: s.detail,
        duration_ms: s.duration_ms,
        observation: s.observation,
        outcome: s.outcome,
        thought: s.thought,
        created_at: s.created_at.toISOString(),
      })),
    created_at: r.created_at.toISOString(),
    started_at: r.started_at?.toISOString() ?? null,
    finished_at: r.finished_at?.toISOString() ?? null,
  }));
}

const runColumns = (db: Db) =>
  db`id, workspace_id, agent_id, agent_version, target, table_id, column_id, row_id, training_run_id, example_id, status, billed_reach,
    price_credits, credits_charged, result, error, model_key, workflow_id, created_at, started_at, finished_at`;

export async function getAgentRun(db: Db, workspaceId: string, runId: string): Promise<AgentRun> {
  const [run] = await db<
    RunRecord[]
  >`select ${runColumns(db)} from agent_runs where workspace_id = ${workspaceId} and id = ${runId}`;
  if (!run) throw notFound('Agent run');
  return (await withSteps(db, [run]))[0]!;
}

export async function listCellRuns(
  db: Db,
  workspaceId: string,
  tableId: string,
  columnId: string,
  rowId: string | undefined,
  limit: number,
): Promise<AgentRun[]> {
  await requireTable(db, workspaceId, tableId);
  const [column] =
    await db`select 1 from table_columns where table_id = ${tableId} and id = ${columnId} and kind = 'agent' and parent_column_id is null`;
  if (!column) throw notFound('Agent column');
  const runs = await db<RunRecord[]>`
    select ${runColumns(db)} from agent_runs where workspace_id = ${workspaceId} and column_id = ${columnId} ${rowId ? db`and row_id = ${rowId}` : db``}
    order by created_at desc, id limit ${limit}`;
  return withSteps(db, runs);
}

interface TrainingRecord {
  id: string;
  agent_id: string;
  agent_version: number;
  status: TrainingRun['status'];
  fields: TrainingRun['fields'] | null;
  overall_rate: number | null;
  error: string | null;
  created_at: Date;
  finished_at: Date | null;
}

async function toTrainingRuns(
  db: Db,
  records: TrainingRecord[],
  workflowIds: AgentRunWorkflowIds,
): Promise<TrainingRun[]> {
  if (records.length === 0) return [];
  const runs = await db<(RunRecord & { expected: Record<string, unknown> | null })[]>`
    select r.id, r.training_run_id, r.example_id, r.status, r.result, r.error, r.created_at, e.expected
    from agent_runs r left join saved_agent_examples e on e.id = r.example_id
    where r.training_run_id = any(${records.map((t) => t.id)}::uuid[]) order by e.created_at nulls last, r.id`;
  const out: TrainingRun[] = [];
  for (const t of records) {
    const [previous] = await db<{ id: string; agent_version: number; overall_rate: number | null }[]>`
      select id, agent_version, overall_rate from agent_training_runs
      where agent_id = ${t.agent_id} and status = 'completed' and (created_at, id) < (${t.created_at}, ${t.id})
      order by created_at desc, id desc limit 1`;
    const mine = runs.filter((r) => r.training_run_id === t.id);
    out.push({
      id: t.id,
      agent_id: t.agent_id,
      agent_version: t.agent_version,
      status: t.status,
      examples_total: mine.length,
      examples_finished: mine.filter((r) => r.status === 'completed' || r.status === 'failed').length,
      fields: t.fields ?? [],
      overall_rate: t.overall_rate,
      previous: previous ?? null,
      change:
        previous && previous.overall_rate !== null && t.overall_rate !== null
          ? t.overall_rate - previous.overall_rate
          : null,
      results: mine.map((r) => ({
        example_id: r.example_id,
        agent_run_id: r.id,
        status: r.status,
        values: r.result,
        error: r.error,
        matches: Object.fromEntries(
          Object.entries(r.expected ?? {}).map(([k, v]) => [
            k,
            r.result ? compareAnswer(v, r.result[k] ?? null) : 'mismatch',
          ]),
        ),
      })),
      error: t.error,
      workflow_id: workflowIds.training(t.id),
      created_at: t.created_at.toISOString(),
      finished_at: t.finished_at?.toISOString() ?? null,
    });
  }
  return out;
}

/** A training run over every example: one research run each, on the agent as it is now. */
export async function createTrainingRun(
  sql: Sql,
  workspaceId: string,
  agentId: string,
  modelReady: boolean,
  workflowIds: AgentRunWorkflowIds,
): Promise<{ training: TrainingRun; runs: { runId: string; workflowId: string }[] }> {
  return sql.begin(async (tx) => {
    const agent = await requireAgent(tx, workspaceId, agentId, true);
    if (!modelReady)
      throw conflict('No chat model is configured here (OPENAI_API_KEY and OPENAI_MODEL); agents cannot run.');
    const examples = await tx<
      ExampleRecord[]
    >`select * from saved_agent_examples where agent_id = ${agentId} order by created_at, id`;
    if (examples.length === 0) throw conflict('The agent has no examples to train on; add some first.');
    const [training] = await tx<TrainingRecord[]>`
      insert into agent_training_runs (workspace_id, agent_id, agent_version) values (${workspaceId}, ${agentId}, ${agent.version}) returning *`;
    const definition = definitionOf(agent);
    const price = agentRunPrice(agent.reach, agent.mcp_servers.length);
    const rows = examples.map((e) => ({
      id: randomUUID(),
      example_id: e.id,
      inputs: e.inputs,
      workflow_id: workflowIds.exampleRun(training!.id, e.id),
    }));
    await tx`
      insert into agent_runs (id, workspace_id, agent_id, agent_version, agent, target, training_run_id, example_id, inputs, price_credits, workflow_id)
      select x.id, ${workspaceId}, ${agentId}, ${agent.version}, ${tx.json(definition as never)}, 'example', ${training!.id}, x.example_id, x.inputs, ${price}, x.workflow_id
      from jsonb_to_recordset(${tx.json(rows)}) as x (id uuid, example_id uuid, inputs jsonb, workflow_id text)`;
    const [view] = await toTrainingRuns(tx, [training!], workflowIds);
    return { training: view!, runs: rows.map((r) => ({ runId: r.id, workflowId: r.workflow_id })) };
  });
}

export async function listTrainingRuns(
  db: Db,
  workspaceId: string,
  agentId: string,
  limit: number,
  workflowIds: AgentRunWorkflowIds,
): Promise<TrainingRun[]> {
  await requireAgent(db, workspaceId, agentId);
  const rows = await db<
    TrainingRecord[]
  >`select * from agent_training_runs where agent_id = ${agentId} order by created_at desc, id desc limit ${limit}`;
  return toTrainingRuns(db, rows, workflowIds);
}

export async function getTrainingRun(
  db: Db,
  workspaceId: string,
  agentId: string,
  id: string,
  workflowIds: AgentRunWorkflowIds,
): Promise<TrainingRun> {
  const [row] = await db<
    TrainingRecord[]
  >`select * from agent_training_runs where workspace_id = ${workspaceId} and agent_id = ${agentId} and id = ${id}`;
  if (!row) throw notFound('Training run');
  return (await toTrainingRuns(db, [row], workflowIds))[0]!;
}

// ---------------------------------------------------------------------------------------------
// Deploy (interface spec: Deploy a saved agent onto a table) and running rows

async function placeGroup(db: Db, tableId: string, group: string[], wanted: number) {
  const rows = await db<
    { id: string }[]
  >`select id from table_columns where table_id = ${tableId} order by position, created_at, id`;
  const ids = rows.map((r) => r.id).filter((id) => !group.includes(id));
  ids.splice(Math.min(wanted, ids.length), 0, ...group);
  await db`
    update table_columns c set position = o.n - 1
    from unnest(${ids}::uuid[]) with ordinality as o (id, n)
    where c.id = o.id and c.position <> o.n - 1`;
}

/** Queued runs of an agent column on rows, their cells made pending for them (what they held is kept aside). */
async function queueCellRuns(
  db: Db,
  workspaceId: string,
  tableId: string,
  columnId: string,
  rowIds: string[],
  workflowIds: AgentRunWorkflowIds,
): Promise<RunRecord[]> {
  if (rowIds.length === 0) return [];
  const [column] = await db<
    { config: StoredAgentColumnConfig }[]
  >`select config from table_columns where id = ${columnId}`;
  const config = column!.config;
  const rows = rowIds.map((rowId) => {
    const id = randomUUID();
    return { id, row_id: rowId, workflow_id: workflowIds.cellRun(columnId, rowId, id) };
  });
  let runs: RunRecord[];
  try {
    runs = await db<RunRecord[]>`
      insert into agent_runs (id, workspace_id, agent_id, agent_version, agent, target, table_id, column_id, row_id, use_row_context, price_credits, workflow_id)
      select x.id, ${workspaceId}, ${config.saved_agent_id}, ${config.agent_version}, ${db.json(config.agent as never)}, 'cell', ${tableId}, ${columnId},
        x.row_id, ${config.use_row_context}, ${agentRunPrice(config.agent.reach, config.agent.mcp_servers.length)}, x.workflow_id
      from jsonb_to_recordset(${db.json(rows)}) as x (id uuid, row_id uuid, workflow_id text)
      returning ${runColumns(db)}`;
  } catch (error) {
    if ((error as { code?: string }).code === '23505')
      throw conflict('A run of this agent column is already going on one of these rows.');
    throw error;
  }
  const group = await db<
    { id: string }[]
  >`select id from table_columns where id = ${columnId} or parent_column_id = ${columnId}`;
  await db`
    insert into table_cells (column_id, row_id, state, value, error, cost, run_id)
    select g.id, x.row_id, 'pending', null, null, 0, x.id
    from unnest(${group.map((g) => g.id)}::uuid[]) as g (id) cross join jsonb_to_recordset(${db.json(rows)}) as x (id uuid, row_id uuid)
    on conflict (column_id, row_id) do update set
      previous = case when table_cells.state in ('done', 'error', 'skipped')
        then jsonb_build_object('state', table_cells.state, 'value', table_cells.value, 'error', table_cells.error, 'cost', table_cells.cost)
        else table_cells.previous end,
      state = 'pending', value = null, error = null, cost = 0, run_id = excluded.run_id, updated_at = now()`;
  return runs;
}

export interface Deployed {
  column: Column;
  output_columns: Column[];
  runs: AgentRun[];
}

export async function deployAgent(
  sql: Sql,
  workspaceId: string,
  tableId: string,
  input: AgentDeploy,
  modelReady: boolean,
  workflowIds: AgentRunWorkflowIds,
): Promise<Deployed> {
  return sql.begin(async (tx) => {
    const agent = await requireAgent(tx, workspaceId, input.saved_agent_id);
    if (!modelReady)
      throw conflict(
        'No chat model is configured here (OPENAI_API_KEY and OPENAI_MODEL); an agent column could not run.',
      );
    await requireTable(tx, workspaceId, tableId, 'update');
    const before = await loadColumns(tx, tableId);

    const inputIds = new Set(agent.inputs.map((i) => i.id));
    const keys = agent.output_fields.map((f) => f.key);
    const mappings = Object.fromEntries(
      Object.entries(input.input_mappings).map(([k, v]) => [k.toLowerCase(), v.toLowerCase()]),
    );
    const outputs = input.output_field_names ? [...new Set(input.output_field_names)] : keys;
    const names = input.output_column_names ?? {};
    refuse([
      ...Object.keys(mappings)
        .filter((id) => !inputIds.has(id))
        .map((id) => issue('input_mappings', `${id} is not an input of the agent`, id)),
      ...outputs
        .filter((k) => !keys.includes(k))
        .map((k) => issue('output_field_names', `"${k}" is not an output field of the agent`, k)),
      ...Object.keys(names)
        .filter((k) => !outputs.includes(k))
        .map((k) => issue('output_column_names', `"${k}" is not among the output fields deployed`, k)),
    ]);
    for (const columnId of Object.values(mappings)) {
      if (!before.byId.has(columnId))
        throw new ApiError('not_found', `Column ${columnId} of input_mappings not found in this table.`);
    }
    const startColumn = agent.settings.starting_url_column_id;
    if (startColumn && !before.byId.has(startColumn))
      throw conflict(`The agent starts from column ${startColumn}, which is not a column of this table.`);
    // The starting URL is read like an input, so its column cannot be deleted under the agent either.
    const inputs = startColumn ? { ...mappings, starting_url: startColumn } : mappings;

    if (before.list.length + 1 + outputs.length > columnsPerTable) {
      throw conflict(
        `A table has at most ${columnsPerTable} columns; this one and its ${outputs.length} output columns do not fit.`,
      );
    }
    const parentName = input.column_name ?? agent.name;
    const taken = new Set(before.list.map((c) => c.name.toLowerCase()));
    if (taken.has(parentName.toLowerCase())) throw conflict(`The table already has a column named "${parentName}".`);
    taken.add(parentName.toLowerCase());
    // A name asked for that is taken falls back to the derived one (the interface spec's deploy rule).
    const childNames = outputs.map((key) => {
      let name = names[key];
      if (!name || taken.has(name.toLowerCase())) name = derivedOutputName(parentName, key);
      for (let n = 2; taken.has(name.toLowerCase()); n += 1)
        name = `${derivedOutputName(parentName, key).slice(0, 250)} (${n})`;
      taken.add(name.toLowerCase());
      return name;
    });

    const definition = definitionOf(agent);
    const config: StoredAgentColumnConfig = {
      saved_agent_id: agent.id,
      agent_version: agent.version,
      inputs,
      outputs,
      use_row_context: input.use_row_context ?? agent.settings.use_row_context,
      agent: definition,
    };
    const [parent] = await tx<{ id: string }[]>`
      insert into table_columns (workspace_id, table_id, name, kind, position, config)
      values (${workspaceId}, ${tableId}, ${parentName}, 'agent', ${before.list.length}, ${tx.json(config as never)})
      returning id`;
    const children = outputs.map((key, n) => ({
      name: childNames[n]!,
      position: before.list.length + 1 + n,
      config: { output: key },
    }));
    const inserted = children.length
      ? await tx<{ id: string; position: number }[]>`
          insert into table_columns (workspace_id, table_id, name, kind, position, config, parent_column_id)
          select ${workspaceId}, ${tableId}, x.name, 'agent', x.position, x.config, ${parent!.id}
          from jsonb_to_recordset(${tx.json(children)}) as x (name text, position int, config jsonb)
          order by x.position
          returning id, position`
      : [];
    const childIds = [...inserted].sort((a, b) => a.position - b.position).map((c) => c.id);
    if (input.position !== undefined && input.position !== null)
      await placeGroup(tx, tableId, [parent!.id, ...childIds], input.position);

    let runs: RunRecord[] = [];
    if (input.run_rows) {
      const rows = await tx<
        { id: string }[]
      >`select id from table_rows where table_id = ${tableId} order by seq limit ${input.run_rows}`;
      runs = await queueCellRuns(
        tx,
        workspaceId,
        tableId,
        parent!.id,
        rows.map((r) => r.id),
        workflowIds,
      );
    }
    const columns = await loadColumns(tx, tableId);
    return {
      column: toColumn(columns.byId.get(parent!.id)!, columns),
      output_columns: childIds.map((id) => toColumn(columns.byId.get(id)!, columns)),
      runs: await withSteps(tx, runs),
    };
  });
}

/** Runs the agent column on the rows named (at most 50; there is no run-all). */
export async function runAgentRows(
  sql: Sql,
  workspaceId: string,
  tableId: string,
  columnId: string,
  rowIds: string[],
  modelReady: boolean,
  workflowIds: AgentRunWorkflowIds,
): Promise<AgentRun[]> {
  return sql.begin(async (tx) => {
    await requireTable(tx, workspaceId, tableId, 'share');
    const [column] = await tx<
      { kind: string; parent_column_id: string | null }[]
    >`select kind, parent_column_id from table_columns where table_id = ${tableId} and id = ${columnId}`;
    if (!column) throw notFound('Column');
    if (column.kind !== 'agent' || column.parent_column_id !== null)
      throw conflict('Only an agent column (not one of its output columns) runs an agent.');
    if (!modelReady)
      throw conflict('No chat model is configured here (OPENAI_API_KEY and OPENAI_MODEL); agents cannot run.');
    const wanted = [...new Set(rowIds.map((id) => id.toLowerCase()))];
    const found = await tx<
      { id: string }[]
    >`select id from table_rows where table_id = ${tableId} and id = any(${wanted}::uuid[]) order by seq`;
    const missing = wanted.filter((id) => !found.some((r) => r.id === id));
    if (missing.length > 0) throw new ApiError('not_found', `Row ${missing[0]} not found in this table.`);
    return withSteps(
      tx,
      await queueCellRuns(
        tx,
        workspaceId,
        tableId,
        columnId,
        found.map((r) => r.id),
        workflowIds,
      ),
    );
  });
}

/** The going (queued or running) runs of an agent column, to cancel; 404 for a table or agent column not found. */
export async function goingCellRuns(
  db: Db,
  workspaceId: string,
  tableId: string,
  columnId: string,
): Promise<{ id: string; workflow_id: string }[]> {
  await requireTable(db, workspaceId, tableId);
  const [column] =
    await db`select 1 from table_columns where table_id = ${tableId} and id = ${columnId} and kind = 'agent' and parent_column_id is null`;
  if (!column) throw notFound('Agent column');
  return db<{ id: string; workflow_id: string }[]>`
    select id, workflow_id from agent_runs where workspace_id = ${workspaceId} and column_id = ${columnId} and status in ('queued', 'running')
    order by created_at, id`;
}

/** One run to cancel: 404 when not the workspace's, 409 when it has ended already. */
export async function goingRun(
  db: Db,
  workspaceId: string,
  runId: string,
): Promise<{ id: string; workflow_id: string }> {
  const run = await getAgentRun(db, workspaceId, runId);
  if (run.status !== 'queued' && run.status !== 'running')
    throw conflict(`The run is already ${run.status}; nothing changed.`);
  return run;
}

/** auto_run starts at most this many agent runs per add; rows past it (a large CSV) are left unrun, to run by name. */
export const autoRunRowsMax = 1000;

/**
 * auto_run: rows were added to the table. Each agent column queues runs on the newest `added`
 * rows (at most autoRunRowsMax) that have no going run; with keep_existing_results a row whose
 * cell already holds an answer is left alone. Answers the runs queued, to start.
 */
export async function queueNewRowRuns(
  sql: Sql,
  workspaceId: string,
  tableId: string,
  added: number,
  workflowIds: AgentRunWorkflowIds,
): Promise<RunRecord[]> {
  const columns = await sql<{ id: string; keep_existing_results: boolean }[]>`
    select c.id, t.keep_existing_results
    from tables t join table_columns c on c.table_id = t.id
    where t.id = ${tableId} and t.workspace_id = ${workspaceId} and t.auto_run and t.deleted_at is null
      and c.kind = 'agent' and c.parent_column_id is null
    order by c.position`;
  const queued: RunRecord[] = [];
  for (const column of columns) {
    const runs = await sql.begin(async (tx) => {
      await requireTable(tx, workspaceId, tableId, 'share');
      const rows = await tx<{ id: string }[]>`
        select r.id from (select id, seq from table_rows where table_id = ${tableId} order by seq desc limit ${Math.min(added, autoRunRowsMax)}) r
        where not exists (select 1 from agent_runs a where a.column_id = ${column.id} and a.row_id = r.id and a.target = 'cell' and a.status in ('queued', 'running'))
          ${column.keep_existing_results ? tx`and not exists (select 1 from table_cells c where c.column_id = ${column.id} and c.row_id = r.id and c.state = 'done' and c.value is not null)` : tx``}
        order by r.seq`;
      return queueCellRuns(
        tx,
        workspaceId,
        tableId,
        column.id,
        rows.map((r) => r.id),
        workflowIds,
      );
    });
    queued.push(...runs);
  }
  return queued;
}
