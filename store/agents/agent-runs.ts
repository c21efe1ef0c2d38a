/**
 * Queries of a saved agent's research runs: the run row (moved by compare-and-set on its status),
 * its steps (one per (run, n)), the cells of an agent column it owns (table_cells.run_id), the
 * credit hold it took, the profile reads it queued as browser steps, and training runs' scores.
 */
import type { Db, Sql } from '../../db/sql.js';
import type {
  AgentAction,
  AgentDefinition,
  AgentReach,
  AgentRunStatus,
  AgentStepOutcome,
} from '../../domain/agents/saved-agents.js';
import type { CellValue, Cells } from '../../domain/tables/tables.js';
import type { StepRow } from '../pnet/steps.js';

export interface AgentRunRecord {
  id: string;
  workspace_id: string;
  agent_id: string | null;
  agent: AgentDefinition;
  target: 'cell' | 'example';
  table_id: string | null;
  column_id: string | null;
  row_id: string | null;
  training_run_id: string | null;
  inputs: Record<string, CellValue>;
  use_row_context: boolean;
  status: AgentRunStatus;
  price_credits: number;
  prompt: string | null;
  start_url: string | null;
  mcp_tools: { server: number; name: string; description: string }[];
}

export interface RecordedStep {
  n: number;
  action: AgentAction;
  outcome: AgentStepOutcome;
}

/** The cause key of the credit hold a run takes when it starts. */
export const agentRunCauseKey = (runId: string) => `agent-run:${runId}`;

export async function loadAgentRun(db: Db, runId: string, lock = false): Promise<AgentRunRecord | undefined> {
  return (await db<AgentRunRecord[]>`select * from agent_runs where id = ${runId} ${lock ? db`for update` : db``}`)[0];
}

// ---------------------------------------------------------------------------------------------
// The run's row: queued -> running -> completed / failed / cancelled

/** queued -> running, with the rendered prompt and what the run starts from. */
export async function startAgentRun(
  db: Db,
  runId: string,
  start: {
    prompt: string;
    startUrl: string | null;
    mcpTools: AgentRunRecord['mcp_tools'];
    modelKey: string;
    inputs: Record<string, unknown>;
  },
): Promise<void> {
  await db`
          update agent_runs set status = 'running', started_at = now(), prompt = ${start.prompt}, start_url = ${start.startUrl},
            mcp_tools = ${db.json(start.mcpTools)}, model_key = ${start.modelKey}, inputs = ${db.json(start.inputs as never)}
          where id = ${runId} and status = 'queued'`;
}

/** running -> completed with the answer (null for an empty one) and what was charged. */
export async function completeAgentRun(
  db: Db,
  runId: string,
  end: { result: Record<string, unknown> | null; charged: number; billed: AgentReach; error: string | null },
): Promise<void> {
  await db`
          update agent_runs set status = 'completed', result = ${end.result === null ? null : db.json(end.result as never)}, credits_charged = ${end.charged},
            billed_reach = ${end.billed}, finished_at = now(),
            error = ${end.error}
          where id = ${runId} and status = 'running'`;
}

export async function failAgentRun(db: Db, runId: string, error: string): Promise<void> {
  await db`update agent_runs set status = 'failed', error = ${error}, finished_at = now() where id = ${runId}`;
}

export async function cancelAgentRun(db: Db, runId: string): Promise<void> {
  await db`update agent_runs set status = 'cancelled', error = 'cancelled', finished_at = now() where id = ${runId}`;
}

/** The id of the credit hold the run took when it started, if any. */
export async function findRunHold(db: Db, workspaceId: string, runId: string): Promise<string | undefined> {
  const [hold] = await db<
    { id: string }[]
  >`select id from credit_holds where workspace_id = ${workspaceId} and cause_key = ${agentRunCauseKey(runId)}`;
  return hold?.id;
}

// ---------------------------------------------------------------------------------------------
// Steps

/** A research step as it is recorded. */
export interface NewRunStep {
  n: number;
  action: AgentAction;
  detail: string;
  duration_ms: number;
  observation: string;
  outcome: AgentStepOutcome;
  thought: string | null;
}

/** Records step n once; nothing when the run's record is gone (with its row or column). Values come clipped. */
export async function insertRunStep(db: Db, runId: string, step: NewRunStep): Promise<void> {
  await db`
    insert into agent_run_steps (run_id, n, action, detail, duration_ms, observation, outcome, thought)
    select ${runId}, ${step.n}, ${step.action}, ${step.detail}, ${step.duration_ms}, ${step.observation},
      ${step.outcome}, ${step.thought}
    where exists (select 1 from agent_runs where id = ${runId})
    on conflict (run_id, n) do nothing`;
}

export async function findRunStep(db: Db, runId: string, n: number): Promise<RecordedStep | undefined> {
  const [stored] = await db<
    RecordedStep[]
  >`select n, action, outcome from agent_run_steps where run_id = ${runId} and n = ${n}`;
  return stored;
}

/** The steps before n, oldest first: what the model is shown. */
export function runStepsBefore(db: Db, runId: string, n: number) {
  return db<{ n: number; detail: string; thought: string | null; outcome: string; observation: string }[]>`
        select n, detail, thought, outcome, observation from agent_run_steps where run_id = ${runId} and n < ${n} order by n`;
}

// ---------------------------------------------------------------------------------------------
// The row and the agent column's cells

/** The agent column and its output columns: the cells a cell run owns. */
export async function agentCellGroup(db: Db, columnId: string): Promise<{ id: string; output: string | null }[]> {
  const rows = await db<{ id: string; config: { output?: string } }[]>`
    select id, config from table_columns where id = ${columnId} or parent_column_id = ${columnId} order by position`;
  return [...rows.filter((r) => r.id === columnId), ...rows.filter((r) => r.id !== columnId)].map((r) => ({
    id: r.id,
    output: r.id === columnId ? null : (r.config.output ?? null),
  }));
}

/** The agent column's input mappings (input id -> column id). */
export async function agentColumnConfig(
  db: Db,
  columnId: string | null,
): Promise<{ inputs?: Record<string, string> } | undefined> {
  const [column] = await db<
    { config: { inputs?: Record<string, string> } }[]
  >`select config from table_columns where id = ${columnId}`;
  return column?.config;
}

export async function rowCells(db: Db, rowId: string | null): Promise<{ cells: Cells } | undefined> {
  const [row] = await db<{ cells: Cells }[]>`select cells from table_rows where id = ${rowId}`;
  return row;
}

export async function rowWithCells(db: Db, rowId: string | null): Promise<{ id: string; cells: Cells } | undefined> {
  const [row] = await db<{ id: string; cells: Cells }[]>`select id, cells from table_rows where id = ${rowId}`;
  return row;
}

/** The row's computed cells that hold an answer. */
export function doneCellValues(db: Db, rowId: string | null) {
  return db<{ column_id: string; value: unknown }[]>`
    select column_id, value from table_cells where row_id = ${rowId} and state = 'done' and value is not null`;
}

/** The row's computed cells of these columns that are done. */
export function doneCellValuesOf(db: Db, rowId: string | null, columnIds: string[]) {
  return db<{ column_id: string; value: unknown }[]>`
            select column_id, value from table_cells where row_id = ${rowId} and state = 'done' and column_id = any(${columnIds}::uuid[])`;
}

/** The agent column's cell -> running, only while this run owns it; false when a newer run does. */
export async function claimRunCell(
  db: Db,
  columnId: string | null,
  rowId: string | null,
  runId: string,
): Promise<boolean> {
  const moved = await db`
            update table_cells set state = 'running', updated_at = now()
            where column_id = ${columnId} and row_id = ${rowId} and run_id = ${runId} and state in ('pending', 'running') returning 1`;
  return moved.length > 0;
}

/** The output columns' cells the run owns, pending -> running. */
export async function claimRunOutputCells(
  db: Db,
  columnId: string | null,
  rowId: string | null,
  runId: string,
): Promise<void> {
  await db`
            update table_cells set state = 'running', updated_at = now()
            where column_id in (select id from table_columns where parent_column_id = ${columnId}) and row_id = ${rowId} and run_id = ${runId} and state = 'pending'`;
}

/** Settles the cells the run still owns in a state of `from`; answers the columns moved. */
export function settleRunCells(
  db: Db,
  run: { id: string; row_id: string | null },
  from: string[],
  to: { state: 'done' | 'error' | 'skipped'; error: string | null },
  writes: { column_id: string; value: unknown; cost: number }[],
) {
  return db<{ column_id: string }[]>`
    update table_cells c set state = ${to.state}, value = x.value, error = ${to.error}, cost = x.cost, previous = null, updated_at = now()
    from jsonb_to_recordset(${db.json(writes as never)}) as x (column_id uuid, value jsonb, cost int)
    where c.column_id = x.column_id and c.row_id = ${run.row_id} and c.run_id = ${run.id} and c.state = any(${from}::text[])
    returning c.column_id`;
}

/** A cancelled run's cells are put back as they were before it (those that held something). */
export async function restoreRunCells(
  db: Db,
  run: { id: string; row_id: string | null },
  group: string[],
): Promise<void> {
  await db`
            update table_cells set state = previous ->> 'state', value = nullif(previous -> 'value', 'null'::jsonb), error = previous ->> 'error',
              cost = coalesce((previous ->> 'cost')::int, 0), previous = null, updated_at = now()
            where column_id = any(${group}::uuid[]) and row_id = ${run.row_id} and run_id = ${run.id} and state in ('pending', 'running') and previous is not null`;
}

// ---------------------------------------------------------------------------------------------
// Profile reads (read_pnet_profile) queued as browser steps

/** The browser step a run queued for its step n, found by the run's id and step in its params. */
export async function profileReadStepOf(
  db: Db,
  workspaceId: string,
  runId: string,
  n: number,
): Promise<StepRow | undefined> {
  const [existing] = await db<StepRow[]>`
        select * from browser_steps where workspace_id = ${workspaceId} and params ->> 'agent_run_id' = ${runId} and params ->> 'agent_run_step' = ${String(n)}`;
  return existing;
}

/**
 * The connected account to read a profile with: one not held at a checkpoint, automatic before
 * manual, with a browser holding its lease, then the one with the fewest open steps.
 */
export async function profileReadAccount(
  db: Db,
  workspaceId: string,
): Promise<{ id: string; run_mode: 'manual' | 'automatic' } | undefined> {
  const [account] = await db<{ id: string; run_mode: 'manual' | 'automatic' }[]>`
        select a.id, a.run_mode from pnet_accounts a
        where a.workspace_id = ${workspaceId} and a.status = 'connected'
        order by a.checkpoint_status = 'ok' desc, a.run_mode = 'automatic' desc, a.lease_expires_at > now() desc nulls last,
          (select count(*) from browser_steps s where s.account_id = a.id and s.status in ('awaiting_approval', 'queued', 'resuming', 'claimed')),
          a.created_at, a.id
        limit 1`;
  return account;
}

/** contact_stop_reason() for a profile URL alone (no email, no enrolment). */
export async function profileStopReason(db: Db, workspaceId: string, profileUrl: string): Promise<string | null> {
  const [stop] = await db<
    { reason: string | null }[]
  >`select contact_stop_reason(${workspaceId}, null, ${profileUrl}, null) as reason`;
  return stop?.reason ?? null;
}

/** The profile reads a run queued that no browser has claimed yet. */
export function openProfileReads(db: Db, workspaceId: string, runId: string) {
  return db<{ id: string }[]>`
          select id from browser_steps where workspace_id = ${workspaceId} and params ->> 'agent_run_id' = ${runId} and status in ('awaiting_approval', 'queued', 'resuming')`;
}

/** The workflow of the running run that queued this settled step, if any. */
export async function runWaitingOnStep(sql: Sql, stepId: string): Promise<string | undefined> {
  const [run] = await sql<{ workflow_id: string }[]>`
    select r.workflow_id from browser_steps s join agent_runs r on r.id::text = s.params ->> 'agent_run_id' and r.workspace_id = s.workspace_id
    where s.id = ${stepId} and s.status in ('succeeded', 'failed', 'rejected', 'skipped', 'cancelled') and r.status = 'running'`;
  return run?.workflow_id;
}

// ---------------------------------------------------------------------------------------------
// Training runs

export async function lockTrainingRun(
  db: Db,
  trainingRunId: string,
): Promise<{ id: string; status: string; agent_id: string } | undefined> {
  const [training] = await db<
    { id: string; status: string; agent_id: string }[]
  >`select * from agent_training_runs where id = ${trainingRunId} for update`;
  return training;
}

/** Each run of a training run with its answer and the example's expected values. */
export function trainingRunAnswers(db: Db, trainingRunId: string) {
  return db<
    {
      agent: AgentDefinition;
      status: string;
      result: Record<string, unknown> | null;
      expected: Record<string, unknown> | null;
    }[]
  >`
          select r.agent, r.status, r.result, e.expected from agent_runs r left join saved_agent_examples e on e.id = r.example_id
          where r.training_run_id = ${trainingRunId}`;
}

export async function completeTrainingRun(
  db: Db,
  trainingRunId: string,
  score: { fields: unknown; overall_rate: number | null },
): Promise<void> {
  await db`
          update agent_training_runs set status = 'completed', fields = ${db.json(score.fields as never)}, overall_rate = ${score.overall_rate}, finished_at = now()
          where id = ${trainingRunId}`;
}
