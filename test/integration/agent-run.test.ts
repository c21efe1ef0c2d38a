/**
 * The research loop of a saved agent, for real: the API deploys the agent onto a table, the
 * worker runs agent-run/<column>/<row>/<run>, the chat model is a local server speaking the OpenAI
 * chat-completions protocol (its answers scripted from what it is sent), pages come from a local
 * HTTP server, search from a local search API and MCP tools from a local JSON-RPC server. Runs are
 * waited for by reading the run record.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { agentSuppliersFrom } from '../../integrations/agent-tools/index.js';
import { createAgentRunActivities } from '../../activities/agents/agent-run.js';
import { createActivities } from '../../activities/index.js';
import { startOptions } from '../../services/pnet/browser-step-client.js';
import { runAgentRows } from '../../store/agents/saved-agents.js';
import { agentRunWorkflow } from '../../workflows/agents/agent-run.js';
import { agentRunWorkflowIds } from '../../workflows/agents/agent-run.contract.js';
import { browserStepWorkflow } from '../../workflows/pnet/browser-step.js';
import { useTimeSkippingWorker } from '../support/time-skipping.js';
import { getBalance } from '../../store/platform/credits.js';
import { runNewAgentRows } from '../../services/agents/agent-run-client.js';
import { queueNewRowRuns } from '../../store/agents/saved-agents.js';
import { stepPrices } from '../../domain/pnet/limits.js';
import { connectedAccount } from '../support/pnet.js';
import { serveChatCompletions } from '../support/local-servers.js';
import { serveHttp, type LocalHttp } from '../../sim/local-http.js';
import { workspaceWithClient, type TablesClient } from '../support/tables.js';
import { useTestStack, withKey } from '../support/test-stack.js';
import { testIntegrations } from '../support/integrations.js';

type Messages = { role: string; content: string }[];
let site: LocalHttp;
let searchApi: LocalHttp;
let mcpServer: LocalHttp;
let emailFinder: LocalHttp;
let model: Awaited<ReturnType<typeof serveChatCompletions>>;

/** The model's script: chosen by a marker in the prompt, given the observations so far. */
function script(messages: Messages): { status?: number; content?: string } {
  const prompt = messages[1]?.content ?? '';
  const observations = messages
    .filter((m) => m.role === 'user' && m.content.startsWith('Observation'))
    .map((m) => m.content);
  const step = (action: string, args: object, thought = `try ${action}`) => ({
    content: JSON.stringify({ thought, action, args }),
  });
  const finish = (values: object) => ({ content: JSON.stringify({ thought: 'done', action: 'finish', values }) });
  if (prompt.includes('[research]')) {
    const url = /Website: (\S+)/.exec(prompt)?.[1] ?? '';
    if (observations.length === 0) return step('find_people_at_company', { company: 'Acme' });
    if (observations.length === 1) return step('fetch_page', { url });
    if (observations.length === 2) return step('search', { query: 'acme ceo' });
    if (observations.length === 3) return step('scrape', { url: `${url}/about` });
    const ceo = /CEO: ([A-Za-z ]+)/.exec(observations.at(-1)!)?.[1]?.trim() ?? null;
    const top = /1\. ([^—]+) —/.exec(observations[2]!)?.[1]?.trim() ?? null;
    return finish({ ceo, top_result: top });
  }
  if (prompt.includes('[email]')) {
    if (observations.length === 0)
      return step('find_work_email', { full_name: 'Ada Lovelace', domain: 'acme.example' });
    return finish({ ceo: /(\S+@\S+)/.exec(observations[0]!)?.[1] ?? null, top_result: observations[0] });
  }
  if (prompt.includes('[mcp]')) {
    if (observations.length === 0) return step('scrape', { url: 'http://127.0.0.1:1/' });
    if (observations.length === 1) return step('mcp_tool', { tool: 'lookup_revenue', arguments: { company: 'Acme' } });
    return finish({ ceo: /revenue ([\d.]+)/.exec(observations.at(-1)!)?.[1] ?? null, top_result: null });
  }
  if (prompt.includes('[stay]')) {
    if (observations.length === 0) return step('scrape', { url: 'http://localhost:1/elsewhere' });
    if (observations.length === 1) return step('map', {});
    return finish({ ceo: observations.at(-1)!.includes('/about') ? 'linked' : null, top_result: null });
  }
  if (prompt.includes('[hold]'))
    return observations.length === 0
      ? step('scrape', { url: `${/Website: (\S+)/.exec(prompt)?.[1]}/hold` })
      : finish({ ceo: 'held', top_result: null });
  if (prompt.includes('[pnet]')) {
    if (observations.length === 0)
      return step('read_pnet_profile', { profile_url: 'https://pnet.example/in/ada-lovelace' });
    return finish({
      ceo: observations[0]!.includes('already_connected: true') ? 'connected' : 'not connected',
      top_result: observations[0],
    });
  }
  if (prompt.includes('[slow]'))
    return observations.length === 0
      ? step('scrape', { url: `${/Website: (\S+)/.exec(prompt)?.[1]}/slow` })
      : finish({ ceo: 'late', top_result: null });
  if (prompt.includes('[wander]')) return step('search', { query: `again ${observations.length}` });
  if (prompt.includes('[broken]')) return { status: 400 };
  if (prompt.includes('[nothing]')) return finish({ ceo: null, top_result: '' });
  if (prompt.includes('[plain]'))
    return { content: JSON.stringify({ values: { ceo: `plain ${messages.length}`, top_result: null } }) };
  return { content: 'not json at all' };
}

/** /hold answers once `hold.release()` is called; `hold.reached` counts the requests waiting. */
const hold = { release: () => {}, reached: 0 };
const held = new Promise<void>((resolve) => (hold.release = resolve));

/** /slow answers once the gate opens. */
const gate = { open: () => {}, reached: false };
let opened = new Promise<void>((resolve) => (gate.open = resolve));

beforeAll(async () => {
  site = await serveHttp(async (req, res) => {
    if (req.url === '/hold') {
      hold.reached += 1;
      await held;
      return void res.writeHead(200, { 'content-type': 'text/html' }).end('<title>Held</title><p>Released</p>');
    }
    if (req.url === '/slow') {
      gate.reached = true;
      await opened;
      return void res.writeHead(200, { 'content-type': 'text/html' }).end('<title>Slow</title><p>Finally</p>');
    }
    if (req.url === '/')
      return void res
        .writeHead(200, { 'content-type': 'text/html' })
        .end('<title>Acme</title><a href="/about">About</a><a href="https://elsewhere.example/">x</a>');
    if (req.url === '/about')
      return void res
        .writeHead(200, { 'content-type': 'text/html' })
        .end('<title>About Acme</title><p>CEO: Grace Hopper</p>');
    res.writeHead(404).end();
  });
  searchApi = await serveHttp((_req, res, body) => {
    const { query } = JSON.parse(body) as { query: string };
    res.setHeader('content-type', 'application/json');
    res.end(
      JSON.stringify({
        results: [{ title: `Acme Corp (${query})`, url: 'https://acme.example/', snippet: 'Makers of everything' }],
      }),
    );
  });
  mcpServer = await serveHttp((_req, res, body) => {
    const message = JSON.parse(body) as {
      id?: number;
      method: string;
      params?: { name?: string; arguments?: { company?: string } };
    };
    res.setHeader('content-type', 'application/json');
    res.setHeader('mcp-session-id', 'local-session');
    if (message.id === undefined) return void res.writeHead(202).end();
    const result =
      message.method === 'initialize'
        ? { protocolVersion: '2025-03-26', capabilities: { tools: {} }, serverInfo: { name: 'local', version: '1' } }
        : message.method === 'tools/list'
          ? {
              tools: [{ name: 'lookup_revenue', description: 'Revenue of a company', inputSchema: { type: 'object' } }],
            }
          : { content: [{ type: 'text', text: `${message.params?.arguments?.company} revenue 12.5` }], isError: false };
    res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
  });
  emailFinder = await serveHttp((_req, res, body) => {
    const { full_name: name, domain } = JSON.parse(body) as { full_name: string; domain: string };
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ email: `${name.split(' ')[0]!.toLowerCase()}@${domain}`, confidence: 'high' }));
  });
  model = await serveChatCompletions((body) => script(body.messages));
});
afterAll(async () => {
  hold.release();
  await Promise.all([site?.close(), searchApi?.close(), mcpServer?.close(), emailFinder?.close(), model?.close()]);
});

const env = () => ({
  OPENAI_API_KEY: 'local-key',
  OPENAI_MODEL: 'local-model',
  OPENAI_BASE_URL: `${model.url}/v1`,
  SEARCH_API_URL: `${searchApi.url}/search`,
  WORK_EMAIL_FINDER_URL: `${emailFinder.url}/find`,
  WEB_READER_ALLOW_PRIVATE_NETWORKS: 'true',
});
const { stack } = useTestStack({ agentSuppliers: () => agentSuppliersFrom(env()) });

// Ten-minute waits in a moment: the same activities on a time-skipping server.
const skippingQueue = `agent-run-skipping-${crypto.randomUUID().slice(0, 8)}`;
const skipping = useTimeSkippingWorker(skippingQueue, (testEnv) =>
  createActivities({
    sql: stack.sql,
    startStep: async (row) =>
      void (await testEnv.client.workflow.start(browserStepWorkflow, {
        ...startOptions(skippingQueue, row),
        typedSearchAttributes: [],
      })),
    housekeeping: {},
    integrations: testIntegrations({ mailer: null, chatModel: null, agentSuppliers: agentSuppliersFrom(env()) }),
  }),
);

type Run = {
  id: string;
  status: string;
  steps: {
    n: number;
    action: string;
    outcome: string;
    observation: string;
    detail: string;
    thought: string | null;
    duration_ms: number;
  }[];
  values: Record<string, unknown> | null;
  error: string | null;
  credits_charged: number;
  price_credits: number;
  billed_reach: string | null;
  model_key: string | null;
  workflow_id: string;
};
type Cell = { state: string; value: unknown; error: string | null; cost: number };

const workspaceWith = (credits: number) => workspaceWithClient(stack, credits);

/** An agent whose prompt carries `marker`, deployed on a one-row table whose Website is the local site; runs that row. */
async function deployed(
  api: TablesClient,
  marker: string,
  agent: object = {},
  website = site.url,
  runRows: number | null = 1,
) {
  const inputId = crypto.randomUUID();
  const created = await api.post('/saved-agents/', {
    name: `Agent ${marker}`,
    inputs: [{ id: inputId, name: 'Website' }],
    prompt: {
      segments: [
        { type: 'text', text: `${marker} Website: ` },
        { type: 'input_ref', input_id: inputId },
      ],
    },
    output_fields: [
      { key: 'ceo', name: 'CEO' },
      { key: 'top_result', name: 'Top result' },
    ],
    ...agent,
  });
  expect(created.statusCode, created.body).toBe(201);
  const table = await api.table({ name: `Companies ${marker} ${crypto.randomUUID().slice(0, 8)}` });
  const site = await api.column(table.id, { kind: 'input', name: 'Website' });
  const row = (await api.post(`/tables/${table.id}/rows/`, { cells: { [site.id]: website } })).json();
  const deploy = await api.post(`/tables/${table.id}/agent-columns/`, {
    saved_agent_id: created.json().id,
    input_mappings: { [inputId]: site.id },
    ...(runRows === null ? {} : { run_rows: runRows }),
  });
  expect(deploy.statusCode, deploy.body).toBe(201);
  const body = deploy.json<{
    column: { id: string };
    output_columns: { id: string; output_field: string }[];
    runs: Run[];
  }>();
  return { agent: created.json(), table, website: site, row, ...body, run: body.runs[0]! };
}

async function finished(api: TablesClient, runId: string): Promise<Run> {
  for (let i = 0; i < 600; i += 1) {
    const run = (await api.get(`/agent-runs/${runId}/`)).json<Run>();
    if (run.status === 'completed' || run.status === 'failed' || run.status === 'cancelled') return run;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`agent run ${runId} did not finish`);
}

const cellsOf = async (api: TablesClient, tableId: string, rowId: string) =>
  (await api.get(`/tables/${tableId}/rows/${rowId}/`)).json().computed as Record<string, Cell>;

describe('a research run on a row', () => {
  it('records every step, refuses tools without a supplier, reads real pages and writes the answer into the cells', async () => {
    const { ws, api } = await workspaceWith(100);
    const d = await deployed(api, '[research]');
    expect(d.run.status).toBe('queued');
    expect(d.run.workflow_id).toBe(`agent-run/${d.column.id}/${d.row.id}/${d.run.id}`);
    const run = await finished(api, d.run.id);

    expect(run.status).toBe('completed');
    expect(run.model_key).toBe('local-model');
    expect(run.steps.map((s) => [s.n, s.action, s.outcome])).toEqual([
      [0, 'find_people_at_company', 'refused'],
      [1, 'fetch_page', 'refused'],
      [2, 'search', 'completed'],
      [3, 'scrape', 'completed'],
      [4, 'finish', 'completed'],
    ]);
    expect(run.steps[0]!.observation).toBe('No people-finder service is configured (PEOPLE_FINDER_URL).');
    expect(run.steps[1]!.observation).toContain('historical');
    expect(run.steps[2]!.detail).toBe('search query=acme ceo');
    expect(run.steps[2]!.observation).toContain('Acme Corp (acme ceo)');
    expect(run.steps[3]!.observation).toContain('CEO: Grace Hopper');
    expect(run.steps[3]!.thought).toBe('try scrape');
    for (const s of run.steps) expect(s.duration_ms).toBeGreaterThanOrEqual(0);
    expect(run.values).toEqual({ ceo: 'Grace Hopper', top_result: 'Acme Corp (acme ceo)' });
    expect(searchApi.requests.some((r) => JSON.parse(r.body).query === 'acme ceo')).toBe(true);
    expect(site.requests.some((r) => r.path === '/about')).toBe(true);

    // The cells: the agent column holds the answer, each output column its field; the row paid the web price.
    const cells = await cellsOf(api, d.table.id, d.row.id);
    const ceo = d.output_columns.find((c) => c.output_field === 'ceo')!.id;
    expect(cells[d.column.id]).toMatchObject({
      state: 'done',
      value: { ceo: 'Grace Hopper', top_result: 'Acme Corp (acme ceo)' },
      cost: 5,
    });
    expect(cells[ceo]).toMatchObject({ state: 'done', value: 'Grace Hopper', error: null });
    expect(run).toMatchObject({ credits_charged: 5, price_credits: 5, billed_reach: 'web' });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 95, held: 0, spent: 5 });

    // The column lists its runs with their steps.
    const listed = (
      await api.get(`/tables/${d.table.id}/agent-columns/${d.column.id}/agent-runs/?row_id=${d.row.id}`)
    ).json().runs as Run[];
    expect(listed.map((r) => r.id)).toEqual([run.id]);
  });

  it('finds a work email through the email-finder service once the workspace switches the tool on', async () => {
    const { api } = await workspaceWith(100);
    const off = await finished(api, (await deployed(api, '[email]')).run.id);
    expect(off.steps[0]).toMatchObject({ action: 'find_work_email', outcome: 'refused' });
    expect(off.steps[0]!.observation).toContain('switched off');
    expect((await api.patch('/agent-tools/find_work_email/', { enabled: true })).statusCode).toBe(200);
    const on = await finished(api, (await deployed(api, '[email]')).run.id);
    expect(on.steps[0]).toMatchObject({
      action: 'find_work_email',
      outcome: 'completed',
      observation: 'ada@acme.example (confidence high)',
    });
    expect(on.values).toMatchObject({ ceo: 'ada@acme.example' });
    expect(JSON.parse(emailFinder.requests.at(-1)!.body)).toEqual({
      full_name: 'Ada Lovelace',
      domain: 'acme.example',
    });
  });

  it('calls attached MCP tools over JSON-RPC and bills a run with web and MCP tools as web', async () => {
    const { api } = await workspaceWith(100);
    const d = await deployed(api, '[mcp]', { reach: 'mcp', mcp_servers: [{ url: `${mcpServer.url}/mcp` }] });
    expect(d.agent.price_credits).toBe(2);
    const run = await finished(api, d.run.id);
    expect(run.steps.map((s) => [s.action, s.outcome])).toEqual([
      ['scrape', 'refused'],
      ['mcp_tool', 'completed'],
      ['finish', 'completed'],
    ]);
    expect(run.steps[0]!.observation).toContain('not offered');
    expect(run.values).toEqual({ ceo: '12.5', top_result: null });
    expect(run).toMatchObject({ billed_reach: 'mcp', credits_charged: 2 });
    expect(mcpServer.requests.map((r) => JSON.parse(r.body).method)).toContain('tools/call');

    const both = await api.patch(`/saved-agents/${d.agent.id}/`, { reach: 'web' });
    expect(both.json()).toMatchObject({ price_credits: 5, version: 2 });
  });

  it('stays on the starting URL’s domain when asked: other sites are refused, the site itself is read', async () => {
    const { api } = await workspaceWith(100);
    const table = await api.table({ name: 'Stay' });
    const website = await api.column(table.id, { kind: 'input', name: 'Website' });
    const row = (await api.post(`/tables/${table.id}/rows/`, { cells: { [website.id]: site.url } })).json();
    const agent = (
      await api.post('/saved-agents/', {
        name: 'Stayer',
        prompt: { segments: [{ type: 'text', text: '[stay] read the site' }] },
        output_fields: [
          { key: 'ceo', name: 'CEO' },
          { key: 'top_result', name: 'Top' },
        ],
        settings: { starting_url_column_id: website.id, stay_on_domain: true },
      })
    ).json();
    const deploy = (
      await api.post(`/tables/${table.id}/agent-columns/`, { saved_agent_id: agent.id, run_rows: 1 })
    ).json();
    const run = await finished(api, deploy.runs[0].id);
    expect(run.steps.map((s) => [s.action, s.outcome])).toEqual([
      ['scrape', 'refused'],
      ['map', 'completed'],
      ['finish', 'completed'],
    ]);
    expect(run.steps[0]!.observation).toContain('outside 127.0.0.1');
    expect(run.steps[1]!.detail).toBe('map');
    expect(run.steps[1]!.observation).toContain(`${site.url}/about`);
    expect(run.values).toMatchObject({ ceo: 'linked' });
    void row;
  });

  it('answers with one plain completion when the reach is none', async () => {
    const { api } = await workspaceWith(100);
    const d = await deployed(api, '[plain]', { reach: 'none' });
    const run = await finished(api, d.run.id);
    expect(run.steps.map((s) => [s.action, s.outcome])).toEqual([['finish', 'completed']]);
    expect(run).toMatchObject({
      status: 'completed',
      billed_reach: 'none',
      credits_charged: 1,
      values: { ceo: 'plain 2', top_result: null },
    });
  });
});

describe('runs that end without an answer', () => {
  it('returns the held credits and errs the cells when the model refuses', async () => {
    const { ws, api } = await workspaceWith(100);
    const d = await deployed(api, '[broken]');
    const run = await finished(api, d.run.id);
    expect(run.status).toBe('failed');
    expect(run.error).toContain('400');
    expect(run.credits_charged).toBe(0);
    const cells = await cellsOf(api, d.table.id, d.row.id);
    expect(cells[d.column.id]).toMatchObject({ state: 'error', cost: 0 });
    expect(cells[d.output_columns[0]!.id]!.state).toBe('error');
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 100, held: 0, spent: 0 });
    const ledger = await stack.sql<{ kind: string; amount: number }[]>`
      select kind, amount from credit_ledger where workspace_id = ${ws.workspaceId} and kind <> 'grant' order by id`;
    expect(ledger).toEqual([
      { kind: 'hold', amount: 5 },
      { kind: 'release', amount: 5 },
    ]);
  });

  it('stops a model that never finishes at the step bound of its effort, and charges nothing', async () => {
    const { ws, api } = await workspaceWith(100);
    const d = await deployed(api, '[wander]', { settings: { effort: 'low' } });
    const run = await finished(api, d.run.id);
    expect(run.status).toBe('failed');
    expect(run.error).toBe('The agent did not finish within 4 steps.');
    expect(run.steps.map((s) => s.action)).toEqual(['search', 'search', 'search', 'search']);
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 100, held: 0, spent: 0 });
  });

  it('records an answer that is no usable step as a failed step', async () => {
    const { api } = await workspaceWith(100);
    const d = await deployed(api, '[garbage]', { settings: { effort: 'low' } });
    const run = await finished(api, d.run.id);
    expect(run.status).toBe('failed');
    expect(run.steps[0]).toMatchObject({ action: 'finish', outcome: 'failed' });
    expect(run.steps[0]!.observation).toContain('not JSON');
  });

  it('charges nothing for an empty answer', async () => {
    const { ws, api } = await workspaceWith(100);
    const d = await deployed(api, '[nothing]');
    const run = await finished(api, d.run.id);
    expect(run).toMatchObject({ status: 'completed', values: null, credits_charged: 0 });
    expect((await cellsOf(api, d.table.id, d.row.id))[d.column.id]).toMatchObject({
      state: 'done',
      value: null,
      cost: 0,
    });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 100, held: 0, spent: 0 });
  });

  it('returns the credits of a run whose row is deleted while it researches', async () => {
    const { ws, api } = await workspaceWith(100);
    opened = new Promise<void>((resolve) => (gate.open = resolve));
    const d = await deployed(api, '[slow]');
    await expect.poll(() => gate.reached, { timeout: 15_000, interval: 50 }).toBe(true);
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 95, held: 5, spent: 0 });
    expect((await api.del(`/tables/${d.table.id}/rows/${d.row.id}/`)).statusCode).toBe(204);
    gate.open();
    await expect
      .poll(() => getBalance(stack.sql, ws.workspaceId), { timeout: 30_000, interval: 100 })
      .toEqual({ available: 100, held: 0, spent: 0 });
    expect((await api.get(`/agent-runs/${d.run.id}/`)).statusCode).toBe(404);
  });

  it('does not start without the credits for its price', async () => {
    const { api } = await workspaceWith(3);
    const d = await deployed(api, '[research]');
    const run = await finished(api, d.run.id);
    expect(run.status).toBe('failed');
    expect(run.error).toContain('credits');
    expect(run.steps).toEqual([]);
  });

  it('runs rows named later, one going run per row', async () => {
    const { api } = await workspaceWith(100);
    const d = await deployed(api, '[plain]', { reach: 'none' });
    await finished(api, d.run.id);
    const again = await api.post(`/tables/${d.table.id}/agent-columns/${d.column.id}/agent-runs/`, {
      row_ids: [d.row.id],
    });
    expect(again.statusCode, again.body).toBe(201);
    const second = again.json().runs[0] as Run;
    // A run of its own, never the earlier one's workflow still closing.
    expect(second.workflow_id).toBe(`agent-run/${d.column.id}/${d.row.id}/${second.id}`);
    expect((await finished(api, second.id)).status).toBe('completed');
    expect(
      (
        await api.post(`/tables/${d.table.id}/agent-columns/${d.output_columns[0]!.id}/agent-runs/`, {
          row_ids: [d.row.id],
        })
      ).statusCode,
    ).toBe(409);
    expect(
      (await api.post(`/tables/${d.table.id}/agent-columns/${d.column.id}/agent-runs/`, { row_ids: [] })).statusCode,
    ).toBe(422);
  });
});

const until = <T>(read: () => Promise<T>, done: (value: T) => boolean, what: string): Promise<T> =>
  vi.waitFor(
    async () => {
      const value = await read();
      if (!done(value)) throw new Error(`timed out waiting for ${what}`);
      return value;
    },
    { timeout: 30_000, interval: 100 },
  );

/** The browser step the run queued to read a profile, once it is queued. */
const queuedProfileRead = (runId: string) =>
  until(
    async () =>
      (await stack.sql<{ id: string }[]>`select id from browser_steps where params ->> 'agent_run_id' = ${runId}`)[0],
    Boolean,
    'the profile read queued',
  );

/** An agent deployed to read the site's /hold page, once its run is waiting there (until `hold.release()`). */
async function deployedReadingHold(api: TablesClient) {
  const reached = hold.reached;
  const d = await deployed(api, '[hold]');
  await until(
    async () => hold.reached,
    (n) => n > reached,
    'the run reading /hold',
  );
  return d;
}

/** The ledger of one run's hold: how often it was charged and released. */
async function holdMovements(runId: string) {
  const rows = await stack.sql<{ kind: string; amount: number }[]>`
    select l.kind, l.amount from credit_ledger l join credit_holds h on h.id = l.hold_id where h.cause_key = ${`agent-run:${runId}`} order by l.created_at`;
  return rows.map((r) => `${r.kind} ${r.amount}`);
}

describe('auto_run on agent columns', () => {
  /** A one-input agent of reach none (one plain completion per row) deployed unrun on an auto_run table. */
  async function autoTable(api: TablesClient, table: object) {
    const inputId = crypto.randomUUID();
    const agent = (
      await api.post('/saved-agents/', {
        name: 'Auto agent',
        reach: 'none',
        inputs: [{ id: inputId, name: 'Website' }],
        prompt: {
          segments: [
            { type: 'text', text: '[plain] Website: ' },
            { type: 'input_ref', input_id: inputId },
          ],
        },
        output_fields: [
          { key: 'ceo', name: 'CEO' },
          { key: 'top_result', name: 'Top' },
        ],
      })
    ).json();
    const t = await api.table({ name: `Auto ${crypto.randomUUID().slice(0, 8)}`, ...table });
    const website = await api.column(t.id, { kind: 'input', name: 'Website' });
    const deploy = await api.post(`/tables/${t.id}/agent-columns/`, {
      saved_agent_id: agent.id,
      input_mappings: { [inputId]: website.id },
    });
    expect(deploy.statusCode, deploy.body).toBe(201);
    return { agent, table: t, website, column: deploy.json().column as { id: string } };
  }

  it('runs the rows added later, one by one, in bulk or from a CSV, each held and charged as any run', async () => {
    const { ws, api } = await workspaceWith(100);
    const { agent, table, website, column } = await autoTable(api, { auto_run: false });
    const before = (
      await api.post(`/tables/${table.id}/rows/`, { cells: { [website.id]: 'https://before.example' } })
    ).json();
    expect((await api.patch(`/tables/${table.id}/`, { auto_run: true })).statusCode).toBe(200);

    await api.post(`/tables/${table.id}/rows/`, { cells: { [website.id]: 'https://one.example' } });
    await api.post(`/tables/${table.id}/rows/bulk/`, {
      rows: ['a', 'b'].map((n) => ({ cells: { [website.id]: `https://bulk-${n}.example` } })),
    });
    const csv = await stack.app.inject({
      method: 'POST',
      url: `/tables/${table.id}/csv/`,
      headers: { ...withKey(ws.apiKey), 'content-type': 'text/csv' },
      payload: 'Website\nhttps://csv-a.example\nhttps://csv-b.example\n',
    });
    expect(csv.json()).toMatchObject({ rows_added: 2 });

    const runsOf = async () =>
      (await api.get(`/tables/${table.id}/agent-columns/${column.id}/agent-runs/`)).json().runs as (Run & {
        row_id: string;
      })[];
    const runs = await until(
      runsOf,
      (all) => all.length === 5 && all.every((r) => r.status === 'completed'),
      'five auto runs completed',
    );
    // The row that was there before auto_run went on stays unrun (there is no run-all).
    expect(runs.map((r) => r.row_id)).not.toContain(before.id);
    expect((await cellsOf(api, table.id, before.id))[column.id]).toBeUndefined();
    for (const run of runs) expect(run).toMatchObject({ credits_charged: agent.price_credits, error: null });
    const rows = (await api.get(`/tables/${table.id}/rows/`)).json().rows as { id: string }[];
    const cells = await Promise.all(
      rows.filter((r) => r.id !== before.id).map(async (r) => (await cellsOf(api, table.id, r.id))[column.id]!),
    );
    expect(cells.map((c) => c.state)).toEqual(['done', 'done', 'done', 'done', 'done']);
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({
      available: 100 - 5 * agent.price_credits,
      held: 0,
      spent: 5 * agent.price_credits,
    });

    // Switched off, new rows are left alone.
    await api.patch(`/tables/${table.id}/`, { auto_run: false });
    const quiet = (
      await api.post(`/tables/${table.id}/rows/`, { cells: { [website.id]: 'https://quiet.example' } })
    ).json();
    expect(await runsOf()).toHaveLength(5);
    expect((await cellsOf(api, table.id, quiet.id))[column.id]).toBeUndefined();
  });

  it('honours keep_existing_results: a row whose cell holds an answer is run again only when it is off', async () => {
    const { ws, api } = await workspaceWith(100);
    const { table, website, column } = await autoTable(api, { auto_run: true, keep_existing_results: true });
    const row = (
      await api.post(`/tables/${table.id}/rows/`, { cells: { [website.id]: 'https://kept.example' } })
    ).json();
    const runsOf = async () =>
      (await api.get(`/tables/${table.id}/agent-columns/${column.id}/agent-runs/`)).json().runs as Run[];
    await until(runsOf, (all) => all.length === 1 && all[0]!.status === 'completed', 'the first run');
    // The newest row counts as added again (as a concurrent add would make it): kept, it is not run.
    expect(await queueNewRowRuns(stack.sql, ws.workspaceId, table.id, 1, agentRunWorkflowIds)).toEqual([]);
    await api.patch(`/tables/${table.id}/`, { keep_existing_results: false });
    const again = await queueNewRowRuns(stack.sql, ws.workspaceId, table.id, 1, agentRunWorkflowIds);
    expect(again.map((r) => r.row_id)).toEqual([row.id]);
  });

  it('queues nothing without a chat model, as an enrichment column whose provider is absent is not run', async () => {
    const { ws, api } = await workspaceWith(100);
    const { table, website, column } = await autoTable(api, { auto_run: false });
    await api.post(`/tables/${table.id}/rows/`, { cells: { [website.id]: 'https://x.example' } });
    await api.patch(`/tables/${table.id}/`, { auto_run: true });
    const log = { warn: () => undefined } as never;
    const temporal = { client: stack.client, taskQueue: stack.taskQueue };
    const runsOf = async () =>
      (await api.get(`/tables/${table.id}/agent-columns/${column.id}/agent-runs/`)).json().runs as Run[];
    await runNewAgentRows(
      { sql: stack.sql, temporal, agentSuppliers: agentSuppliersFrom({}), log },
      ws.workspaceId,
      table.id,
      1,
    );
    expect(await runsOf()).toEqual([]);
    await runNewAgentRows(
      { sql: stack.sql, temporal, agentSuppliers: agentSuppliersFrom(env()), log },
      ws.workspaceId,
      table.id,
      1,
    );
    await until(runsOf, (runs) => runs.length === 1 && runs[0]!.status === 'completed', 'the auto run');
  });
});

describe('cancelling agent runs', () => {
  it('cancels a running run: its cells are skipped with error "cancelled" and its hold is returned, never charged', async () => {
    const { ws, api } = await workspaceWith(100);
    const d = await deployedReadingHold(api);
    expect((await getBalance(stack.sql, ws.workspaceId)).held).toBe(d.run.price_credits);

    const cancelled = await api.post(`/agent-runs/${d.run.id}/cancel/`);
    expect(cancelled.statusCode, cancelled.body).toBe(200);
    expect(cancelled.json()).toMatchObject({
      status: 'cancelled',
      error: 'cancelled',
      credits_charged: 0,
      values: null,
    });
    const cells = await cellsOf(api, d.table.id, d.row.id);
    expect(cells[d.column.id]).toMatchObject({ state: 'skipped', error: 'cancelled', value: null, cost: 0 });
    expect(d.output_columns.map((c) => c.output_field)).toEqual(['ceo', 'top_result']);
    for (const out of d.output_columns) expect(cells[out.id]).toMatchObject({ state: 'skipped', error: 'cancelled' });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 100, held: 0, spent: 0 });
    expect(await holdMovements(d.run.id)).toEqual([`hold ${d.run.price_credits}`, `release ${d.run.price_credits}`]);

    // The workflow closes without another step; a second cancel changes nothing.
    const handle = stack.client.workflow.getHandle(d.run.workflow_id);
    expect((await handle.result()).status).toBe('cancelled');
    const again = await api.post(`/agent-runs/${d.run.id}/cancel/`);
    expect(again.statusCode).toBe(409);
    expect(again.json().detail).toBe('The run is already cancelled; nothing changed.');
    expect((await api.get(`/agent-runs/${d.run.id}/`)).json().steps).toEqual([]);
    expect((await api.post(`/agent-runs/${crypto.randomUUID()}/cancel/`)).statusCode).toBe(404);

    // The row runs again afterwards.
    const rerun = await api.post(`/tables/${d.table.id}/agent-columns/${d.column.id}/agent-runs/`, {
      row_ids: [d.row.id],
    });
    expect(rerun.statusCode, rerun.body).toBe(201);
    await api.post(`/agent-runs/${rerun.json().runs[0].id}/cancel/`);
  });

  it("cancels every going run of an agent column, and answers a finished one's cancel with 409", async () => {
    const { ws, api } = await workspaceWith(100);
    const d = await deployed(api, '[hold]');
    const second = (await api.post(`/tables/${d.table.id}/rows/`, { cells: { [d.website.id]: site.url } })).json();
    const queued = await api.post(`/tables/${d.table.id}/agent-columns/${d.column.id}/agent-runs/`, {
      row_ids: [second.id],
    });
    expect(queued.statusCode, queued.body).toBe(201);
    const url = `/tables/${d.table.id}/agent-columns/${d.column.id}/agent-runs/cancel/`;
    const cancelled = await api.post(url);
    expect(cancelled.statusCode, cancelled.body).toBe(200);
    expect(cancelled.json().runs.map((r: Run) => r.status)).toEqual(['cancelled', 'cancelled']);
    expect((await cellsOf(api, d.table.id, second.id))[d.column.id]).toMatchObject({
      state: 'skipped',
      error: 'cancelled',
    });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 100, held: 0, spent: 0 });
    // Nothing going: an empty answer. Not an agent column: 404.
    expect((await api.post(url)).json()).toEqual({ runs: [] });
    expect((await api.post(`/tables/${d.table.id}/agent-columns/${d.website.id}/agent-runs/cancel/`)).statusCode).toBe(
      404,
    );

    const done = await deployed(api, '[plain]', { reach: 'none' });
    await finished(api, done.run.id);
    const late = await api.post(`/agent-runs/${done.run.id}/cancel/`);
    expect(late.statusCode).toBe(409);
    expect(late.json().detail).toBe('The run is already completed; nothing changed.');
  });

  it('charges at most once when a cancel races the finish', async () => {
    const { ws, api } = await workspaceWith(100);
    const acts = createAgentRunActivities({ sql: stack.sql, suppliers: agentSuppliersFrom(env()) });
    const answer = {
      action: 'finish' as const,
      thought: 'done',
      args: {},
      values: { ceo: 'Raced', top_result: null },
      problem: null,
    };
    const outcomes: string[] = [];
    for (let i = 0; i < 4; i += 1) {
      const d = await deployedReadingHold(api);
      // The finish arrives from elsewhere (as a finishing activity would) while the person cancels:
      // first the finish ahead, then the cancel ahead, then both at once.
      const finish = () => acts.finishAgentRun({ runId: d.run.id, n: 9, decision: answer });
      const cancelIt = () => api.post(`/agent-runs/${d.run.id}/cancel/`);
      let finishedAs: Awaited<ReturnType<typeof finish>>;
      let cancel: Awaited<ReturnType<typeof cancelIt>>;
      if (i === 0) {
        finishedAs = await finish();
        cancel = await cancelIt();
      } else if (i === 1) {
        cancel = await cancelIt();
        finishedAs = await finish();
      } else [finishedAs, cancel] = await Promise.all([finish(), cancelIt()]);
      const run = (await api.get(`/agent-runs/${d.run.id}/`)).json<Run>();
      const movements = await holdMovements(d.run.id);
      if (run.status === 'completed') {
        expect(cancel.statusCode).toBe(409);
        expect(finishedAs).toBe('completed');
        expect(run.credits_charged).toBe(d.run.price_credits);
        expect(movements).toEqual([`hold ${d.run.price_credits}`, `charge ${d.run.price_credits}`]);
        expect((await cellsOf(api, d.table.id, d.row.id))[d.column.id]).toMatchObject({ state: 'done' });
      } else {
        expect(cancel.statusCode).toBe(200);
        expect(finishedAs).toBe('cancelled');
        expect(run).toMatchObject({ status: 'cancelled', credits_charged: 0 });
        expect(movements).toEqual([`hold ${d.run.price_credits}`, `release ${d.run.price_credits}`]);
      }
      // A finish retried afterwards moves nothing.
      await acts.finishAgentRun({ runId: d.run.id, n: 9, decision: answer });
      expect(await holdMovements(d.run.id)).toEqual(movements);
      outcomes.push(run.status);
      await stack.client.workflow
        .getHandle(d.run.workflow_id)
        .terminate('test done')
        .catch(() => undefined);
    }
    expect(outcomes.slice(0, 2)).toEqual(['completed', 'cancelled']);
    const balance = await getBalance(stack.sql, ws.workspaceId);
    expect(balance.held).toBe(0);
    expect(balance.spent).toBe(outcomes.filter((o) => o === 'completed').length * 5);
  });
});

describe('read_pnet_profile through a connected account', () => {
  it("queues a metered profile_view on the workspace's account, waits for the browser and records its facts", async () => {
    const { ws, api } = await workspaceWith(100);
    // Of two connected accounts the automatic one reads (a manual one would put it on the Tasks page first).
    await connectedAccount(stack, ws, { run_mode: 'manual' });
    const a = await connectedAccount(stack, ws);
    expect((await api.patch('/agent-tools/read_pnet_profile/', { enabled: true })).statusCode).toBe(200);
    const d = await deployed(api, '[pnet]');

    const steps = async () =>
      (await api.get('/pnet/steps/')).json().steps as {
        id: string;
        status: string;
        kind: string;
        params: Record<string, unknown>;
        account_id: string;
      }[];
    const [step] = await until(steps, (all) => all.length === 1, 'the profile read queued');
    expect(step).toMatchObject({
      kind: 'profile_view',
      status: 'queued',
      account_id: a.accountId,
      params: { kind: 'profile_view', profile_url: 'https://pnet.example/in/ada-lovelace', read_relationship: true },
    });
    expect((await getBalance(stack.sql, ws.workspaceId)).held).toBe(d.run.price_credits + stepPrices.profile_view);
    // The run waits for the browser, not for a timer of its own.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await api.get(`/agent-runs/${d.run.id}/`)).json().status).toBe('running');

    const claimed = (await a.claim()).json().step;
    expect(claimed.id).toBe(step!.id);
    const reported = await a.report(step!.id, {
      status: 'succeeded',
      claimed_at: claimed.claimed_at,
      outcome: {
        kind: 'profile_view',
        profile_resolved: true,
        vanity: 'ada-lovelace',
        already_connected: true,
        invitation_pending: false,
        can_send_message: true,
      },
    });
    expect(reported.statusCode, reported.body).toBe(200);

    const run = await finished(api, d.run.id);
    expect(run.status).toBe('completed');
    expect(run.steps.map((s) => [s.action, s.outcome])).toEqual([
      ['read_pnet_profile', 'completed'],
      ['finish', 'completed'],
    ]);
    expect(run.steps[0]!.detail).toBe('read_pnet_profile profile_url=https://pnet.example/in/ada-lovelace');
    for (const fact of [
      'vanity: ada-lovelace',
      'already_connected: true',
      'invitation_pending: false',
      'can_send_message: true',
    ])
      expect(run.steps[0]!.observation).toContain(fact);
    expect(run.values).toMatchObject({ ceo: 'connected' });
    // The read and the run were each charged once.
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({
      available: 100 - 5 - stepPrices.profile_view,
      held: 0,
      spent: 5 + stepPrices.profile_view,
    });
  });

  it('records a failed read with its reason, and refuses without a connected account', async () => {
    const { ws, api } = await workspaceWith(100);
    const none = await finished(api, (await deployed(api, '[pnet]')).run.id);
    expect(none.steps[0]).toMatchObject({
      action: 'read_pnet_profile',
      outcome: 'refused',
      observation: 'No pnet account of this workspace is connected to read profiles with.',
    });

    const a = await connectedAccount(stack, ws);
    await api.patch('/agent-tools/read_pnet_profile/', { enabled: true });
    // Nobody on the do-not-contact list is visited.
    await stack.sql`insert into do_not_contact_entries (workspace_id, kind, value) values (${ws.workspaceId}, 'profile_url', normalize_profile_url('https://pnet.example/in/ada-lovelace'))`;
    const stopped = await finished(api, (await deployed(api, '[pnet]')).run.id);
    expect(stopped.steps[0]).toMatchObject({
      action: 'read_pnet_profile',
      outcome: 'refused',
      observation: 'This profile is on the workspace’s do-not-contact list; it is not visited.',
    });
    await stack.sql`delete from do_not_contact_entries where workspace_id = ${ws.workspaceId}`;

    const d = await deployed(api, '[pnet]');
    const step = await queuedProfileRead(d.run.id);
    const claimed = (await a.claim()).json().step;
    expect(claimed.id).toBe(step!.id);
    await a.report(step!.id, {
      status: 'failed',
      claimed_at: claimed.claimed_at,
      error_code: 'navigation_failed',
      error_message: 'The profile page did not load',
    });
    const run = await finished(api, d.run.id);
    expect(run.steps[0]).toMatchObject({ action: 'read_pnet_profile', outcome: 'failed' });
    expect(run.steps[0]!.observation).toBe(
      'The profile read failed (navigation_failed: The profile page did not load).',
    );
    expect(run.values).toMatchObject({ ceo: 'not connected' });
    // The failed read's hold went back; only the three runs (each with an answer) were charged.
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 85, held: 0, spent: 15 });
    expect(await stack.sql`select 1 from browser_steps where workspace_id = ${ws.workspaceId}`).toHaveLength(1);
  });

  it('cancelling a run that waits for its read cancels the queued step too', async () => {
    const { ws, api } = await workspaceWith(100);
    await connectedAccount(stack, ws);
    await api.patch('/agent-tools/read_pnet_profile/', { enabled: true });
    const d = await deployed(api, '[pnet]');
    const step = await queuedProfileRead(d.run.id);
    expect((await api.post(`/agent-runs/${d.run.id}/cancel/`)).json()).toMatchObject({ status: 'cancelled' });
    const [stored] = await stack.sql<
      { status: string; error_code: string }[]
    >`select status, error_code from browser_steps where id = ${step!.id}`;
    expect(stored).toEqual({ status: 'cancelled', error_code: 'cancelled' });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 100, held: 0, spent: 0 });
  });
});

describe('a profile read nobody settles', () => {
  it('fails the research step after ten minutes and cancels the queued step, whose hold goes back', async () => {
    const { ws, api } = await workspaceWith(100);
    await connectedAccount(stack, ws);
    await api.patch('/agent-tools/read_pnet_profile/', { enabled: true });
    const d = await deployed(api, '[pnet]', {}, site.url, null);
    const [run] = await runAgentRows(
      stack.sql,
      ws.workspaceId,
      d.table.id,
      d.column.id,
      [d.row.id],
      true,
      agentRunWorkflowIds,
    );
    const handle = await skipping.env.client.workflow.start(agentRunWorkflow, {
      taskQueue: skippingQueue,
      workflowId: run!.workflow_id,
      args: [{ runId: run!.id, workspaceId: ws.workspaceId }],
    });
    expect((await handle.result()).status).toBe('completed');
    const stored = (await api.get(`/agent-runs/${run!.id}/`)).json<Run>();
    expect(stored.steps[0]).toMatchObject({
      action: 'read_pnet_profile',
      outcome: 'failed',
      observation: 'The profile read did not finish within 10 minutes (its step is cancelled now).',
    });
    expect(stored.steps[0]!.duration_ms).toBeGreaterThanOrEqual(0);
    expect(stored.values).toMatchObject({ ceo: 'not connected' });
    const [step] = await stack.sql<
      { status: string; error_code: string }[]
    >`select status, error_code from browser_steps where params ->> 'agent_run_id' = ${run!.id}`;
    expect(step).toEqual({ status: 'cancelled', error_code: 'cancelled' });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 95, held: 0, spent: 5 });
  });
});
