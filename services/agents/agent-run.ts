/**
 * A research run's use cases, in the order its workflow (workflows/agents/agent-run.ts) calls
 * them: begin, decide each step (agent-tools.ts runs a tool, profile-reads.ts a profile read),
 * finish, or fail, or a person's cancel; a training run is scored once its runs ended. Each is
 * guarded so a retried activity changes nothing twice: the run moves queued -> running ->
 * completed/failed/cancelled by compare-and-set on its status; a step is recorded once per
 * (run, n); cells of an agent column move only while this run owns them (table_cells.run_id)
 * and are `running`. Credits: the run's price is held when it starts (cause key
 * `agent-run:<run id>`), charged in the transaction that stores a result, and returned for an
 * empty answer, a failure or a cancel.
 */
import type { Db } from '../../db/sql.js';
import {
  clip,
  endedRun,
  finishValues,
  parseDecision,
  systemPrompt,
  type AgentDecision,
  type AgentRunPlan,
  type AgentStepInput,
} from '../../domain/agents/agent-run.js';
import {
  billedReach,
  maxStepsFor,
  offeredActions,
  renderPrompt,
  runToolsets,
  scoreAgreement,
  type AgentRunStatus,
} from '../../domain/agents/saved-agents.js';
import { businessContextSection, contextCharsDefault } from '../../domain/documents/documents.js';
import { ApiError, nonRetryable, retryable } from '../../domain/shared/errors.js';
import { dependentsOf } from '../../domain/tables/formula.js';
import { displayValue, type CellValue, type Cells } from '../../domain/tables/tables.js';
import type { AgentSuppliers } from '../../integrations/agent-tools/index.js';
import { ChatModelError, type ChatMessage } from '../../integrations/chat-model.js';
import {
  agentCellGroup,
  agentColumnConfig,
  agentRunCauseKey,
  cancelAgentRun as cancelRunRow,
  claimRunCell,
  claimRunOutputCells,
  completeAgentRun,
  completeTrainingRun,
  doneCellValues,
  doneCellValuesOf,
  failAgentRun as failRunRow,
  findRunHold,
  loadAgentRun,
  lockTrainingRun,
  restoreRunCells,
  rowCells,
  rowWithCells,
  runStepsBefore,
  settleRunCells,
  startAgentRun,
  trainingRunAnswers,
  type AgentRunRecord,
} from '../../store/agents/agent-runs.js';
import { businessContext } from '../../store/documents/documents.js';
import { chargeHold, holdCredits, releaseHold } from '../../store/platform/credits.js';
import type { StepRow } from '../../store/pnet/steps.js';
import { writeFormulaCells } from '../../store/tables/cells.js';
import { loadColumns } from '../../store/tables/columns.js';
import type { ServiceDeps } from '../deps.js';
import { agentTools } from './agent-tools.js';
import { cancelOpenProfileReads } from './profile-reads.js';
import { recordStep, runningRun } from './run-steps.js';

/** The database of `ServiceDeps`, and what research runs call as the worker holds it. */
export interface AgentRunDeps extends Pick<ServiceDeps, 'sql'> {
  /** Characters of business context a prompt reads (DOCUMENT_CONTEXT_CHARS). */
  businessContextChars?: number;
  suppliers: AgentSuppliers;
  /** Starts a browser step's workflow (read_pnet_profile queues one); idempotent. */
  startStep?: (row: StepRow) => Promise<void>;
}

/** Moves the run's cells (the agent column and its output columns) and the formulas that read them; answers whether the agent column's cell moved. */
async function settleCells(
  db: Db,
  run: AgentRunRecord,
  from: string[],
  to: {
    state: 'done' | 'error' | 'skipped';
    values: Record<string, unknown> | null;
    error: string | null;
    cost: number;
  },
): Promise<boolean> {
  const group = await agentCellGroup(db, run.column_id!);
  const writes = group.map((c) => ({
    column_id: c.id,
    value: c.output === null ? to.values : to.values ? (to.values[c.output] ?? null) : null,
    cost: c.output === null ? to.cost : 0,
  }));
  const moved = await settleRunCells(db, run, from, { state: to.state, error: to.error }, writes);
  if (moved.length > 0) {
    // Formulas that read the agent's output columns follow them.
    const columns = await loadColumns(db, run.table_id!);
    const affected = dependentsOf(
      columns.plan,
      group.map((c) => c.id),
    );
    if ([...affected].some((id) => columns.byId.get(id)?.kind === 'formula')) {
      const row = await rowWithCells(db, run.row_id);
      if (row) await writeFormulaCells(db, columns, [row], affected);
    }
  }
  return moved.some((m) => m.column_id === run.column_id);
}

async function releaseRunHold(db: Db, run: Pick<AgentRunRecord, 'id' | 'workspace_id'>) {
  const holdId = await findRunHold(db, run.workspace_id, run.id);
  if (holdId) await releaseHold(db, holdId);
}

/** The row's cells by column name, for a prompt's row context. */
async function rowContext(db: Db, run: AgentRunRecord, cells: Cells): Promise<string> {
  const columns = await loadColumns(db, run.table_id!);
  const computed = await doneCellValues(db, run.row_id);
  const byId = new Map(computed.map((c) => [c.column_id, c.value]));
  const lines: string[] = [];
  for (const c of columns.list) {
    if (c.id === run.column_id || c.parent_column_id === run.column_id) continue;
    const value = Object.hasOwn(cells, c.id)
      ? displayValue(cells[c.id])
      : byId.has(c.id)
        ? displayValue(byId.get(c.id) as CellValue)
        : '';
    if (value !== '') lines.push(`${c.name}: ${clip(value, 1000)}`);
  }
  return lines.length > 0 ? `About this row:\n${lines.join('\n')}` : '';
}

/**
 * queued -> running: holds the price, claims the cells, renders the prompt and lists the attached
 * MCP tools. A run that cannot start (no chat model, no credits, its cells taken) answers why.
 */
export async function beginAgentRun(
  { sql, suppliers, businessContextChars }: Pick<AgentRunDeps, 'sql' | 'suppliers' | 'businessContextChars'>,
  { runId }: { runId: string },
  signal: AbortSignal,
): Promise<AgentRunPlan> {
  const run = await loadAgentRun(sql, runId);
  if (!run) return { state: 'finished', status: 'gone' };
  if (endedRun.has(run.status)) return { state: 'finished', status: run.status };
  if (!suppliers.chatModel)
    return {
      state: 'refused',
      reason: 'No chat model is configured here (OPENAI_API_KEY and OPENAI_MODEL); agents cannot run.',
    };
  const agent = run.agent;
  const sets = runToolsets(agent.reach, agent.mcp_servers.length);
  const plain = !sets.web && !sets.mcp;
  const mcpTools: AgentRunRecord['mcp_tools'] = [];
  if (sets.mcp && run.status === 'queued') {
    for (const [server, { url }] of agent.mcp_servers.entries()) {
      try {
        for (const t of await suppliers.mcp.listTools(url, signal))
          mcpTools.push({ server, name: t.name, description: clip(t.description, 300) });
      } catch {
        // A server that cannot list its tools offers none this run; the others still do.
      }
    }
  }
  const outcome = await sql.begin(async (tx): Promise<AgentRunPlan | null> => {
    const current = await loadAgentRun(tx, runId, true);
    if (!current || endedRun.has(current.status)) return { state: 'finished', status: current?.status ?? 'gone' };
    if (current.status === 'running') return null;
    let values: Record<string, unknown> = current.inputs;
    let context: string | null = null;
    let startUrl: string | null = null;
    if (current.target === 'cell') {
      const row = await rowCells(tx, current.row_id);
      if (!row) return { state: 'refused', reason: 'The row was deleted.' };
      if (!(await claimRunCell(tx, current.column_id, current.row_id, runId)))
        return { state: 'refused', reason: 'A newer run owns this row’s cells.' };
      await claimRunOutputCells(tx, current.column_id, current.row_id, runId);
      const config = await agentColumnConfig(tx, current.column_id);
      const mapped = Object.entries(config?.inputs ?? {});
      const computed = await doneCellValuesOf(
        tx,
        current.row_id,
        mapped.map(([, id]) => id),
      );
      const read = (id: string) =>
        (Object.hasOwn(row.cells, id) ? row.cells[id] : computed.find((c) => c.column_id === id)?.value) ?? null;
      values = Object.fromEntries(mapped.map(([inputId, columnId]) => [inputId, read(columnId)]));
      if (current.use_row_context) context = await rowContext(tx, current, row.cells);
      const startColumn = agent.settings.starting_url_column_id;
      if (startColumn) startUrl = displayValue(read(startColumn) as CellValue) || null;
    }
    // The `agent` section of a context_ref reads the agent's own context, then the workspace's business context.
    const business = businessContextSection(
      await businessContext(tx, current.workspace_id, businessContextChars ?? contextCharsDefault),
    );
    const agentContext = [agent.settings.context, business].filter(Boolean).join('\n\n') || null;
    const prompt = renderPrompt(agent.prompt, values, { agent: agentContext, row: context });
    if (current.price_credits > 0) {
      try {
        await holdCredits(tx, {
          workspaceId: current.workspace_id,
          amount: current.price_credits,
          causeKey: agentRunCauseKey(runId),
          ttlSeconds: 86_400,
        });
      } catch (error) {
        if (error instanceof ApiError && error.code === 'insufficient_credits')
          return { state: 'refused', reason: error.detail };
        throw error;
      }
    }
    await startAgentRun(tx, runId, {
      prompt,
      startUrl,
      mcpTools,
      modelKey: suppliers.chatModel!.key,
      inputs: values,
    });
    return null;
  });
  if (outcome) return outcome;
  return { state: 'go', maxSteps: plain ? 1 : maxStepsFor[agent.settings.effort], plain };
}

/** Asks the model for step `n`, with every step so far; an answer that is no usable step is recorded as a failed one. */
export async function decideAgentStep(
  { sql, suppliers }: Pick<AgentRunDeps, 'sql' | 'suppliers'>,
  { runId, n }: { runId: string; n: number },
  signal: AbortSignal,
): Promise<AgentDecision> {
  const run = await runningRun(sql, runId);
  const model = suppliers.chatModel;
  if (!model) throw nonRetryable('No chat model is configured here; agents cannot run.', 'agent_unavailable');
  const sets = runToolsets(run.agent.reach, run.agent.mcp_servers.length);
  const plain = !sets.web && !sets.mcp;
  const actions = offeredActions(run.agent.reach, run.agent.settings, run.agent.mcp_servers.length);
  const steps = await runStepsBefore(sql, runId, n);
  const help = actions.map((a) => agentTools[a].help);
  const messages: ChatMessage[] = [
    { role: 'system', content: systemPrompt(run, help, plain, maxStepsFor[run.agent.settings.effort]) },
    { role: 'user', content: run.prompt || '(no prompt)' },
  ];
  for (const s of steps) {
    messages.push({ role: 'assistant', content: JSON.stringify({ thought: s.thought, step: s.detail }) });
    messages.push({ role: 'user', content: `Observation (${s.outcome}): ${s.observation}` });
  }
  if (!plain && steps.length >= maxStepsFor[run.agent.settings.effort])
    messages.push({ role: 'user', content: 'No research steps remain: answer with finish now.' });
  const started = Date.now();
  let content: string;
  try {
    content = (await model.complete({ messages, json: true, signal })).content;
  } catch (error) {
    const failure = error instanceof ChatModelError ? error : new ChatModelError((error as Error).message, true);
    if (!failure.retryable) throw nonRetryable(failure.message, 'agent_model_refused');
    throw retryable(failure.message, 'agent_model_failed');
  }
  const decision = parseDecision(content, plain);
  if (decision.problem) {
    await recordStep(sql, runId, {
      n,
      action: 'finish',
      detail: 'an answer that was no usable step',
      duration_ms: Date.now() - started,
      observation: decision.problem,
      outcome: 'failed',
      thought: decision.thought,
    });
  }
  return decision;
}

/**
 * The answer: its step, the cells (or the example's result), the charge and the run's record, in
 * one transaction; an empty answer, or one a newer run took the row from, costs nothing.
 */
export async function finishAgentRun(
  { sql }: Pick<ServiceDeps, 'sql'>,
  { runId, n, decision }: AgentStepInput,
): Promise<AgentRunStatus | 'gone'> {
  return sql.begin(async (tx) => {
    const run = await loadAgentRun(tx, runId, true);
    if (!run) return 'gone';
    if (run.status !== 'running') return run.status;
    const { values, empty } = finishValues(
      run.agent.output_fields.map((f) => f.key),
      decision.values ?? {},
    );
    // The price of the run's reach was held; a run bills as what it offered (web with MCP bills as web).
    const billed = billedReach(runToolsets(run.agent.reach, run.agent.mcp_servers.length));
    const cost = empty ? 0 : run.price_credits;
    await recordStep(tx, runId, {
      n,
      action: 'finish',
      detail: 'finish',
      duration_ms: 0,
      observation: empty ? 'Nothing was found.' : clip(JSON.stringify(values)),
      outcome: 'completed',
      thought: decision.thought,
    });
    let delivered = true;
    if (run.target === 'cell')
      delivered = await settleCells(tx, run, ['running'], {
        state: 'done',
        values: empty ? null : values,
        error: null,
        cost,
      });
    const holdId = await findRunHold(tx, run.workspace_id, runId);
    const charged = delivered && !empty ? cost : 0;
    if (holdId) await (charged > 0 ? chargeHold(tx, holdId, charged) : releaseHold(tx, holdId));
    await completeAgentRun(tx, runId, {
      result: empty ? null : values,
      charged,
      billed,
      error: delivered ? null : 'A newer run took over this row; the answer was not written.',
    });
    return 'completed';
  });
}

/** A run that could not finish: its cells err, its hold is returned (also when its record went with its row or column). */
export async function failAgentRun(
  { sql }: Pick<ServiceDeps, 'sql'>,
  { runId, workspaceId, error }: { runId: string; workspaceId: string; error: string },
): Promise<AgentRunStatus | 'gone'> {
  return sql.begin(async (tx) => {
    const run = await loadAgentRun(tx, runId, true);
    if (!run) {
      await releaseRunHold(tx, { id: runId, workspace_id: workspaceId });
      return 'gone';
    }
    if (endedRun.has(run.status)) return run.status;
    if (run.target === 'cell')
      await settleCells(tx, run, ['pending', 'running'], {
        state: 'error',
        values: null,
        error: clip(error, 1000),
        cost: 0,
      });
    await releaseRunHold(tx, run);
    await failRunRow(tx, runId, clip(error, 2000));
    return 'failed';
  });
}

/**
 * A person cancels the run (cancelAgentRun's update): its cells are put back as they were before
 * it (or `skipped`, error "cancelled"), its hold is returned, never charged; once that committed,
 * a profile read it queued is cancelled too. Racing finishAgentRun on the run's row lock, exactly
 * one of them wins.
 */
export async function cancelAgentRun(
  deps: Pick<ServiceDeps, 'sql' | 'temporal'>,
  { runId, workspaceId }: { runId: string; workspaceId: string },
): Promise<AgentRunStatus | 'gone'> {
  const status = await deps.sql.begin(async (tx) => {
    const run = await loadAgentRun(tx, runId, true);
    if (!run) {
      await releaseRunHold(tx, { id: runId, workspace_id: workspaceId });
      return 'gone' as const;
    }
    if (endedRun.has(run.status)) return run.status;
    if (run.target === 'cell') {
      const group = (await agentCellGroup(tx, run.column_id!)).map((c) => c.id);
      await restoreRunCells(tx, run, group);
      await settleCells(tx, run, ['pending', 'running'], {
        state: 'skipped',
        values: null,
        error: 'cancelled',
        cost: 0,
      });
    }
    await releaseRunHold(tx, run);
    await cancelRunRow(tx, runId);
    return 'cancelled' as const;
  });
  if (status === 'cancelled') await cancelOpenProfileReads(deps, workspaceId, runId);
  return status;
}

/** Scores a training run's answers against the examples' expected values, once every run has ended. */
export async function scoreTrainingRun(
  { sql }: Pick<ServiceDeps, 'sql'>,
  { trainingRunId }: { trainingRunId: string },
): Promise<void> {
  await sql.begin(async (tx) => {
    const training = await lockTrainingRun(tx, trainingRunId);
    if (!training || training.status !== 'running') return;
    const runs = await trainingRunAnswers(tx, trainingRunId);
    const keys = runs[0]?.agent.output_fields.map((f) => f.key) ?? [];
    const score = scoreAgreement(
      keys,
      runs.filter((r) => r.expected).map((r) => ({ expected: r.expected!, values: r.result })),
    );
    await completeTrainingRun(tx, trainingRunId, score);
  });
}
