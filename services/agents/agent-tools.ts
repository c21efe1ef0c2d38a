/**
 * The tools a research run's model may call, one entry each in `agentTools` for every action of
 * the `AgentStepAction` enum (domain/agents/saved-agents.ts): the line the system prompt lists it
 * with (its arguments, read leniently by `argText`), the agent setting that switches it off, and
 * its run. `useTool` reads the entry; `runAgentTool` runs one and records its step. A supplier
 * that is not configured, or a tool switched off for the workspace (updateAgentTool, PATCH
 * /agent-tools/{key}/), refuses with the reason: never faked.
 */
import {
  argText,
  clip,
  detailOf,
  notOfferedReason,
  refused,
  type AgentDecision,
  type AgentStepInput,
  type ToolAnswer,
} from '../../domain/agents/agent-run.js';
import { offeredActions, type AgentAction } from '../../domain/agents/saved-agents.js';
import { retryable } from '../../domain/shared/errors.js';
import { ToolFailure } from '../../integrations/agent-tools/http-json.js';
import { onDomain, siteDomain, toolUrl } from '../../integrations/agent-tools/web.js';
import { agentToolEnabled } from '../../store/agents/agent-tools.js';
import { findRunStep, type AgentRunRecord, type RecordedStep } from '../../store/agents/agent-runs.js';
import type { AgentRunDeps } from './agent-run.js';
import { recordStep, runningRun } from './run-steps.js';

type ToolDeps = Pick<AgentRunDeps, 'sql' | 'suppliers'>;

/** One call of a tool: the run it serves, the model's arguments, and the activity's cancellation. */
export interface ToolCall {
  deps: ToolDeps;
  run: AgentRunRecord;
  args: Record<string, unknown>;
  signal: AbortSignal;
}

/** One tool: everything the run knows of it. */
export interface AgentToolEntry {
  /** Its line in the system prompt: its arguments and what it does. */
  help: string;
  /** The agent setting that switches it off (as offeredActions reads it), named when it is refused. */
  setting?: 'allow_search' | 'allow_fetch';
  /** A tool that no longer runs: refused with this whatever the agent offers (stored traces still name it). */
  retired?: string;
  /** Runs an offered tool. A supplier's failure throws (ToolFailure); runAgentTool retries or records it. */
  run(call: ToolCall): Promise<ToolAnswer>;
}

/** Pages outside the starting URL's domain are refused when the agent stays on it. */
function domainGate(run: AgentRunRecord, url: string): string | null {
  if (!run.agent.settings.stay_on_domain) return null;
  const domain = run.start_url ? siteDomain(run.start_url) : null;
  if (!domain) return 'The agent stays on the starting URL’s domain, and this row has no starting URL.';
  return onDomain(url, domain) ? null : `${url} is outside ${domain}; the agent stays on the starting URL’s domain.`;
}

/** scrape, map and crawl: one page's text, its links, or it and a few pages it links to on its own site. */
const pageTool =
  (action: 'scrape' | 'map' | 'crawl') =>
  async ({ deps: { suppliers }, run, args, signal }: ToolCall): Promise<ToolAnswer> => {
    const url = toolUrl(argText(args.url) || run.start_url || '').href;
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
  };

const fetchPageRetired = 'fetch_page is historical and no longer runs; use scrape to read a page.';

/** Every action of the enum, one entry each (the type makes it total; test/unit/agent-tools.test.ts checks the runtime keys). */
export const agentTools: Readonly<Record<AgentAction, AgentToolEntry>> = {
  search: {
    help: 'search {"query": string}: search the web',
    setting: 'allow_search',
    async run({ deps: { suppliers }, args, signal }) {
      if (!suppliers.search) return refused('No search API is configured here (SEARCH_API_URL).');
      const query = argText(args.query);
      if (!query) return { outcome: 'failed', observation: 'search needs a "query".' };
      const results = await suppliers.search.search(query, signal);
      if (results.length === 0) return { outcome: 'completed', observation: 'No results.' };
      return {
        outcome: 'completed',
        observation: results.map((r, i) => `${i + 1}. ${r.title} — ${r.url}\n${r.snippet}`).join('\n'),
      };
    },
  },
  fetch_page: {
    help: 'fetch_page: historical, not offered',
    retired: fetchPageRetired,
    run: async () => refused(fetchPageRetired),
  },
  scrape: { help: 'scrape {"url": string}: read one page’s text', setting: 'allow_fetch', run: pageTool('scrape') },
  map: { help: 'map {"url": string}: list the links on a page', setting: 'allow_fetch', run: pageTool('map') },
  crawl: {
    help: 'crawl {"url": string}: read a page and a few pages it links to on the same site',
    setting: 'allow_fetch',
    run: pageTool('crawl'),
  },
  mcp_tool: {
    help: 'mcp_tool {"tool": string, "arguments": object}: call one of the MCP tools listed below',
    async run({ deps: { suppliers }, run, args, signal }) {
      const name = argText(args.tool);
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
    },
  },
  workspace_action: {
    help: 'workspace_action {"action": string}: act in the workspace',
    run: async () => refused('Research runs do not act in the workspace; they only read.'),
  },
  find_work_email: {
    help: 'find_work_email {"full_name": string, "domain": string}: find a person’s work email',
    async run({ deps: { sql, suppliers }, run, args, signal }) {
      if (!suppliers.workEmail) return refused('No email-finder service is configured (WORK_EMAIL_FINDER_URL).');
      if (!(await agentToolEnabled(sql, run.workspace_id, 'find_work_email')))
        return refused('find_work_email is switched off for this workspace (PATCH /agent-tools/find_work_email/).');
      const fullName = argText(args.full_name);
      const domain = argText(args.domain);
      if (!fullName || !domain)
        return { outcome: 'failed', observation: 'find_work_email needs "full_name" and "domain".' };
      const found = await suppliers.workEmail.find({ full_name: fullName, domain }, signal);
      return {
        outcome: 'completed',
        observation: found.email
          ? `${found.email}${found.confidence ? ` (confidence ${found.confidence})` : ''}`
          : 'No work email found.',
      };
    },
  },
  read_pnet_profile: {
    help: 'read_pnet_profile {"profile_url": string}: read a network profile',
    // The workflow queues a browser step for it (services/agents/profile-reads.ts) and waits; it never runs inline.
    run: async () => ({ outcome: 'failed', observation: 'read_pnet_profile runs as a queued browser step.' }),
  },
  find_people_at_company: {
    help: 'find_people_at_company {"company": string, "title": string?}: find people working at a company',
    async run({ deps: { suppliers }, args, signal }) {
      if (!suppliers.peopleFinder) return refused('No people-finder service is configured (PEOPLE_FINDER_URL).');
      const company = argText(args.company);
      if (!company) return { outcome: 'failed', observation: 'find_people_at_company needs "company".' };
      const people = await suppliers.peopleFinder.find({ company, title: argText(args.title) || null }, signal);
      return {
        outcome: 'completed',
        observation: people.length
          ? people
              .map((p) => `${p.name}${p.title ? `, ${p.title}` : ''}${p.profile_url ? ` — ${p.profile_url}` : ''}`)
              .join('\n')
          : 'Nobody found.',
      };
    },
  },
  finish: {
    help: 'finish {"values": {<output key>: value}}: give the answer (null for a field you could not find)',
    run: async () => ({ outcome: 'failed', observation: 'finish is recorded by the run’s end.' }),
  },
};

/** Runs the decided tool: a retired one or one the agent does not offer is refused before its entry runs. */
export async function useTool(
  deps: ToolDeps,
  run: AgentRunRecord,
  decision: AgentDecision,
  offered: AgentAction[],
  signal: AbortSignal,
): Promise<ToolAnswer> {
  const { action, args } = decision;
  const tool = agentTools[action];
  if (tool.retired) return refused(tool.retired);
  if (!offered.includes(action))
    return refused(`${action} is not offered to this agent: ${notOfferedReason(run.agent.reach, tool.setting)}.`);
  return tool.run({ deps, run, args, signal });
}

/**
 * Runs one tool and records its step (once: a retry answers the step recorded). A supplier's
 * failure is retried (the workflow allows 3 attempts); on the last attempt it is recorded as a
 * failed step, so the model reads it and the run goes on.
 */
export async function runAgentTool(
  deps: ToolDeps,
  { runId, n, decision }: AgentStepInput,
  activity: { signal: AbortSignal; attempt: number },
): Promise<RecordedStep> {
  const done = await findRunStep(deps.sql, runId, n);
  if (done) return done;
  const run = await runningRun(deps.sql, runId);
  const offered = offeredActions(run.agent.reach, run.agent.settings, run.agent.mcp_servers.length);
  const started = Date.now();
  let answer: ToolAnswer;
  try {
    answer = await useTool(deps, run, decision, offered, activity.signal);
  } catch (error) {
    const failure =
      error instanceof ToolFailure ? error : new ToolFailure((error as Error).message ?? String(error), true);
    if (failure.retryable && activity.attempt < 3) throw retryable(failure.message, 'agent_tool_failed');
    answer = { outcome: 'failed', observation: failure.message };
  }
  return recordStep(deps.sql, runId, {
    n,
    action: decision.action,
    detail: detailOf(decision),
    duration_ms: Date.now() - started,
    observation: answer.observation,
    outcome: answer.outcome,
    thought: decision.thought,
  });
}
