/**
 * Deploying a saved agent onto a table (the interface spec's section of that name), through the
 * API: every field at its bounds, the output fan-out, the taken-name fallback, position, run_rows
 * (1 to 50, omitted: unrun) and use_row_context stamped onto the column. Runs go to a local
 * chat-completions server that answers at once; an environment without a chat model refuses the
 * deploy.
 */
import { describe, expect, it } from 'vitest';
import { agentSuppliersFrom } from '../../integrations/agent-tools/index.js';
import { buildApp } from '../../api/app.js';
import { createTokenVerifier } from '../../services/platform/tokens.js';
import { resolveTokenConfig } from '../../worker/auth-config.js';
import { useSavedAgentStack } from '../support/saved-agents.js';
import { withKey } from '../support/test-stack.js';
import { testIntegrations } from '../support/integrations.js';

// The answer echoes the prompt it was given, so a test sees what the prompt read.
const { stack, paid, api } = useSavedAgentStack((body) => ({
  content: JSON.stringify({ values: { f0: body.messages[1]!.content, f1: null } }),
}));

type Column = {
  id: string;
  name: string;
  kind: string;
  position: number;
  parent_column_id: string | null;
  output_field: string | null;
  agent: Record<string, unknown> | null;
};

/** An agent with `fields` output fields (f0, f1, ...) and one input, and a table with `rows` rows of a Company column. */
async function setup(options: { fields?: number; rows?: number; agent?: object } = {}) {
  const inputId = crypto.randomUUID();
  const fields = Array.from({ length: options.fields ?? 2 }, (_, i) => ({ key: `f${i}`, name: `Field ${i}` }));
  const agent = (
    await api.post('/saved-agents/', {
      name: 'Scorer',
      reach: 'none',
      inputs: [{ id: inputId, name: 'Company' }],
      prompt: {
        segments: [
          { type: 'text', text: 'Score ' },
          { type: 'input_ref', input_id: inputId },
          { type: 'text', text: '\nRow context: ' },
          { type: 'context_ref', section: 'row' },
        ],
      },
      output_fields: fields,
      ...options.agent,
    })
  ).json();
  const table = await api.table({ name: 'Leads' });
  const company = await api.column(table.id, { kind: 'input', name: 'Company' });
  const rows: string[] = [];
  if (options.rows) {
    const bulk = await api.post(`/tables/${table.id}/rows/bulk/`, {
      rows: Array.from({ length: options.rows }, (_, i) => ({ cells: { [company.id]: `Co ${i}` } })),
    });
    expect(bulk.statusCode, bulk.body).toBeLessThan(300);
    rows.push(...bulk.json().results.map((r: { id: string }) => r.id));
  }
  const deploy = (body: object) =>
    api.post(`/tables/${table.id}/agent-columns/`, {
      saved_agent_id: agent.id,
      input_mappings: { [inputId]: company.id },
      ...body,
    });
  return { agent, inputId, table, company, rows, deploy };
}

const columnsOf = async (tableId: string) => (await api.get(`/tables/${tableId}/columns/`)).json().columns as Column[];

describe('deploying a saved agent (interface spec: Deploy a saved agent onto a table)', () => {
  it('adds the agent column and fans its output fields out into named columns right after it', async () => {
    const s = await setup({ fields: 3 });
    const res = await s.deploy({
      column_name: 'Score',
      output_field_names: ['f2', 'f0'],
      output_column_names: { f2: 'Third' },
    });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json<{ column: Column; output_columns: Column[]; runs: unknown[] }>();
    expect(body.column).toMatchObject({
      name: 'Score',
      kind: 'agent',
      position: 1,
      parent_column_id: null,
      agent: {
        saved_agent_id: s.agent.id,
        agent_version: 1,
        input_mappings: { [s.inputId]: s.company.id },
        output_fields: ['f2', 'f0'],
        use_row_context: true,
      },
    });
    expect(body.output_columns.map((c) => [c.name, c.output_field, c.position, c.parent_column_id])).toEqual([
      ['Third', 'f2', 2, body.column.id],
      ['Score · f0', 'f0', 3, body.column.id],
    ]);
    expect(body.runs).toEqual([]);
    expect((await columnsOf(s.table.id)).map((c) => c.name)).toEqual(['Company', 'Score', 'Third', 'Score · f0']);
  });

  it('falls back to the derived name when a name asked for is taken, and names the column after the agent when none is given', async () => {
    const s = await setup();
    const res = await s.deploy({ output_column_names: { f0: 'Company', f1: 'Fresh' } });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().column.name).toBe('Scorer');
    expect(res.json().output_columns.map((c: Column) => c.name)).toEqual(['Scorer · f0', 'Fresh']);
    // The parent's own name taken is a conflict, not a rename.
    expect((await s.deploy({})).statusCode).toBe(409);
  });

  it('places the column and its outputs at position, and appends when position is omitted or null', async () => {
    const s = await setup();
    await api.column(s.table.id, { kind: 'input', name: 'Notes' });
    const placed = await s.deploy({ column_name: 'First', position: 0 });
    expect(placed.statusCode, placed.body).toBe(201);
    await s.deploy({ column_name: 'Last', position: null });
    expect((await columnsOf(s.table.id)).map((c) => c.name)).toEqual([
      'First',
      'First · f0',
      'First · f1',
      'Company',
      'Notes',
      'Last',
      'Last · f0',
      'Last · f1',
    ]);
    expect((await s.deploy({ column_name: 'Negative', position: -1 })).statusCode).toBe(422);
  });

  it('runs the first run_rows rows right after creation (1 to 50) and leaves the column unrun when omitted', async () => {
    const s = await setup({ rows: 3 });
    const one = await s.deploy({ column_name: 'One', run_rows: 1 });
    expect(one.statusCode, one.body).toBe(201);
    expect(one.json().runs.map((r: { row_id: string }) => r.row_id)).toEqual([s.rows[0]]);
    const fifty = await s.deploy({ column_name: 'Fifty', run_rows: 50 });
    expect(fifty.statusCode, fifty.body).toBe(201);
    expect(fifty.json().runs.map((r: { row_id: string }) => r.row_id)).toEqual(s.rows);
    for (const run_rows of [0, 51, 2.5]) {
      const refused = await s.deploy({ column_name: `Bad ${run_rows}`, run_rows });
      expect(refused.statusCode).toBe(422);
      expect(refused.json().issues[0].loc).toEqual(['body', 'run_rows']);
    }
    const unrun = await s.deploy({ column_name: 'Unrun' });
    expect(unrun.json().runs).toEqual([]);
    const nulled = await s.deploy({ column_name: 'Nulled', run_rows: null });
    expect(nulled.json().runs).toEqual([]);

    // The rows run: their cells fill in; the unrun column's cells stay absent.
    const fiftyId = fifty.json().column.id as string;
    for (let i = 0; i < 300; i += 1) {
      const rows = (await api.get(`/tables/${s.table.id}/rows/`)).json().rows as {
        computed: Record<string, { state: string }>;
      }[];
      if (rows.every((r) => r.computed[fiftyId]?.state === 'done')) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const rows = (await api.get(`/tables/${s.table.id}/rows/`)).json().rows as {
      id: string;
      computed: Record<string, { state: string; value: unknown; cost: number }>;
    }[];
    const first = rows.find((r) => r.id === s.rows[0])!;
    expect(first.computed[fiftyId]).toMatchObject({ state: 'done', cost: 1 });
    expect(first.computed[unrun.json().column.id]).toBeUndefined();
    // The prompt read the mapped input and, with use_row_context on (the agent's answer), the row's cells.
    expect((first.computed[fiftyId]!.value as { f0: string }).f0).toMatch(
      /^Score Co 0\nRow context: About this row:\nCompany: Co 0/,
    );
    const run = (await api.get(`/agent-runs/${fifty.json().runs[0].id}/`)).json();
    expect(run.status).toBe('completed');
  });

  it('stamps use_row_context onto the column; null keeps the agent’s stored answer', async () => {
    const s = await setup({ agent: { settings: { use_row_context: false } } });
    expect((await s.deploy({ column_name: 'Kept', use_row_context: null })).json().column.agent.use_row_context).toBe(
      false,
    );
    expect((await s.deploy({ column_name: 'Omitted' })).json().column.agent.use_row_context).toBe(false);
    expect((await s.deploy({ column_name: 'On', use_row_context: true })).json().column.agent.use_row_context).toBe(
      true,
    );
    expect((await s.deploy({ column_name: 'Bad', use_row_context: 'yes' })).statusCode).toBe(422);
  });

  it('takes at most 50 output_field_names, each 1 to 100 characters', async () => {
    const s = await setup({ fields: 50 });
    const all = Array.from({ length: 50 }, (_, i) => `f${i}`);
    const ok = await s.deploy({ column_name: 'All', output_field_names: all });
    expect(ok.statusCode, ok.body).toBe(201);
    expect(ok.json().output_columns).toHaveLength(50);
    const over = await s.deploy({ column_name: 'Over', output_field_names: [...all, 'f0'] });
    expect(over.statusCode).toBe(422);
    expect(over.json().issues[0].loc).toEqual(['body', 'output_field_names']);
    expect((await s.deploy({ column_name: 'Empty', output_field_names: [''] })).statusCode).toBe(422);
    expect((await s.deploy({ column_name: 'Long', output_field_names: ['x'.repeat(101)] })).statusCode).toBe(422);
    const unknown = await s.deploy({ column_name: 'Unknown', output_field_names: ['nope'] });
    expect(unknown.statusCode).toBe(422);
    expect(unknown.json().issues[0]).toMatchObject({ loc: ['body', 'output_field_names'], input: 'nope' });
  });

  it('takes output_column_names of at most 50 entries, keys 1 to 100 and names 1 to 255 characters', async () => {
    const longKey = `k${'x'.repeat(99)}`;
    // The agent's most output fields: one with a 100-character key and f0 to f48.
    const s = await setup({
      agent: {
        output_fields: [
          { key: longKey, name: 'Long' },
          ...Array.from({ length: 49 }, (_, i) => ({ key: `f${i}`, name: `F${i}` })),
        ],
      },
    });
    const names = {
      ...Object.fromEntries(Array.from({ length: 49 }, (_, i) => [`f${i}`, `Name ${i}`])),
      [longKey]: 'Name long',
    };
    const fifty = await s.deploy({ column_name: 'Fifty', output_column_names: names });
    expect(fifty.statusCode, fifty.body).toBe(201);
    expect(fifty.json().output_columns.filter((c: Column) => c.name.startsWith('Name ')).length).toBe(50);
    const over = await s.deploy({ column_name: 'Over', output_column_names: { ...names, extra: 'Extra' } });
    expect(over.statusCode).toBe(422);
    expect(over.json().issues[0].loc).toEqual(['body', 'output_column_names']);

    const keyed = await s.deploy({
      column_name: 'Keyed',
      output_field_names: [longKey],
      output_column_names: { [longKey]: 'n'.repeat(255) },
    });
    expect(keyed.statusCode, keyed.body).toBe(201);
    expect(keyed.json().output_columns[0].name).toBe('n'.repeat(255));
    expect(
      (await s.deploy({ column_name: 'KeyTooLong', output_column_names: { [`${longKey}y`]: 'x' } })).statusCode,
    ).toBe(422);
    expect((await s.deploy({ column_name: 'EmptyKey', output_column_names: { '': 'x' } })).statusCode).toBe(422);
    expect(
      (await s.deploy({ column_name: 'NameTooLong', output_column_names: { f0: 'n'.repeat(256) } })).statusCode,
    ).toBe(422);
    expect((await s.deploy({ column_name: 'EmptyName', output_column_names: { f0: '' } })).statusCode).toBe(422);
    // A name for a field not deployed is refused rather than dropped.
    expect(
      (await s.deploy({ column_name: 'Stray', output_field_names: ['f1'], output_column_names: { f0: 'x' } }))
        .statusCode,
    ).toBe(422);
  });

  it('checks column_name, saved_agent_id and input_mappings: agent inputs 422, table columns 404, other agents 404', async () => {
    const s = await setup();
    expect((await s.deploy({ column_name: 'c'.repeat(255) })).statusCode).toBe(201);
    expect((await s.deploy({ column_name: 'c'.repeat(256) })).statusCode).toBe(422);
    expect((await s.deploy({ column_name: '' })).statusCode).toBe(422);
    const notInput = await s.deploy({ column_name: 'A', input_mappings: { [crypto.randomUUID()]: s.company.id } });
    expect(notInput.statusCode).toBe(422);
    expect(notInput.json().issues[0].loc).toEqual(['body', 'input_mappings']);
    expect(
      (await s.deploy({ column_name: 'B', input_mappings: { [s.inputId]: crypto.randomUUID() } })).statusCode,
    ).toBe(404);
    expect((await s.deploy({ column_name: 'C', saved_agent_id: crypto.randomUUID() })).statusCode).toBe(404);
    expect(
      (await api.post(`/tables/${crypto.randomUUID()}/agent-columns/`, { saved_agent_id: s.agent.id })).statusCode,
    ).toBe(404);
    expect((await s.deploy({ column_name: 'D', saved_agent_id: 'not-a-uuid' })).statusCode).toBe(422);
    // A column an agent reads cannot be deleted under it.
    expect((await api.del(`/tables/${s.table.id}/columns/${s.company.id}/`)).statusCode).toBe(409);
  });

  it('is refused (409) where no chat model is configured: an agent column could not run', async () => {
    const s = await setup();
    const bare = await buildApp({
      sql: stack.sql,
      temporal: { client: stack.client, taskQueue: stack.taskQueue },
      verifyToken: createTokenVerifier(await resolveTokenConfig(stack.sql, {})),
      rateLimit: { limit: 0, windowSeconds: 60 },
      integrations: testIntegrations({ agentSuppliers: agentSuppliersFrom({}) }),
    });
    await bare.ready();
    try {
      const res = await bare.inject({
        method: 'POST',
        url: `/tables/${s.table.id}/agent-columns/`,
        headers: withKey(paid.apiKey),
        payload: { saved_agent_id: s.agent.id },
      });
      expect(res.statusCode).toBe(409);
      expect(res.json().detail).toContain('No chat model');
    } finally {
      await bare.close();
    }
  });
});
