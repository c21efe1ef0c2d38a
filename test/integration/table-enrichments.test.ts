/**
 * Enrichment providers (listEnrichmentProviders), enrichment columns and column runs, through the
 * real API, the real worker and the real column-run workflow. The providers are the real ones,
 * pointed at local servers: web pages from a local HTTP server, the AI column at a local
 * chat-completions endpoint. Runs are waited for by reading the run record, never by timing.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createEnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import { buildApp } from '../../api/app.js';
import { createTokenVerifier } from '../../services/platform/tokens.js';
import { getBalance } from '../../store/platform/credits.js';
import { columnRunWorkflow } from '../../workflows/tables/column-run.js';
import { columnRunWorkflowId } from '../../workflows/tables/column-run.contract.js';
import { resolveTokenConfig } from '../../worker/auth-config.js';
import { serveChatCompletions } from '../support/local-servers.js';
import { serveHttp, type LocalHttp } from '../../sim/local-http.js';
import { tablesClient, workspaceWithClient, type TablesClient } from '../support/tables.js';
import { useTestStack, withKey } from '../support/test-stack.js';
import { testIntegrations } from '../support/integrations.js';

// Pages of the local site by path: /page/<name> answers a page titled <name> whose text is the
// current content of <name>. /slow/<name> is the same page held back while the gate is closed.
const content = new Map<string, string>();
const gate = { closed: false, waiting: [] as (() => void)[], held: 0 };
let site: LocalHttp;
let model: Awaited<ReturnType<typeof serveChatCompletions>>;

beforeAll(async () => {
  site = await serveHttp(async (req, res) => {
    const path = req.url ?? '/';
    if (path === '/broken') return void res.writeHead(503).end('down');
    if (path === '/missing') return void res.writeHead(404).end('gone');
    if (path === '/blank')
      return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html><body></body></html>');
    const match = /^\/(page|slow)\/([\w-]+)$/.exec(path);
    if (!match) return void res.writeHead(404).end();
    if (match[1] === 'slow' && gate.closed) {
      gate.held += 1;
      await new Promise<void>((resolve) => gate.waiting.push(resolve));
    }
    const name = match[2]!;
    res
      .writeHead(200, { 'content-type': 'text/html' })
      .end(`<title>${name}</title><p>${content.get(name) ?? `About ${name}`}</p>`);
  });
  model = await serveChatCompletions((body) => ({ content: `Answer to: ${body.messages.at(-1)!.content}` }));
});
afterAll(async () => {
  await site?.close();
  await model?.close();
});

const env = () => ({
  WEB_READER_ALLOW_PRIVATE_NETWORKS: 'true',
  OPENAI_API_KEY: 'local-key',
  OPENAI_MODEL: 'local-model',
  OPENAI_BASE_URL: `${model.url}/v1`,
});
const { stack, paid } = useTestStack({ enrichmentProviders: () => createEnrichmentProviders({ env: env() }) });
let api: TablesClient;
beforeAll(() => {
  api = tablesClient(stack, withKey(paid.apiKey));
});

/** The app as another environment would build it (its own provider registry). */
async function appWith(environment: Record<string, string>) {
  const app = await buildApp({
    sql: stack.sql,
    temporal: { client: stack.client, taskQueue: stack.taskQueue },
    verifyToken: createTokenVerifier(await resolveTokenConfig(stack.sql, {})),
    rateLimit: { limit: 0, windowSeconds: 60 },
    integrations: testIntegrations({ enrichmentProviders: createEnrichmentProviders({ env: environment }) }),
  });
  await app.ready();
  return app;
}

type Run = { id: string; status: string; [field: string]: unknown };
type Cell = { state: string; value: unknown; error: string | null; cost: number };

/** A workspace of its own with `credits`, so balances and ledgers are the test's alone. */
const workspaceWith = (credits: number) => workspaceWithClient(stack, credits);

/** A table with a Website input column, one row per site, and a web page reader enrichment of it. */
async function readerTable(client: TablesClient, sites: (string | null)[], table: object = {}) {
  const t = await client.table({ name: 'Companies', ...table });
  const website = await client.column(t.id, { kind: 'input', name: 'Website' });
  const rows: string[] = [];
  for (const url of sites)
    rows.push(
      (await client.post(`/tables/${t.id}/rows/`, { cells: url === null ? {} : { [website.id]: url } })).json().id,
    );
  const reader = await client.column(t.id, {
    kind: 'enrichment',
    name: 'Site',
    provider: 'web_page_reader',
    input_mappings: { url: website.id },
    output_fields: ['title', 'text'],
  });
  const columns = (await client.get(`/tables/${t.id}/columns/`)).json().columns as {
    id: string;
    name: string;
    output_field: string | null;
    parent_column_id: string | null;
  }[];
  const output = (field: string) =>
    columns.find((c) => c.parent_column_id === reader.id && c.output_field === field)!.id;
  return { table: t, website, reader, rows, title: output('title'), text: output('text') };
}

async function startRun(client: TablesClient, tableId: string, columnId: string, body: object = {}): Promise<Run> {
  const res = await client.post(`/tables/${tableId}/columns/${columnId}/runs/`, body);
  if (res.statusCode !== 201) throw new Error(`start run: ${res.statusCode} ${res.body}`);
  return res.json();
}

/** Reads the run until it has finished (the workflow writes its status in Postgres). */
const finished = (client: TablesClient, tableId: string, runId: string): Promise<Run> =>
  vi.waitFor(
    async () => {
      const run = (await client.get(`/tables/${tableId}/runs/${runId}/`)).json<Run>();
      if (!['completed', 'cancelled', 'failed'].includes(run.status)) throw new Error(`run ${runId} did not finish`);
      return run;
    },
    { timeout: 60_000, interval: 100 },
  );

const until = <T>(read: () => Promise<T>, done: (value: T) => boolean, what: string): Promise<T> =>
  vi.waitFor(
    async () => {
      const value = await read();
      if (!done(value)) throw new Error(`gave up waiting for ${what}`);
      return value;
    },
    { timeout: 60_000, interval: 100 },
  );

const cellsOf = async (client: TablesClient, tableId: string, rowId: string) =>
  (await client.get(`/tables/${tableId}/rows/${rowId}/`)).json().computed as Record<string, Cell>;

const ledgerOf = (workspaceId: string) =>
  stack.sql<{ kind: string; amount: number; cause_key: string }[]>`
    select l.kind, l.amount, h.cause_key from credit_ledger l join credit_holds h on h.id = l.hold_id
    where l.workspace_id = ${workspaceId} order by l.id`;

const requestsTo = (path: string) => site.requests.filter((r) => r.path === path).length;

describe('listEnrichmentProviders: enrichment providers', () => {
  it('lists the providers this environment runs on, alphabetical by key, each with key, display name, description and credentials', async () => {
    const res = await api.get('/table-enrichments/providers/');
    expect(res.statusCode).toBe(200);
    const { providers } = res.json();
    expect(providers.map((p: { key: string }) => p.key)).toEqual(['ai_column', 'dns_mx', 'formula', 'web_page_reader']);
    for (const p of providers) {
      expect(Object.keys(p).sort()).toEqual(['credentials', 'description', 'display_name', 'key']);
      expect(p).toMatchObject({
        display_name: expect.any(String),
        description: expect.any(String),
        credentials: 'platform',
      });
    }
  });

  it('leaves out a provider whose model or key is not configured, rather than listing it broken', async () => {
    const environments: Record<string, string>[] = [
      {},
      { OPENAI_API_KEY: 'k' },
      { OPENAI_MODEL: 'm', OPENAI_BASE_URL: `${model.url}/v1` },
    ];
    for (const environment of environments) {
      const app = await appWith(environment);
      try {
        const res = await app.inject({
          method: 'GET',
          url: '/table-enrichments/providers/',
          headers: withKey(paid.apiKey),
        });
        expect(res.json().providers.map((p: { key: string }) => p.key)).toEqual([
          'dns_mx',
          'formula',
          'web_page_reader',
        ]);
        const detail = await app.inject({
          method: 'GET',
          url: '/table-enrichments/providers/ai_column/',
          headers: withKey(paid.apiKey),
        });
        expect(detail.statusCode).toBe(404);
        // Nor can a column be made on it there.
        const t = (
          await app.inject({
            method: 'POST',
            url: '/tables/',
            headers: withKey(paid.apiKey),
            payload: { name: 'No AI' },
          })
        ).json();
        const made = await app.inject({
          method: 'POST',
          url: `/tables/${t.id}/columns/`,
          headers: withKey(paid.apiKey),
          payload: { kind: 'enrichment', name: 'Ask', provider: 'ai_column', options: { prompt: 'Hi' } },
        });
        expect(made.statusCode).toBe(409);
      } finally {
        await app.close();
      }
    }
  });

  it("describes a provider's inputs, outputs, options and price", async () => {
    const res = await api.get('/table-enrichments/providers/web_page_reader/');
    expect(res.json()).toMatchObject({
      key: 'web_page_reader',
      inputs: [{ name: 'url', required: true }],
      named_inputs: false,
      outputs: expect.arrayContaining([
        expect.objectContaining({ name: 'title' }),
        expect.objectContaining({ name: 'text' }),
      ]),
      price_credits: 1,
      concurrency: 8,
    });
    expect((await api.get('/table-enrichments/providers/nope/')).statusCode).toBe(404);
    expect((await api.get('/table-enrichments/providers/Bad-Key/')).statusCode).toBe(422);
    expect((await api.get(`/table-enrichments/providers/${'a'.repeat(65)}/`)).statusCode).toBe(422);
  });
});

describe('enrichment columns', () => {
  it('adds the column with its output columns right after it, named as asked, or derived when the name is taken', async () => {
    const t = await api.table({ name: 'Fan-out' });
    const website = await api.column(t.id, { kind: 'input', name: 'Website' });
    await api.column(t.id, { kind: 'input', name: 'Notes' });
    const reader = await api.column(t.id, {
      kind: 'enrichment',
      name: 'Site',
      provider: 'web_page_reader',
      input_mappings: { url: website.id.toUpperCase() },
      output_fields: ['title', 'text'],
      output_column_names: { title: 'Page title', text: 'Notes' },
      position: 1,
    });
    expect(reader).toMatchObject({
      kind: 'enrichment',
      position: 1,
      parent_column_id: null,
      output_field: null,
      enrichment: {
        provider: 'web_page_reader',
        input_mappings: { url: website.id },
        output_fields: ['title', 'text'],
        options: {},
      },
    });
    const columns = (await api.get(`/tables/${t.id}/columns/`)).json().columns;
    expect(
      columns.map((c: { name: string; kind: string; output_field: string | null }) => [c.name, c.kind, c.output_field]),
    ).toEqual([
      ['Website', 'input', null],
      ['Site', 'enrichment', null],
      ['Page title', 'enrichment', 'title'],
      ['Site · text', 'enrichment', 'text'],
      ['Notes', 'input', null],
    ]);
    expect(columns.slice(2, 4).every((c: { parent_column_id: string }) => c.parent_column_id === reader.id)).toBe(true);
    // Every output of the provider when none are named.
    const all = await api.column(t.id, {
      kind: 'enrichment',
      name: 'Mail',
      provider: 'dns_mx',
      input_mappings: { domain: website.id },
    });
    expect((all.enrichment as { output_fields: string[] }).output_fields).toEqual([
      'primary_mx',
      'mx_hosts',
      'mx_count',
      'mail_provider',
    ]);
  });

  it('refuses with 409 what the provider or the table does not have, and with 422 what the schema bounds', async () => {
    const t = await api.table({ name: 'Refusals' });
    const website = await api.column(t.id, { kind: 'input', name: 'Website' });
    const other = await api.table({ name: 'Other' });
    const elsewhere = await api.column(other.id, { kind: 'input', name: 'Elsewhere' });
    const reader = (extra: object) => ({
      kind: 'enrichment',
      name: 'Site',
      provider: 'web_page_reader',
      input_mappings: { url: website.id },
      ...extra,
    });
    const refusals: [object, RegExp][] = [
      [{ provider: 'no_such_provider' }, /No enrichment provider "no_such_provider"/],
      [{ input_mappings: {} }, /needs the input "url"/],
      [{ input_mappings: { url: website.id, page: website.id } }, /has no input "page"/],
      [{ input_mappings: { url: elsewhere.id } }, /not a column of this table/],
      [{ output_fields: ['title', 'html'] }, /has no output "html"/],
      [{ output_fields: ['title'], output_column_names: { text: 'Text' } }, /not among the output fields/],
      [{ options: { prompt: 'x' } }, /has no option "prompt"/],
      [{ name: 'WEBSITE' }, /already has a column named/],
      [{ provider: 'ai_column', input_mappings: { company: website.id }, options: {} }, /needs the option "prompt"/],
      [
        {
          provider: 'ai_column',
          input_mappings: { company: website.id },
          options: { prompt: 'About {company} in {city}' },
        },
        /\{city\}/,
      ],
      [{ provider: 'formula', input_mappings: {}, options: { formula: '{price} * 2' } }, /\{price\}/],
    ];
    for (const [extra, detail] of refusals) {
      const res = await api.post(`/tables/${t.id}/columns/`, reader(extra));
      expect({ extra, status: res.statusCode, detail: res.json().detail }).toEqual({
        extra,
        status: 409,
        detail: expect.stringMatching(detail),
      });
    }
    const site = await api.column(t.id, reader({}));
    const mapsEnrichment = await api.post(`/tables/${t.id}/columns/`, {
      kind: 'enrichment',
      name: 'Mail',
      provider: 'dns_mx',
      input_mappings: { domain: site.id },
    });
    expect(mapsEnrichment.statusCode).toBe(409);
    for (const bad of [
      { input_mappings: { 'not a name': website.id } },
      { input_mappings: { url: 'not-a-uuid' } },
      { output_fields: [] },
      { input_mappings: Object.fromEntries(Array.from({ length: 51 }, (_, n) => [`in_${n}`, website.id])) },
      { provider: undefined },
    ]) {
      expect((await api.post(`/tables/${t.id}/columns/`, reader(bad))).statusCode).toBe(422);
    }
    expect((await api.get(`/tables/${t.id}/columns/`)).json().columns.map((c: { name: string }) => c.name)).toEqual([
      'Website',
      'Site',
      'Site · title',
      'Site · description',
      'Site · text',
      'Site · final_url',
    ]);
  });

  it('keeps its cells computed: no writes, its input cannot be deleted under it, and deleting it takes its output columns', async () => {
    const { table, website, reader, rows, title } = await readerTable(api, [`${site.url}/page/acme`]);
    for (const column of [reader.id, title]) {
      expect(
        (await api.patch(`/tables/${table.id}/rows/${rows[0]}/`, { cells: { [column]: 'typed' } })).statusCode,
      ).toBe(409);
    }
    expect((await api.del(`/tables/${table.id}/columns/${website.id}/`)).statusCode).toBe(409);
    expect((await api.post(`/tables/${table.id}/columns/${reader.id}/template/`, { name: 'Reader' })).statusCode).toBe(
      409,
    );
    const view = (
      await api.post(`/tables/${table.id}/views/`, {
        name: 'By title',
        sorts: [{ column_id: title }],
        hidden_column_ids: [title],
      })
    ).json();
    expect((await api.del(`/tables/${table.id}/columns/${reader.id}/`)).statusCode).toBe(204);
    expect((await api.get(`/tables/${table.id}/columns/`)).json().columns.map((c: { name: string }) => c.name)).toEqual(
      ['Website'],
    );
    expect((await api.get(`/tables/${table.id}/views/${view.id}/`)).json()).toMatchObject({
      sorts: [],
      hidden_column_ids: [],
    });
    expect((await api.get(`/tables/${table.id}/rows/?view_id=${view.id}`)).statusCode).toBe(200);
    expect((await api.del(`/tables/${table.id}/columns/${website.id}/`)).statusCode).toBe(204);
  });
});

describe('column runs', () => {
  it('fills every row: the result in the cell and its output columns, a credit charged per result, progress on the run', async () => {
    const { ws, api: client } = await workspaceWith(100);
    const { table, reader, rows, title, text } = await readerTable(client, [
      `${site.url}/page/acme`,
      `${site.url}/page/globex`,
    ]);
    // A formula reading an output column follows its cells.
    const shout = await client.column(table.id, { kind: 'formula', name: 'Shout', formula: 'upper({Site · title})' });
    const started = await startRun(client, table.id, reader.id);
    expect(started).toMatchObject({
      status: 'queued',
      trigger: 'manual',
      scope: 'all',
      keep_existing_results: true,
      rows_total: 2,
      workflow_id: `column-run/${started.id}`,
    });
    const run = await finished(client, table.id, started.id);
    expect(run).toMatchObject({
      status: 'completed',
      rows_total: 2,
      rows_processed: 2,
      rows_done: 2,
      rows_empty: 0,
      rows_failed: 0,
      credits_charged: 2,
      progress: 1,
      error: null,
    });
    const cells = await cellsOf(client, table.id, rows[0]!);
    expect(cells[reader.id]).toEqual({
      state: 'done',
      value: { title: 'acme', text: 'About acme' },
      error: null,
      cost: 1,
    });
    expect(cells[title]).toEqual({ state: 'done', value: 'acme', error: null, cost: 0 });
    expect(cells[text]).toMatchObject({ state: 'done', value: 'About acme' });
    expect(cells[shout.id]).toMatchObject({ state: 'done', value: 'ACME' });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 98, held: 0, spent: 2 });
    const ledger = await ledgerOf(ws.workspaceId);
    expect(ledger.map((l) => `${l.kind}:${l.amount}:${l.cause_key}`).sort()).toEqual(
      rows.flatMap((row) => [`hold:1:column-run:${run.id}:${row}`, `charge:1:column-run:${run.id}:${row}`]).sort(),
    );
    // The run is listed on the table and the column; the workflow is named after it and says it completed.
    expect((await client.get(`/tables/${table.id}/runs/`)).json().runs.map((r: Run) => r.id)).toEqual([run.id]);
    expect(
      (await client.get(`/tables/${table.id}/columns/${reader.id}/runs/?active=false`))
        .json()
        .runs.map((r: Run) => r.id),
    ).toEqual([run.id]);
    expect((await client.get(`/tables/${table.id}/runs/?active=true`)).json().runs).toEqual([]);
    const description = await stack.client.workflow.getHandle(columnRunWorkflowId(run.id)).describe();
    expect(description.status.name).toBe('COMPLETED');
    expect(description.searchAttributes.ColumnRunStatus).toEqual(['completed']);
    expect(description.searchAttributes.ColumnRunProgress).toEqual([100]);
  });

  it('retries a failing provider, then ends the cell in error and returns its credits; a refusal is not retried', async () => {
    const { ws, api: client } = await workspaceWith(100);
    const before = { broken: requestsTo('/broken'), missing: requestsTo('/missing') };
    const { table, reader, rows, title } = await readerTable(client, [
      `${site.url}/broken`,
      `${site.url}/missing`,
      `${site.url}/page/ok`,
    ]);
    const run = await finished(client, table.id, (await startRun(client, table.id, reader.id)).id);
    expect(run).toMatchObject({ status: 'completed', rows_done: 1, rows_failed: 2, credits_charged: 1 });
    expect(requestsTo('/broken') - before.broken).toBe(3);
    expect(requestsTo('/missing') - before.missing).toBe(1);
    const broken = await cellsOf(client, table.id, rows[0]!);
    expect(broken[reader.id]).toEqual({
      state: 'error',
      value: null,
      error: expect.stringContaining('answered 503'),
      cost: 0,
    });
    expect(broken[title]).toMatchObject({ state: 'error', value: null });
    expect((await cellsOf(client, table.id, rows[1]!))[reader.id]).toMatchObject({
      state: 'error',
      error: expect.stringContaining('answered 404'),
    });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 99, held: 0, spent: 1 });
    const ledger = await ledgerOf(ws.workspaceId);
    for (const row of rows.slice(0, 2)) {
      expect(ledger.filter((l) => l.cause_key === `column-run:${run.id}:${row}`).map((l) => l.kind)).toEqual([
        'hold',
        'release',
      ]);
    }
  });

  it('returns the credits of an empty result at once, and skips a row without the input without holding anything', async () => {
    const { ws, api: client } = await workspaceWith(100);
    gate.closed = true;
    gate.held = 0;
    const { table, reader, rows, text } = await readerTable(client, [
      `${site.url}/blank`,
      null,
      '   ',
      `${site.url}/slow/after-blank`,
    ]);
    const started = await startRun(client, table.id, reader.id);
    // While the last row waits at the site, the empty row's hold is already back: only one credit is held.
    await until(
      async () => (await cellsOf(client, table.id, rows[0]!))[reader.id]?.state,
      (state) => state === 'done',
      'the empty row done',
    );
    await until(
      async () => gate.held,
      (held) => held === 1,
      'the last row in flight',
    );
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 99, held: 1, spent: 0 });
    gate.closed = false;
    for (const release of gate.waiting.splice(0)) release();
    const run = await finished(client, table.id, started.id);
    expect(run).toMatchObject({
      status: 'completed',
      rows_empty: 1,
      rows_skipped: 2,
      rows_done: 1,
      credits_charged: 1,
    });
    const empty = await cellsOf(client, table.id, rows[0]!);
    expect(empty[reader.id]).toEqual({ state: 'done', value: null, error: null, cost: 0 });
    expect(empty[text]).toEqual({ state: 'done', value: null, error: null, cost: 0 });
    expect((await cellsOf(client, table.id, rows[1]!))[reader.id]).toEqual({
      state: 'skipped',
      value: null,
      error: 'No value for url.',
      cost: 0,
    });
    expect((await cellsOf(client, table.id, rows[2]!))[reader.id]).toMatchObject({ state: 'skipped' });
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 99, held: 0, spent: 1 });
    expect((await ledgerOf(ws.workspaceId)).map((l) => `${l.kind}:${l.cause_key}`).sort()).toEqual(
      [
        `hold:column-run:${run.id}:${rows[0]}`,
        `release:column-run:${run.id}:${rows[0]}`,
        `hold:column-run:${run.id}:${rows[3]}`,
        `charge:column-run:${run.id}:${rows[3]}`,
      ].sort(),
    );
  });

  it('cancels mid-run: rows in flight finish, rows not reached keep what they held, and nothing stays held', async () => {
    const { ws, api: client } = await workspaceWith(100);
    const names = Array.from({ length: 12 }, (_, n) => `co-${n}`);
    const { table, reader, rows, title } = await readerTable(
      client,
      names.map((n) => `${site.url}/slow/${n}`),
    );
    // A first run fills every row with the first version of the pages.
    expect(await finished(client, table.id, (await startRun(client, table.id, reader.id)).id)).toMatchObject({
      status: 'completed',
      rows_done: 12,
    });
    for (const n of names) content.set(n, 'second version');
    gate.closed = true;
    gate.held = 0;
    const second = await startRun(client, table.id, reader.id, { keep_existing_results: false });
    // The reader's concurrency is 8: eight rows reach the site and wait there, four wait their turn.
    await until(
      async () => gate.held,
      (held) => held === 8,
      'eight rows in flight',
    );
    const cancelling = await client.post(`/tables/${table.id}/runs/${second.id}/cancel/`);
    expect(cancelling.statusCode).toBe(200);
    expect(cancelling.json()).toMatchObject({ status: 'cancelling', cancel_requested_at: expect.any(String) });
    expect((await client.post(`/tables/${table.id}/runs/${second.id}/cancel/`)).json().status).toBe('cancelling');
    gate.closed = false;
    for (const release of gate.waiting.splice(0)) release();
    const run = await finished(client, table.id, second.id);
    expect(run).toMatchObject({ status: 'cancelled', rows_done: 8, credits_charged: 8 });
    expect(gate.held).toBe(8);
    const texts = await Promise.all(rows.map(async (row) => (await cellsOf(client, table.id, row))[reader.id]!));
    expect(
      texts.filter((c) => c.state === 'done' && (c.value as { text: string }).text === 'second version'),
    ).toHaveLength(8);
    // The four never reached hold the first run's result again, with its cost.
    const kept = texts.filter((c) => (c.value as { text: string }).text !== 'second version');
    expect(kept).toHaveLength(4);
    for (const cell of kept)
      expect(cell).toMatchObject({
        state: 'done',
        cost: 1,
        error: null,
        value: { text: expect.stringMatching(/^About co-/) },
      });
    const titles = await Promise.all(rows.map(async (row) => (await cellsOf(client, table.id, row))[title]!.state));
    expect(new Set(titles)).toEqual(new Set(['done']));
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 80, held: 0, spent: 20 });
    expect((await client.post(`/tables/${table.id}/runs/${second.id}/cancel/`)).statusCode).toBe(409);
    const description = await stack.client.workflow.getHandle(columnRunWorkflowId(run.id)).describe();
    expect(description.searchAttributes.ColumnRunStatus).toEqual(['cancelled']);
  });

  it('keep_existing_results leaves filled cells alone; without it every row runs again', async () => {
    const { api: client } = await workspaceWith(100);
    content.set('initech', 'v1');
    content.set('umbrella', 'v1');
    const { table, website, reader, rows } = await readerTable(
      client,
      [`${site.url}/page/initech`, `${site.url}/page/umbrella`],
      { keep_existing_results: true },
    );
    await finished(client, table.id, (await startRun(client, table.id, reader.id)).id);
    content.set('initech', 'v2');
    content.set('umbrella', 'v2');
    rows.push(
      (await client.post(`/tables/${table.id}/rows/`, { cells: { [website.id]: `${site.url}/page/umbrella` } })).json()
        .id,
    );
    const textOf = async (row: string) =>
      ((await cellsOf(client, table.id, row))[reader.id]!.value as { text: string } | null)?.text;

    const keeping = await finished(client, table.id, (await startRun(client, table.id, reader.id)).id);
    expect(keeping).toMatchObject({
      status: 'completed',
      keep_existing_results: true,
      rows_kept: 2,
      rows_done: 1,
      credits_charged: 1,
      rows_processed: 3,
    });
    expect(await Promise.all(rows.map(textOf))).toEqual(['v1', 'v1', 'v2']);

    const again = await finished(
      client,
      table.id,
      (await startRun(client, table.id, reader.id, { keep_existing_results: false })).id,
    );
    expect(again).toMatchObject({ keep_existing_results: false, rows_kept: 0, rows_done: 3 });
    expect(await Promise.all(rows.map(textOf))).toEqual(['v2', 'v2', 'v2']);

    // The rows named, only.
    content.set('initech', 'v3');
    const named = await finished(
      client,
      table.id,
      (await startRun(client, table.id, reader.id, { row_ids: [rows[0]], keep_existing_results: false })).id,
    );
    expect(named).toMatchObject({ scope: 'rows', rows_total: 1, rows_done: 1 });
    expect(await Promise.all(rows.map(textOf))).toEqual(['v3', 'v2', 'v2']);
  });

  it('auto_run runs the rows added to the table, one by one, in bulk or from a CSV', async () => {
    const { ws, api: client } = await workspaceWith(100);
    const t = await client.table({ name: 'Auto', auto_run: true });
    const website = await client.column(t.id, { kind: 'input', name: 'Website' });
    const reader = await client.column(t.id, {
      kind: 'enrichment',
      name: 'Site',
      provider: 'web_page_reader',
      input_mappings: { url: website.id },
      output_fields: ['title'],
    });
    await client.post(`/tables/${t.id}/rows/`, { cells: { [website.id]: `${site.url}/page/hooli` } });
    await client.post(`/tables/${t.id}/rows/bulk/`, {
      rows: ['a', 'b', 'c'].map((n) => ({ cells: { [website.id]: `${site.url}/page/bulk-${n}` } })),
    });
    const csv = await stack.app.inject({
      method: 'POST',
      url: `/tables/${t.id}/csv/`,
      headers: { ...withKey(ws.apiKey), 'content-type': 'text/csv' },
      payload: `Website\n${site.url}/page/csv-a\n${site.url}/page/csv-b\n`,
    });
    expect(csv.json()).toMatchObject({ rows_added: 2 });
    const rows = (await client.get(`/tables/${t.id}/rows/`)).json().rows as { id: string }[];
    expect(rows).toHaveLength(6);
    const cells = await until(
      () => Promise.all(rows.map(async (r) => (await cellsOf(client, t.id, r.id))[reader.id])),
      (all) => all.every((c) => c?.state === 'done'),
      'every added row enriched',
    );
    expect(cells.map((c) => (c!.value as { title: string }).title)).toEqual([
      'hooli',
      'bulk-a',
      'bulk-b',
      'bulk-c',
      'csv-a',
      'csv-b',
    ]);
    await until(
      async () => (await client.get(`/tables/${t.id}/runs/?active=true`)).json().runs.length,
      (n) => n === 0,
      'auto runs finished',
    );
    const runs = (await client.get(`/tables/${t.id}/runs/`)).json().runs as Run[];
    expect(runs.length).toBeGreaterThanOrEqual(1);
    for (const run of runs) expect(run).toMatchObject({ trigger: 'auto', scope: 'new_rows', status: 'completed' });
    expect(runs.reduce((sum, r) => sum + (r.rows_done as number), 0)).toBe(6);
    // A table without auto_run leaves new rows alone.
    await client.patch(`/tables/${t.id}/`, { auto_run: false });
    const quiet = (
      await client.post(`/tables/${t.id}/rows/`, { cells: { [website.id]: `${site.url}/page/quiet` } })
    ).json();
    expect((await client.get(`/tables/${t.id}/runs/`)).json().runs).toHaveLength(runs.length);
    expect((await cellsOf(client, t.id, quiet.id))[reader.id]).toBeUndefined();
  });

  it('stops when the workspace runs out of credits: the run fails, rows not reached say why, nothing stays held', async () => {
    const { ws, api: client } = await workspaceWith(2);
    const { table, reader, rows } = await readerTable(
      client,
      ['a', 'b', 'c', 'd'].map((n) => `${site.url}/page/poor-${n}`),
    );
    const run = await finished(client, table.id, (await startRun(client, table.id, reader.id)).id);
    expect(run).toMatchObject({
      status: 'failed',
      rows_done: 2,
      credits_charged: 2,
      error: 'The workspace ran out of credits.',
    });
    const states = await Promise.all(rows.map(async (row) => (await cellsOf(client, table.id, row))[reader.id]!));
    expect(states.filter((c) => c.state === 'done')).toHaveLength(2);
    expect(states.filter((c) => c.state === 'skipped')).toEqual([
      { state: 'skipped', value: null, error: 'The workspace ran out of credits.', cost: 0 },
      { state: 'skipped', value: null, error: 'The workspace ran out of credits.', cost: 0 },
    ]);
    expect(await getBalance(stack.sql, ws.workspaceId)).toEqual({ available: 0, held: 0, spent: 2 });
  });

  it('runs an AI column against the chat-completions server, its prompt filled from each row', async () => {
    const { api: client } = await workspaceWith(100);
    const t = await client.table({ name: 'AI' });
    const company = await client.column(t.id, { kind: 'input', name: 'Company' });
    const row = (await client.post(`/tables/${t.id}/rows/`, { cells: { [company.id]: 'Acme' } })).json();
    const ask = await client.column(t.id, {
      kind: 'enrichment',
      name: 'Pitch',
      provider: 'ai_column',
      input_mappings: { company: company.id },
      options: { prompt: 'One line about {company}.' },
    });
    const run = await finished(client, t.id, (await startRun(client, t.id, ask.id)).id);
    expect(run).toMatchObject({ status: 'completed', rows_done: 1, credits_charged: 2 });
    expect((await cellsOf(client, t.id, row.id))[ask.id]).toEqual({
      state: 'done',
      value: { answer: 'Answer to: One line about Acme.' },
      error: null,
      cost: 2,
    });
  });

  it('allows one run of a column at a time, and only enrichment columns run', async () => {
    const { api: client } = await workspaceWith(100);
    gate.closed = true;
    try {
      const { table, website, reader, title } = await readerTable(client, [`${site.url}/slow/one-at-a-time`]);
      const first = await startRun(client, table.id, reader.id);
      const second = await client.post(`/tables/${table.id}/columns/${reader.id}/runs/`, {});
      expect(second.statusCode).toBe(409);
      expect(second.json().detail).toContain('already going');
      for (const column of [website.id, title])
        expect((await client.post(`/tables/${table.id}/columns/${column}/runs/`, {})).statusCode).toBe(409);
      expect((await client.post(`/tables/${table.id}/columns/${crypto.randomUUID()}/runs/`, {})).statusCode).toBe(404);
      await client.post(`/tables/${table.id}/runs/${first.id}/cancel/`);
    } finally {
      gate.closed = false;
      for (const release of gate.waiting.splice(0)) release();
    }
  });

  it('continues as new on a long run and still finishes every row once', async () => {
    const { ws, api: client } = await workspaceWith(0);
    const t = await client.table({ name: 'Long' });
    const n = await client.column(t.id, { kind: 'input', name: 'N' });
    await client.post(`/tables/${t.id}/rows/bulk/`, {
      rows: Array.from({ length: 24 }, (_, i) => ({ cells: { [n.id]: i } })),
    });
    const square = await client.column(t.id, {
      kind: 'enrichment',
      name: 'Square',
      provider: 'formula',
      input_mappings: { n: n.id },
      options: { formula: '{n} * {n}' },
    });
    // The run record as the API makes it, then the workflow with small batches and a short history.
    const [record] = await stack.sql<{ id: string }[]>`
      insert into column_runs (workspace_id, table_id, column_id, provider, trigger, scope, keep_existing_results, rows_total)
      values (${ws.workspaceId}, ${t.id}, ${square.id}, 'formula', 'manual', 'all', true, 24) returning id`;
    const handle = await stack.client.workflow.start(columnRunWorkflow, {
      taskQueue: stack.taskQueue,
      workflowId: columnRunWorkflowId(record!.id),
      args: [
        {
          runId: record!.id,
          workspaceId: ws.workspaceId,
          tableId: t.id,
          columnId: square.id,
          batchSize: 4,
          historyLimit: 40,
        },
      ],
    });
    const view = await handle.result();
    expect(view).toMatchObject({ status: 'completed' });
    expect(view.continued).toBeGreaterThan(1);
    const first = await stack.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId).describe();
    expect(first.status.name).toBe('CONTINUED_AS_NEW');
    expect(first.historyLength).toBeLessThan(100);
    const run = (await client.get(`/tables/${t.id}/runs/${record!.id}/`)).json();
    expect(run).toMatchObject({
      status: 'completed',
      rows_done: 24,
      rows_total: 24,
      rows_processed: 24,
      credits_charged: 0,
    });
    const page = (await client.get(`/tables/${t.id}/rows/?limit=100`)).json().rows as {
      cells: Record<string, number>;
      computed: Record<string, Cell>;
    }[];
    expect(page.map((r) => r.computed[square.id]!.value)).toEqual(
      page.map((r) => ({ result: r.cells[n.id]! * r.cells[n.id]! })),
    );
  });
});
