/**
 * Saved agents through the API: every field of the agent and its bounds (interface spec: Browser
 * agent records, Limits), references by identity, versions, examples, and training runs scored per
 * field against a local chat-completions server. The pure rules (billing reach, price, agreement)
 * are checked directly.
 */
import { describe, expect, it } from 'vitest';
import {
  agentRunPrice,
  billedReach,
  compareAnswer,
  normaliseAnswer,
  offeredActions,
  runToolsets,
  scoreAgreement,
} from '../../domain/agents/saved-agents.js';
import { useSavedAgentStack } from '../support/saved-agents.js';

/** Capitals the model answers; a test changes one to see the agreement move. */
const capitals: Record<string, string> = { France: 'paris', Spain: 'Barcelona', Italy: 'Rome' };
const { api } = useSavedAgentStack((body) => {
  const country = /Capital of (\w+)/.exec(body.messages[1]?.content ?? '')?.[1] ?? '';
  return { content: JSON.stringify({ values: { capital: capitals[country] ?? null } }) };
});

const output = [{ key: 'answer', name: 'Answer' }];
const create = (body: object) => api.post('/saved-agents/', { name: 'Researcher', output_fields: output, ...body });
const text = (n: number) => 'x'.repeat(n);
const issueLocs = (body: { issues: { loc: string[] }[] }) => body.issues.map((i) => i.loc.join('.'));

describe('a saved agent’s fields', () => {
  it('is made with the settings defaults of the interface spec, stable input ids and version 1', async () => {
    const res = await create({ description: 'Finds things', inputs: [{ name: 'Company' }] });
    expect(res.statusCode, res.body).toBe(201);
    const agent = res.json();
    expect(agent).toMatchObject({
      name: 'Researcher',
      description: 'Finds things',
      reach: 'web',
      mcp_servers: [],
      version: 1,
      price_credits: 5,
      prompt: { segments: [] },
      output_fields: [{ key: 'answer', name: 'Answer', type: 'text', description: null }],
      settings: {
        kind: 'agent',
        allow_fetch: true,
        allow_search: true,
        context: null,
        effort: 'standard',
        saved_agent_id: agent.id,
        starting_url_column_id: null,
        stay_on_domain: false,
        use_row_context: true,
      },
    });
    expect(agent.inputs).toEqual([
      { id: expect.stringMatching(/^[0-9a-f-]{36}$/), name: 'Company', description: null },
    ]);
    expect((await api.get(`/saved-agents/${agent.id}/`)).json()).toEqual(agent);
    expect((await api.get('/saved-agents/')).json().agents.map((a: { id: string }) => a.id)).toContain(agent.id);
  });

  it('takes at most 200 prompt segments', async () => {
    const segments = (n: number) => Array.from({ length: n }, () => ({ type: 'text', text: 'a' }));
    expect((await create({ prompt: { segments: segments(200) } })).statusCode).toBe(201);
    const over = await create({ prompt: { segments: segments(201) } });
    expect(over.statusCode).toBe(422);
    expect(issueLocs(over.json())).toEqual(['body.prompt.segments']);
  });

  it('takes a text segment of at most 20000 characters', async () => {
    expect((await create({ prompt: { segments: [{ type: 'text', text: text(20000) }] } })).statusCode).toBe(201);
    const over = await create({ prompt: { segments: [{ type: 'text', text: text(20001) }] } });
    expect(over.statusCode).toBe(422);
    expect(issueLocs(over.json())[0]).toMatch(/^body\.prompt\.segments\.0/);
  });

  it('refers to inputs by id, so renaming an input never rewrites the prompt; each edit bumps the version', async () => {
    const id = crypto.randomUUID();
    const agent = (
      await create({
        inputs: [{ id, name: 'Company' }],
        prompt: {
          segments: [{ type: 'text', text: 'About ' }, { type: 'input_ref', input_id: id }, { type: 'context_ref' }],
        },
      })
    ).json();
    expect(agent.prompt.segments).toEqual([
      { type: 'text', text: 'About ' },
      { type: 'input_ref', input_id: id },
      { type: 'context_ref', section: 'all' },
    ]);
    const renamed = (await api.patch(`/saved-agents/${agent.id}/`, { inputs: [{ id, name: 'Organisation' }] })).json();
    expect(renamed.inputs).toEqual([{ id, name: 'Organisation', description: null }]);
    expect(renamed.prompt).toEqual(agent.prompt);
    expect(renamed.version).toBe(2);
    expect((await api.patch(`/saved-agents/${agent.id}/`, { name: 'Renamed' })).json().version).toBe(3);

    // Dropping an input the prompt still reads is a conflict, and changes nothing.
    const dropped = await api.patch(`/saved-agents/${agent.id}/`, { inputs: [] });
    expect(dropped.statusCode).toBe(409);
    expect(dropped.json().detail).toContain(`the prompt refers to input ${id}`);
    expect((await api.get(`/saved-agents/${agent.id}/`)).json().version).toBe(3);
  });

  it('answers 409 to an agent whose parts disagree: an input reference to no input, two inputs of one name, two fields of one key', async () => {
    expect(
      (await create({ prompt: { segments: [{ type: 'input_ref', input_id: crypto.randomUUID() }] } })).statusCode,
    ).toBe(409);
    expect((await create({ inputs: [{ name: 'A' }, { name: 'a' }] })).json().detail).toContain(
      'two inputs are named "a"',
    );
    const twice = await create({
      output_fields: [
        { key: 'x', name: 'X' },
        { key: 'x', name: 'Y' },
      ],
    });
    expect(twice.statusCode).toBe(409);
    expect(twice.json().detail).toContain('two output fields have the key "x"');
  });

  it('refuses stay_on_domain without a starting URL column (422), on create and on edit', async () => {
    const refused = await create({ settings: { stay_on_domain: true } });
    expect(refused.statusCode).toBe(422);
    expect(issueLocs(refused.json())).toEqual(['body.settings']);
    const ok = await create({ settings: { stay_on_domain: true, starting_url_column_id: crypto.randomUUID() } });
    expect(ok.statusCode).toBe(201);
    expect(ok.json().settings.stay_on_domain).toBe(true);
    const plain = (await create({})).json();
    expect((await api.patch(`/saved-agents/${plain.id}/`, { settings: { stay_on_domain: true } })).statusCode).toBe(
      422,
    );
  });

  it('checks the settings, reach, names, output fields and MCP servers at their bounds', async () => {
    expect((await create({ settings: { kind: 'other' } })).statusCode).toBe(422);
    expect((await create({ settings: { effort: 'extreme' } })).statusCode).toBe(422);
    expect(
      (await create({ settings: { effort: 'high', allow_search: false, context: 'We sell boats' } })).json().settings,
    ).toMatchObject({ effort: 'high', allow_search: false, context: 'We sell boats' });
    expect((await create({ reach: 'everything' })).statusCode).toBe(422);
    expect((await create({ reach: 'none' })).json().price_credits).toBe(1);
    expect((await create({ name: text(255) })).statusCode).toBe(201);
    expect((await create({ name: text(256) })).statusCode).toBe(422);
    expect((await create({ name: '' })).statusCode).toBe(422);
    const fields = (n: number) => Array.from({ length: n }, (_, i) => ({ key: `f${i}`, name: `F${i}` }));
    expect((await create({ output_fields: fields(50) })).statusCode).toBe(201);
    expect((await create({ output_fields: fields(51) })).statusCode).toBe(422);
    expect((await create({ output_fields: [] })).statusCode).toBe(422);
    expect((await create({ output_fields: [{ key: `k${text(99)}`, name: 'Long' }] })).statusCode).toBe(201);
    expect((await create({ output_fields: [{ key: `k${text(100)}`, name: 'Long' }] })).statusCode).toBe(422);
    expect((await create({ output_fields: [{ key: '1st', name: 'Bad' }] })).statusCode).toBe(422);
    const mcp = await create({ reach: 'mcp', mcp_servers: [{ url: 'https://tools.example/mcp' }] });
    expect(mcp.json()).toMatchObject({
      mcp_servers: [{ url: 'https://tools.example/mcp', name: null }],
      price_credits: 2,
    });
    expect((await create({ mcp_servers: [{ url: 'ftp://tools.example/' }] })).statusCode).toBe(422);
  });

  it('deletes an agent: it reads 404 afterwards', async () => {
    const agent = (await create({})).json();
    expect((await api.del(`/saved-agents/${agent.id}/`)).statusCode).toBe(204);
    expect((await api.get(`/saved-agents/${agent.id}/`)).statusCode).toBe(404);
    expect((await api.del(`/saved-agents/${agent.id}/`)).statusCode).toBe(404);
  });
});

describe('the price and agreement rules', () => {
  it('bills a run with web and MCP tools as web, MCP alone as mcp, no tools as none', () => {
    expect(billedReach({ web: true, mcp: true })).toBe('web');
    expect(billedReach({ web: false, mcp: true })).toBe('mcp');
    expect(billedReach({ web: false, mcp: false })).toBe('none');
    expect(runToolsets('web', 2)).toEqual({ web: true, mcp: true });
    expect(runToolsets('none', 2)).toEqual({ web: false, mcp: false });
    expect(agentRunPrice('web', 3)).toBe(5);
    expect(agentRunPrice('mcp', 1)).toBe(2);
    expect(agentRunPrice('mcp', 0)).toBe(1);
    expect(agentRunPrice('none', 0)).toBe(1);
    expect(offeredActions('web', { allow_fetch: false, allow_search: true }, 0)).not.toContain('scrape');
    expect(offeredActions('mcp', { allow_fetch: true, allow_search: true }, 1)).toEqual(['mcp_tool', 'finish']);
  });

  it('compares answers exactly and once normalised, per field and overall', () => {
    expect(compareAnswer('Paris', 'Paris')).toBe('exact');
    expect(compareAnswer('Paris', ' paris. ')).toBe('normalised');
    expect(compareAnswer('1,000', 1000)).toBe('normalised');
    expect(compareAnswer('Paris', 'Lyon')).toBe('mismatch');
    expect(normaliseAnswer('  Big   Co!  ')).toBe('big co');
    const score = scoreAgreement(
      ['a', 'b'],
      [
        { expected: { a: 'X', b: 'y' }, values: { a: 'X', b: 'Y' } },
        { expected: { a: 'Z' }, values: null },
      ],
    );
    expect(score.fields).toEqual([
      { key: 'a', compared: 2, exact: 1, normalised: 1, rate: 0.5 },
      { key: 'b', compared: 1, exact: 0, normalised: 1, rate: 1 },
    ]);
    expect(score.overall_rate).toBeCloseTo(2 / 3);
  });
});

describe('training from examples', () => {
  async function capitalAgent() {
    const country = crypto.randomUUID();
    const agent = (
      await api.post('/saved-agents/', {
        name: 'Capitals',
        reach: 'none',
        inputs: [{ id: country, name: 'Country' }],
        prompt: {
          segments: [
            { type: 'text', text: 'Capital of ' },
            { type: 'input_ref', input_id: country },
          ],
        },
        output_fields: [{ key: 'capital', name: 'Capital' }],
      })
    ).json();
    return { agent, country };
  }

  async function trained(agentId: string, trainingId: string) {
    for (let i = 0; i < 600; i += 1) {
      const run = (await api.get(`/saved-agents/${agentId}/training-runs/${trainingId}/`)).json();
      if (run.status !== 'running') return run;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error('training did not finish');
  }

  it('keeps examples and refuses inputs and fields the agent does not have', async () => {
    const { agent, country } = await capitalAgent();
    const made = await api.post(`/saved-agents/${agent.id}/examples/`, {
      label: 'France',
      inputs: { [country]: 'France' },
      expected: { capital: 'Paris' },
    });
    expect(made.statusCode, made.body).toBe(201);
    expect(made.json()).toMatchObject({
      agent_id: agent.id,
      label: 'France',
      inputs: { [country]: 'France' },
      expected: { capital: 'Paris' },
    });
    expect(
      (await api.post(`/saved-agents/${agent.id}/examples/`, { inputs: { [crypto.randomUUID()]: 'x' }, expected: {} }))
        .statusCode,
    ).toBe(422);
    const badKey = await api.post(`/saved-agents/${agent.id}/examples/`, { expected: { population: 3 } });
    expect(badKey.statusCode).toBe(422);
    expect(issueLocs(badKey.json())).toEqual(['body.expected']);
    expect((await api.get(`/saved-agents/${agent.id}/examples/`)).json().examples).toHaveLength(1);
    expect((await api.del(`/saved-agents/${agent.id}/examples/${made.json().id}/`)).statusCode).toBe(204);
    expect((await api.get(`/saved-agents/${agent.id}/examples/`)).json().examples).toEqual([]);
    expect((await api.post(`/saved-agents/${agent.id}/training-runs/`)).statusCode).toBe(409);
  });

  it('runs the agent on every example, reports per-field agreement and compares it with the last run', async () => {
    const { agent, country } = await capitalAgent();
    for (const [name, capital] of [
      ['France', 'Paris'],
      ['Spain', 'Madrid'],
      ['Italy', 'Rome'],
    ]) {
      await api.post(`/saved-agents/${agent.id}/examples/`, {
        label: name,
        inputs: { [country]: name },
        expected: { capital },
      });
    }
    const started = await api.post(`/saved-agents/${agent.id}/training-runs/`);
    expect(started.statusCode, started.body).toBe(201);
    expect(started.json()).toMatchObject({ status: 'running', agent_version: 1, examples_total: 3, previous: null });
    const first = await trained(agent.id, started.json().id);
    expect(first.status).toBe('completed');
    expect(first.fields).toEqual([{ key: 'capital', compared: 3, exact: 1, normalised: 2, rate: 2 / 3 }]);
    expect(first.overall_rate).toBeCloseTo(2 / 3);
    expect(first.results.map((r: { matches: object }) => r.matches)).toEqual([
      { capital: 'normalised' },
      { capital: 'mismatch' },
      { capital: 'exact' },
    ]);
    expect(first.workflow_id).toBe(`agent-training/${first.id}`);

    // A change (here the model learns Spain) shows as a better rate than the run before.
    capitals.Spain = 'Madrid';
    await api.patch(`/saved-agents/${agent.id}/`, { description: 'Now knows Spain' });
    const second = await trained(agent.id, (await api.post(`/saved-agents/${agent.id}/training-runs/`)).json().id);
    expect(second).toMatchObject({ agent_version: 2, overall_rate: 1, previous: { id: first.id, agent_version: 1 } });
    expect(second.change).toBeCloseTo(1 / 3);
    const listed = (await api.get(`/saved-agents/${agent.id}/training-runs/`)).json().training_runs;
    expect(listed.map((t: { id: string }) => t.id)).toEqual([second.id, first.id]);
    const run = (await api.get(`/agent-runs/${second.results[0].agent_run_id}/`)).json();
    expect(run).toMatchObject({
      target: 'example',
      training_run_id: second.id,
      status: 'completed',
      billed_reach: 'none',
    });
  });
});
