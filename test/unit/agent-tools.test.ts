/**
 * The tool registry of services/agents/agent-tools.ts is total at run time: one entry for every
 * action of the `AgentStepAction` enum and nothing else. Its settings agree with offeredActions,
 * and useTool refuses a retired tool or one the agent does not offer before the entry runs (no
 * supplier and no database is touched).
 */
import { describe, expect, it } from 'vitest';
import type { AgentDecision } from '../../domain/agents/agent-run.js';
import {
  agentActions,
  offeredActions,
  type AgentAction,
  type AgentDefinition,
  type AgentReach,
} from '../../domain/agents/saved-agents.js';
import type { AgentSuppliers } from '../../integrations/agent-tools/index.js';
import { agentTools, useTool } from '../../services/agents/agent-tools.js';
import type { AgentRunRecord } from '../../store/agents/agent-runs.js';

const everySetting = { allow_fetch: true, allow_search: true };

describe('the agent tool registry', () => {
  it('has one entry per action of the enum, and no other', () => {
    expect(Object.keys(agentTools).sort()).toEqual([...agentActions].sort());
  });

  it.each(agentActions)('%s has a prompt line naming it and a run function', (action) => {
    expect(agentTools[action].help.startsWith(`${action} `) || agentTools[action].help.startsWith(`${action}:`)).toBe(
      true,
    );
    expect(typeof agentTools[action].run).toBe('function');
  });

  it.each(agentActions)('%s is switched off by its setting, and by no other', (action) => {
    const { setting } = agentTools[action];
    for (const off of ['allow_fetch', 'allow_search'] as const) {
      const offered = offeredActions('web', { ...everySetting, [off]: false }, 1).includes(action);
      const offeredWithAll = offeredActions('web', everySetting, 1).includes(action);
      expect(offered).toBe(setting === off ? false : offeredWithAll);
    }
  });

  it('retires fetch_page alone, which no agent is offered', () => {
    expect(agentActions.filter((a) => agentTools[a].retired !== undefined)).toEqual(['fetch_page']);
    for (const reach of ['none', 'mcp', 'web'] as const)
      expect(offeredActions(reach, everySetting, 1)).not.toContain('fetch_page');
  });
});

describe('useTool', () => {
  const suppliers = { search: null, workEmail: null, peopleFinder: null, chatModel: null } as unknown as AgentSuppliers;
  const deps = { sql: undefined as never, suppliers };
  const run = (reach: AgentReach, over: Partial<AgentRunRecord> = {}): AgentRunRecord =>
    ({
      id: 'r',
      workspace_id: 'w',
      agent: {
        reach,
        mcp_servers: [],
        settings: { allow_fetch: true, allow_search: true, stay_on_domain: false },
      } as unknown as AgentDefinition,
      start_url: null,
      mcp_tools: [],
      ...over,
    }) as AgentRunRecord;
  const decide = (action: AgentAction, args: Record<string, unknown> = {}): AgentDecision => ({
    action,
    thought: null,
    args,
    values: null,
    problem: null,
  });
  const use = (r: AgentRunRecord, action: AgentAction, offered: AgentAction[], args = {}) =>
    useTool(deps, r, decide(action, args), offered, new AbortController().signal);

  it('refuses a retired tool whatever the agent offers', async () => {
    expect(await use(run('web'), 'fetch_page', ['fetch_page'])).toEqual({
      outcome: 'refused',
      observation: 'fetch_page is historical and no longer runs; use scrape to read a page.',
    });
  });

  it('refuses a tool the agent does not offer, saying why', async () => {
    expect((await use(run('none'), 'search', [])).observation).toBe(
      'search is not offered to this agent: the agent’s reach is none.',
    );
    expect((await use(run('web'), 'search', [])).observation).toBe(
      'search is not offered to this agent: allow_search is off.',
    );
    expect((await use(run('web'), 'crawl', [])).observation).toBe(
      'crawl is not offered to this agent: allow_fetch is off.',
    );
    expect((await use(run('web'), 'mcp_tool', [])).observation).toBe(
      'mcp_tool is not offered to this agent: its reach is web.',
    );
  });

  it('refuses a tool whose supplier is not configured', async () => {
    expect(await use(run('web'), 'search', ['search'], { query: 'acme' })).toEqual({
      outcome: 'refused',
      observation: 'No search API is configured here (SEARCH_API_URL).',
    });
  });

  it('keeps a run that stays on its domain there', async () => {
    const staying = run('web', {
      agent: {
        reach: 'web',
        mcp_servers: [],
        settings: { allow_fetch: true, allow_search: true, stay_on_domain: true },
      } as unknown as AgentDefinition,
      start_url: 'https://acme.test/',
    });
    expect(await use(staying, 'scrape', ['scrape'], { url: 'https://other.test/' })).toEqual({
      outcome: 'refused',
      observation: 'https://other.test/ is outside acme.test; the agent stays on the starting URL’s domain.',
    });
  });

  it('answers the actions that never run inline', async () => {
    expect(await use(run('web'), 'workspace_action', ['workspace_action'])).toEqual({
      outcome: 'refused',
      observation: 'Research runs do not act in the workspace; they only read.',
    });
    expect((await use(run('web'), 'read_pnet_profile', ['read_pnet_profile'])).outcome).toBe('failed');
    expect((await use(run('web'), 'finish', ['finish'])).outcome).toBe('failed');
  });
});
