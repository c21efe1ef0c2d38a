/**
 * A research run's side effects. Each is guarded so a retried activity changes nothing twice: the
 * run moves queued -> running -> completed/failed by compare-and-set on its status; a step is
 * recorded once per (run, n); cells of an agent column move only while this run owns them
 * (table_cells.run_id) and are `running`. Credits: the run's price is held when it starts (cause
 * key `agent-run:<run id>`), charged in the transaction that stores a result, and returned for an
 * empty answer or a failure.
 */
import { businessContext } from '../../store/documents/documents.js';
import { businessContextSection, contextCharsDefault } from '../../domain/documents/documents.js';
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { insertStep as insertBrowserStep } from '../../store/pnet/step-queue.js';
import { writeFormulaCells } from '../../store/tables/cells.js';
import { loadColumns } from '../../store/tables/columns.js';
import { agentToolEnabled } from '../../store/agents/agent-tools.js';
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
  findRunStep,
  insertRunStep,
  loadAgentRun,
  lockTrainingRun,
  openProfileReads,
  profileReadAccount,
  profileReadStepOf,
  profileStopReason,
  restoreRunCells,
  rowCells,
  rowWithCells,
  runStepsBefore,
  runWaitingOnStep,
  settleRunCells,
  startAgentRun,
  trainingRunAnswers,
  type AgentRunRecord,
  type RecordedStep,
} from '../../store/agents/agent-runs.js';
import type { Db, Sql } from '../../db/sql.js';
import { ApiError } from '../../domain/shared/errors.js';
import { dependentsOf } from '../../domain/tables/formula.js';
import {
  billedReach,
  maxStepsFor,
  observationMax,
  offeredActions,
  renderPrompt,
  runToolsets,
  scoreAgreement,
  agentActions,
  type AgentAction,
  type AgentRunStatus,
  type AgentStepOutcome,
} from '../../domain/agents/saved-agents.js';
import { displayValue, type CellValue, type Cells } from '../../domain/tables/tables.js';
import type { AgentSuppliers } from '../../integrations/agent-tools/index.js';
import { ToolFailure } from '../../integrations/agent-tools/http-json.js';
import { onDomain, siteDomain, toolUrl } from '../../integrations/agent-tools/web.js';
import { ChatModelError, type ChatMessage } from '../../integrations/chat-model.js';
import { chargeHold, holdCredits, releaseHold } from '../../store/platform/credits.js';
import { findStep, type StepRow } from '../../store/pnet/steps.js';
import { browserStepWorkflowId, cancelStepUpdate } from '../../workflows/pnet/browser-step.contract.js';
import { pnetStepSettledSignal } from '../../workflows/agents/agent-run.contract.js';
import { afterStepTransitions } from '../pnet/steps.js';
import { terminalStatuses } from '../../domain/pnet/settle.js';

export interface AgentRunActivityDeps {
  /** Characters of business context a prompt reads (DOCUMENT_CONTEXT_CHARS). */
  businessContextChars?: number;
  sql: Sql;
  suppliers: AgentSuppliers;
  /** Starts a browser step's workflow (read_pnet_profile queues one); idempotent. */
  startStep?: (row: StepRow) => Promise<void>;
}

export type AgentRunPlan =
  | { state: 'finished'; status: AgentRunStatus | 'gone' }
  | { state: 'refused'; reason: string }
  | { state: 'go'; maxSteps: number; plain: boolean };

/** What the model chose: an action with its arguments, or `finish` with the answer. */
export interface AgentDecision {
  action: AgentAction;
  thought: string | null;
  args: Record<string, unknown>;
  values: Record<string, unknown> | null;
  /** Set when the answer was not a usable step; it is recorded as a failed step. */
  problem: string | null;
}

/** read_pnet_profile: either the step is recorded already (refused, failed) or a browser step was queued and the run waits for it. */
export type ProfileReadQueued = { state: 'recorded'; step: RecordedStep } | { state: 'waiting'; stepId: string };

/** How long a research run waits for a queued profile read before it records the step as failed. */
export const profileReadWaitMinutes = 10;
const endedRun: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled']);

const clip = (text: string, max = observationMax) => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

function activitySignal(): AbortSignal {
  try {
    return Context.current().cancellationSignal;
  } catch {
    return new AbortController().signal;
  }
}
function attempt(): number {
  try {
    return Context.current().info.attempt;
  } catch {
    return 1;
  }
}

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

async function insertStep(
  db: Db,
  runId: string,
  step: {
    n: number;
    action: AgentAction;
    detail: string;
    duration_ms: number;
    observation: string;
    outcome: AgentStepOutcome;
    thought: string | null;
  },
): Promise<RecordedStep> {
  await insertRunStep(db, runId, {
    n: step.n,
    action: step.action,
    detail: clip(step.detail, 2000),
    duration_ms: Math.max(0, Math.round(step.duration_ms)),
    observation: clip(step.observation),
    outcome: step.outcome,
    thought: step.thought === null ? null : clip(step.thought, 2000),
  });
  const stored = await findRunStep(db, runId, step.n);
  // The run's record went with its row or column while the step ran.
  if (!stored)
    throw ApplicationFailure.nonRetryable('The run is gone: its row or column was deleted.', 'agent_run_gone');
  return stored;
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

const toolHelp: Record<AgentAction, string> = {
  search: 'search {"query": string}: search the web',
  fetch_page: 'fetch_page: historical, not offered',
  scrape: 'scrape {"url": string}: read one page’s text',
  map: 'map {"url": string}: list the links on a page',
  crawl: 'crawl {"url": string}: read a page and a few pages it links to on the same site',
  mcp_tool: 'mcp_tool {"tool": string, "arguments": object}: call one of the MCP tools listed below',
  workspace_action: 'workspace_action {"action": string}: act in the workspace',
  find_work_email: 'find_work_email {"full_name": string, "domain": string}: find a person’s work email',
  read_pnet_profile: 'read_pnet_profile {"profile_url": string}: read a network profile',
  find_people_at_company:
    'find_people_at_company {"company": string, "title": string?}: find people working at a company',
  finish: 'finish {"values": {<output key>: value}}: give the answer (null for a field you could not find)',
};

function systemPrompt(run: AgentRunRecord, actions: AgentAction[], plain: boolean, maxSteps: number): string {
  const fields = run.agent.output_fields
    .map((f) => `- ${f.key} (${f.type}): ${f.name}${f.description ? ` — ${f.description}` : ''}`)
    .join('\n');
  if (plain) {
    return `Answer the request with one JSON object {"values": {...}} holding these fields (null when unknown):\n${fields}`;
  }
  const mcp =
    run.mcp_tools.length > 0
      ? `\nMCP tools:\n${run.mcp_tools.map((t) => `- ${t.name}: ${t.description}`).join('\n')}`
      : '';
  return [
    'You are a research agent. Work step by step; each answer is ONE JSON object:',
    '{"thought": "why this step", "action": "<action>", "args": {...}} or, when done, {"thought": "...", "action": "finish", "values": {...}}.',
    `Actions:\n${actions.map((a) => `- ${toolHelp[a]}`).join('\n')}${mcp}`,
    `The answer's fields:\n${fields}`,
    `You have at most ${maxSteps} research steps; then you must finish.`,
    run.start_url ? `Start from ${run.start_url}.` : '',
  ]
    .filter(Boolean)
    .join('\n\n');
}

function parseDecision(content: string, plain: boolean): AgentDecision {
  let parsed: unknown;
  try {
    parsed = JSON.parse(content.replace(/^```(?:json)?\s*|\s*```$/g, ''));
  } catch {
    return {
      action: 'finish',
      thought: null,
      args: {},
      values: null,
      problem: `The model's answer was not JSON: ${clip(content, 300)}`,
    };
  }
  const o = (parsed ?? {}) as { thought?: unknown; action?: unknown; args?: unknown; values?: unknown };
  const thought = typeof o.thought === 'string' ? o.thought : null;
  const values =
    o.values !== null && typeof o.values === 'object' && !Array.isArray(o.values)
      ? (o.values as Record<string, unknown>)
      : null;
  if (plain)
    return values
      ? { action: 'finish', thought, args: {}, values, problem: null }
      : { action: 'finish', thought, args: {}, values: null, problem: 'The answer had no "values" object.' };
  if (typeof o.action !== 'string' || !(agentActions as readonly string[]).includes(o.action)) {
    return {
      action: 'finish',
      thought,
      args: {},
      values: null,
      problem: `The model named no known action (${clip(String(o.action), 100)}).`,
    };
  }
  const action = o.action as AgentAction;
  if (action === 'finish' && !values)
    return { action, thought, args: {}, values: null, problem: 'finish came without a "values" object.' };
  const args =
    o.args !== null && typeof o.args === 'object' && !Array.isArray(o.args) ? (o.args as Record<string, unknown>) : {};
  return { action, thought, args, values, problem: null };
}

const detailOf = (decision: AgentDecision) => {
  const shown = Object.entries(decision.args).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`);
  return clip(`${decision.action}${shown.length ? ` ${shown.join(' ')}` : ''}`, 2000);
};
const text = (v: unknown) => (typeof v === 'string' ? v.trim() : '');

type ToolAnswer = { outcome: AgentStepOutcome; observation: string };
const refused = (observation: string): ToolAnswer => ({ outcome: 'refused', observation });

/** The relationship facts a profile_view with read_relationship reports, as the model reads them. */
const profileFacts = [
  'profile_resolved',
  'vanity',
  'member_urn',
  'already_connected',
  'invitation_pending',
  'can_send_message',
  'already_following',
  'open_profile',
] as const;

function profileObservation(step: StepRow): string {
  const outcome = step.outcome ?? {};
  const facts = profileFacts
    .filter((k) => outcome[k] !== undefined && outcome[k] !== null)
    .map((k) => `${k}: ${String(outcome[k])}`);
  return [
    `Profile ${String(step.params.profile_url)} read by the workspace's pnet account.`,
    ...(facts.length ? facts : ['The browser reported no relationship facts.']),
  ].join('\n');
}

function profileFailure(step: StepRow): string {
  const why = [step.error_code, step.error_message ?? step.reject_reason].filter(Boolean).join(': ');
  const said = why ? ` (${why})` : '';
  if (step.status === 'rejected') return `A person rejected the profile read on the Tasks page${said}.`;
  if (step.status === 'cancelled') return `The profile read was cancelled${said}.`;
  if (step.status === 'skipped') return `The browser skipped the profile read${said}.`;
  return `The profile read failed${said}.`;
}

export function createAgentRunActivities({ sql, suppliers, startStep, businessContextChars }: AgentRunActivityDeps) {
  /** A tool whose switch in /agent-tools/ is off is refused even when its supplier is there. */
  async function switchedOn(workspaceId: string, key: 'find_work_email' | 'read_pnet_profile') {
    return agentToolEnabled(sql, workspaceId, key);
  }

  function domainGate(run: AgentRunRecord, url: string): string | null {
    if (!run.agent.settings.stay_on_domain) return null;
    const domain = run.start_url ? siteDomain(run.start_url) : null;
    if (!domain) return 'The agent stays on the starting URL’s domain, and this row has no starting URL.';
    return onDomain(url, domain) ? null : `${url} is outside ${domain}; the agent stays on the starting URL’s domain.`;
  }

  async function useTool(
    run: AgentRunRecord,
    decision: AgentDecision,
    offered: AgentAction[],
    signal: AbortSignal,
  ): Promise<ToolAnswer> {
    const { action, args } = decision;
    if (action === 'fetch_page')
      return refused('fetch_page is historical and no longer runs; use scrape to read a page.');
    if (!offered.includes(action)) {
      const why =
        run.agent.reach === 'none'
          ? 'the agent’s reach is none'
          : action === 'search'
            ? 'allow_search is off'
            : ['scrape', 'map', 'crawl'].includes(action)
              ? 'allow_fetch is off'
              : `its reach is ${run.agent.reach}`;
      return refused(`${action} is not offered to this agent: ${why}.`);
    }
    switch (action) {
      case 'search': {
        if (!suppliers.search) return refused('No search API is configured here (SEARCH_API_URL).');
        const query = text(args.query);
        if (!query) return { outcome: 'failed', observation: 'search needs a "query".' };
        const results = await suppliers.search.search(query, signal);
        if (results.length === 0) return { outcome: 'completed', observation: 'No results.' };
        return {
          outcome: 'completed',
          observation: results.map((r, i) => `${i + 1}. ${r.title} — ${r.url}\n${r.snippet}`).join('\n'),
        };
      }
      case 'scrape':
      case 'map':
      case 'crawl': {
        const url = toolUrl(text(args.url) || run.start_url || '').href;
        const gate = domainGate(run, url);
        if (gate) return refused(gate);
        if (action === 'scrape') {
          const page = await suppliers.web.scrape(url, signal);
          return {
            outcome: 'completed',
            observation:
              page.text || page.title ? `${page.title ?? ''}\n${page.text}`.trim() : 'The page has no readable text.',
          };
        }
        const mapped = await suppliers.web.map(url, signal);
        if (action === 'map')
          return {
            outcome: 'completed',
            observation: mapped.links.length ? mapped.links.join('\n') : 'The page links nowhere.',
          };
        const host = new URL(mapped.url).host;
        const pages = [mapped.url, ...mapped.links.filter((l) => new URL(l).host === host && l !== mapped.url)]
          .filter((l) => !domainGate(run, l))
          .slice(0, 4);
        const reads: string[] = [];
        for (const page of pages) {
          try {
            const read = await suppliers.web.scrape(page, signal);
            reads.push(`# ${page}\n${clip(`${read.title ?? ''}\n${read.text}`.trim(), 900)}`);
          } catch (error) {
            reads.push(`# ${page}\n(not read: ${(error as Error).message})`);
          }
        }
        return { outcome: 'completed', observation: reads.join('\n\n') };
      }
      case 'mcp_tool': {
        const name = text(args.tool);
        const tool = run.mcp_tools.find((t) => t.name === name);
        if (!tool)
          return { outcome: 'failed', observation: `No attached MCP server offers a tool "${clip(name, 100)}".` };
        const server = run.agent.mcp_servers[tool.server];
        if (!server) return { outcome: 'failed', observation: 'The MCP server of that tool is no longer attached.' };
        const toolArgs =
          args.arguments !== null && typeof args.arguments === 'object'
            ? (args.arguments as Record<string, unknown>)
            : {};
        const answer = await suppliers.mcp.callTool(server.url, name, toolArgs, signal);
        return { outcome: answer.isError ? 'failed' : 'completed', observation: answer.text || '(no text)' };
      }
      case 'find_work_email': {
        if (!suppliers.workEmail) return refused('No email-finder service is configured (WORK_EMAIL_FINDER_URL).');
        if (!(await switchedOn(run.workspace_id, 'find_work_email')))
          return refused('find_work_email is switched off for this workspace (PATCH /agent-tools/find_work_email/).');
        const fullName = text(args.full_name);
        const domain = text(args.domain);
        if (!fullName || !domain)
          return { outcome: 'failed', observation: 'find_work_email needs "full_name" and "domain".' };
        const found = await suppliers.workEmail.find({ full_name: fullName, domain }, signal);
        return {
          outcome: 'completed',
          observation: found.email
            ? `${found.email}${found.confidence ? ` (confidence ${found.confidence})` : ''}`
            : 'No work email found.',
        };
      }
      case 'find_people_at_company': {
        if (!suppliers.peopleFinder) return refused('No people-finder service is configured (PEOPLE_FINDER_URL).');
        const company = text(args.company);
        if (!company) return { outcome: 'failed', observation: 'find_people_at_company needs "company".' };
        const people = await suppliers.peopleFinder.find({ company, title: text(args.title) || null }, signal);
        return {
          outcome: 'completed',
          observation: people.length
            ? people
                .map((p) => `${p.name}${p.title ? `, ${p.title}` : ''}${p.profile_url ? ` — ${p.profile_url}` : ''}`)
                .join('\n')
            : 'Nobody found.',
        };
      }
      case 'read_pnet_profile':
        // The workflow queues a browser step for it (queueProfileRead) and waits; it never runs inline.
        return { outcome: 'failed', observation: 'read_pnet_profile runs as a queued browser step.' };
      case 'workspace_action':
        return refused('Research runs do not act in the workspace; they only read.');
      case 'finish':
        return { outcome: 'failed', observation: 'finish is recorded by the run’s end.' };
    }
  }

  return {
    /**
     * queued -> running: holds the price, claims the cells, renders the prompt and lists the
     * attached MCP tools. A run that cannot start (no chat model, no credits, its cells taken) answers why.
     */
    async beginAgentRun({ runId }: { runId: string }): Promise<AgentRunPlan> {
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
            for (const t of await suppliers.mcp.listTools(url, activitySignal()))
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
    },

    /** Asks the model for step `n`, with every step so far; an answer that is no usable step is recorded as a failed one. */
    async decideAgentStep({ runId, n }: { runId: string; n: number }): Promise<AgentDecision> {
      const run = await loadAgentRun(sql, runId);
      if (!run || run.status !== 'running')
        throw ApplicationFailure.nonRetryable('The run is not running.', 'agent_run_gone');
      const model = suppliers.chatModel;
      if (!model)
        throw ApplicationFailure.nonRetryable(
          'No chat model is configured here; agents cannot run.',
          'agent_unavailable',
        );
      const sets = runToolsets(run.agent.reach, run.agent.mcp_servers.length);
      const plain = !sets.web && !sets.mcp;
      const actions = offeredActions(run.agent.reach, run.agent.settings, run.agent.mcp_servers.length);
      const steps = await runStepsBefore(sql, runId, n);
      const messages: ChatMessage[] = [
        { role: 'system', content: systemPrompt(run, actions, plain, maxStepsFor[run.agent.settings.effort]) },
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
        content = (await model.complete({ messages, json: true, signal: activitySignal() })).content;
      } catch (error) {
        const failure = error instanceof ChatModelError ? error : new ChatModelError((error as Error).message, true);
        if (!failure.retryable) throw ApplicationFailure.nonRetryable(failure.message, 'agent_model_refused');
        throw ApplicationFailure.retryable(failure.message, 'agent_model_failed');
      }
      const decision = parseDecision(content, plain);
      if (decision.problem) {
        await insertStep(sql, runId, {
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
    },

    /** Runs one tool and records its step. Supplier failures are retried (3 attempts), then recorded as a failed step. */
    async runAgentTool({
      runId,
      n,
      decision,
    }: {
      runId: string;
      n: number;
      decision: AgentDecision;
    }): Promise<RecordedStep> {
      const done = await findRunStep(sql, runId, n);
      if (done) return done;
      const run = await loadAgentRun(sql, runId);
      if (!run || run.status !== 'running')
        throw ApplicationFailure.nonRetryable('The run is not running.', 'agent_run_gone');
      const offered = offeredActions(run.agent.reach, run.agent.settings, run.agent.mcp_servers.length);
      const started = Date.now();
      let answer: ToolAnswer;
      try {
        answer = await useTool(run, decision, offered, activitySignal());
      } catch (error) {
        const failure =
          error instanceof ToolFailure ? error : new ToolFailure((error as Error).message ?? String(error), true);
        if (failure.retryable && attempt() < 3)
          throw ApplicationFailure.retryable(failure.message, 'agent_tool_failed');
        answer = { outcome: 'failed', observation: failure.message };
      }
      return insertStep(sql, runId, {
        n,
        action: decision.action,
        detail: detailOf(decision),
        duration_ms: Date.now() - started,
        observation: answer.observation,
        outcome: answer.outcome,
        thought: decision.thought,
      });
    },

    /** The answer: stored on the cells (or the example's result) and charged, in one transaction; an empty answer costs nothing. */
    async finishAgentRun({
      runId,
      n,
      decision,
    }: {
      runId: string;
      n: number;
      decision: AgentDecision;
    }): Promise<AgentRunStatus | 'gone'> {
      return sql.begin(async (tx) => {
        const run = await loadAgentRun(tx, runId, true);
        if (!run) return 'gone';
        if (run.status !== 'running') return run.status;
        const keys = run.agent.output_fields.map((f) => f.key);
        const given = decision.values ?? {};
        const values = Object.fromEntries(
          keys.map((k) => [k, Object.hasOwn(given, k) && given[k] !== undefined ? given[k] : null]),
        ) as Record<string, unknown>;
        for (const [k, v] of Object.entries(values))
          if (v !== null && typeof v === 'object') values[k] = JSON.stringify(v);
        const empty = Object.values(values).every((v) => v === null || (typeof v === 'string' && v.trim() === ''));
        // The price of the run's reach was held; a run bills as what it offered (web with MCP bills as web).
        const billed = billedReach(runToolsets(run.agent.reach, run.agent.mcp_servers.length));
        const cost = empty ? 0 : run.price_credits;
        await insertStep(tx, runId, {
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
    },

    /** A run that could not finish: its cells err, its hold is returned (also when its record went with its row or column). */
    async failAgentRun({
      runId,
      workspaceId,
      error,
    }: {
      runId: string;
      workspaceId: string;
      error: string;
    }): Promise<AgentRunStatus | 'gone'> {
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
    },

    /**
     * read_pnet_profile: queues a metered profile_view (read_relationship) on one of the
     * workspace's connected accounts, naming this run and step in its params so its settling
     * wakes the run (withAgentRunWake). The account: one not held at a checkpoint, automatic before
     * manual (a manual one puts it on the Tasks page first), with a browser holding its lease, then
     * the one with the fewest open steps. A retry finds the step it queued.
     */
    async queueProfileRead({
      runId,
      n,
      decision,
    }: {
      runId: string;
      n: number;
      decision: AgentDecision;
    }): Promise<ProfileReadQueued> {
      const done = await findRunStep(sql, runId, n);
      if (done) return { state: 'recorded', step: done };
      const run = await loadAgentRun(sql, runId);
      if (!run || run.status !== 'running')
        throw ApplicationFailure.nonRetryable('The run is not running.', 'agent_run_gone');
      const record = (outcome: AgentStepOutcome, observation: string) =>
        insertStep(sql, runId, {
          n,
          action: 'read_pnet_profile',
          detail: detailOf(decision),
          duration_ms: 0,
          observation,
          outcome,
          thought: decision.thought,
        }).then((step) => ({ state: 'recorded' as const, step }));
      const offered = offeredActions(run.agent.reach, run.agent.settings, run.agent.mcp_servers.length);
      if (!offered.includes('read_pnet_profile'))
        return record('refused', `read_pnet_profile is not offered to this agent: its reach is ${run.agent.reach}.`);
      const existing = await profileReadStepOf(sql, run.workspace_id, runId, n);
      if (existing) {
        if (!terminalStatuses.has(existing.status)) await startStep?.(existing);
        return { state: 'waiting', stepId: existing.id };
      }
      const account = await profileReadAccount(sql, run.workspace_id);
      if (!account) return record('refused', 'No pnet account of this workspace is connected to read profiles with.');
      if (!(await switchedOn(run.workspace_id, 'read_pnet_profile')))
        return record(
          'refused',
          'read_pnet_profile is switched off for this workspace (PATCH /agent-tools/read_pnet_profile/).',
        );
      if (!startStep) return record('refused', 'This worker cannot queue browser steps.');
      const given = text(decision.args.profile_url);
      let profileUrl: string;
      try {
        const url = new URL(given);
        if (!['http:', 'https:'].includes(url.protocol) || given.length > 2048) throw new Error('not http');
        profileUrl = url.href;
      } catch {
        return record('failed', 'read_pnet_profile needs "profile_url", an http(s) address of a profile.');
      }
      // A visit shows on the person's side: nobody on the do-not-contact list is visited.
      if ((await profileStopReason(sql, run.workspace_id, profileUrl)) === 'do_not_contact')
        return record('refused', 'This profile is on the workspace’s do-not-contact list; it is not visited.');
      let row: StepRow;
      try {
        // The run's id and step ride along in params (stored as given): the settle hook finds the run by them.
        const params = {
          kind: 'profile_view' as const,
          profile_url: profileUrl,
          read_relationship: true,
          agent_run_id: runId,
          agent_run_step: n,
        };
        row = await insertBrowserStep(
          sql,
          run.workspace_id,
          { account_id: account.id, params, contact_key: null, sequence_id: null, run_before: null, test: false },
          account.run_mode,
        );
      } catch (error) {
        if (error instanceof ApplicationFailure && error.type === 'insufficient_credits')
          return record('failed', `The profile read could not be queued: ${error.message}`);
        throw error;
      }
      await startStep(row);
      return { state: 'waiting', stepId: row.id };
    },

    /**
     * The queued profile read's outcome as the step's observation, once its browser step settled;
     * null while it has not (the run keeps waiting). Past the wait a step still waiting is
     * cancelled (its hold goes back) and the research step fails.
     */
    async recordProfileRead({
      runId,
      n,
      stepId,
      timedOut,
      decision,
    }: {
      runId: string;
      n: number;
      stepId: string;
      timedOut: boolean;
      decision: AgentDecision;
    }): Promise<RecordedStep | null> {
      const done = await findRunStep(sql, runId, n);
      if (done) return done;
      const read = () => findStep(sql, stepId);
      let step = await read();
      if (step && !terminalStatuses.has(step.status)) {
        if (!timedOut) return null;
        if (['awaiting_approval', 'queued', 'resuming'].includes(step.status)) {
          await Context.current()
            .client.workflow.getHandle(browserStepWorkflowId(stepId))
            .executeUpdate(cancelStepUpdate, {
              args: [{ errorCode: 'cancelled' }],
              updateId: `agent-run-timeout/${stepId}`,
            })
            .catch(() => undefined); // claimed meanwhile, or already settled: read again below
          step = await read();
        }
      }
      const duration = step ? (step.finished_at ?? new Date()).getTime() - step.created_at.getTime() : 0;
      let answer: ToolAnswer;
      if (!step) answer = { outcome: 'failed', observation: 'The profile read’s browser step is gone.' };
      else if (step.status === 'succeeded') answer = { outcome: 'completed', observation: profileObservation(step) };
      else if (terminalStatuses.has(step.status) && !(timedOut && step.status === 'cancelled'))
        answer = { outcome: 'failed', observation: profileFailure(step) };
      else
        answer = {
          outcome: 'failed',
          observation: `The profile read did not finish within ${profileReadWaitMinutes} minutes (its step is ${step.status === 'cancelled' ? 'cancelled now' : `still ${step.status}`}).`,
        };
      return insertStep(sql, runId, {
        n,
        action: 'read_pnet_profile',
        detail: detailOf(decision),
        duration_ms: duration,
        observation: answer.observation,
        outcome: answer.outcome,
        thought: decision.thought,
      });
    },

    /**
     * A person cancels the run: its cells are put back as they were before it (or `skipped`,
     * error "cancelled"), its hold is returned, never charged; a profile read it queued is
     * cancelled too. Racing finishAgentRun on the run's row lock, exactly one of them wins.
     */
    async cancelAgentRun({
      runId,
      workspaceId,
    }: {
      runId: string;
      workspaceId: string;
    }): Promise<AgentRunStatus | 'gone'> {
      const status = await sql.begin(async (tx) => {
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
      if (status === 'cancelled') {
        const open = await openProfileReads(sql, workspaceId, runId);
        for (const s of open) {
          await Context.current()
            .client.workflow.getHandle(browserStepWorkflowId(s.id))
            .executeUpdate(cancelStepUpdate, {
              args: [{ errorCode: 'cancelled' }],
              updateId: `agent-run-cancel/${s.id}`,
            })
            .catch(() => undefined); // claimed meanwhile: the browser finishes it
        }
      }
      return status;
    },

    /** Scores a training run's answers against the examples' expected values, once every run has ended. */
    async scoreTrainingRun({ trainingRunId }: { trainingRunId: string }): Promise<void> {
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
    },
  };
}

export type AgentRunActivities = ReturnType<typeof createAgentRunActivities>;

/**
 * Wraps the pnet step activities so a profile read a research run queued wakes that run's
 * workflow once its step settles (the run waits for it without polling; its own timeout covers a
 * lost signal). Same shape as withSequenceWake; the two compose.
 */
export function withAgentRunWake<T extends object>(activities: T, sql: Sql): T {
  return afterStepTransitions(
    activities,
    ['readStepChange', 'expireClaim', 'missWindow', 'rejectStep', 'cancelStep'],
    async (stepId, step) => {
      // A transition that answers the record shows whether a run queued the step: most did not,
      // and the look-up is a round trip that every settle would wait for.
      if (step && step.params.agent_run_id === undefined) return;
      await wakeAgentRunOfStep(sql, stepId).catch(() => undefined);
    },
  );
}

async function wakeAgentRunOfStep(sql: Sql, stepId: string): Promise<void> {
  const workflowId = await runWaitingOnStep(sql, stepId);
  if (!workflowId) return;
  // A closed run has nothing to wake.
  await Context.current()
    .client.workflow.getHandle(workflowId)
    .signal(pnetStepSettledSignal, { stepId })
    .catch(() => undefined);
}
