/**
 * The CRM against its local twin (sim/crm-server.ts): connect (token checked, sealed at rest),
 * import a filtered set and a list through a column mapping, only what changed on the next run,
 * a repeat after a lost watermark adds nothing, 429 with Retry-After waited out; write-back with
 * partial batch errors (207), a result per row and on the row, the same write twice changes
 * nothing; schedules (Temporal Schedules: next runs, pause and resume, one per import, a firing
 * imports only what changed); a CSV at an address.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { serveCrmTwin, type CrmTwin } from '../../sim/crm-server.js';
import { serveHttp, type LocalHttp } from '../../sim/local-http.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid, free } = useTestStack();
let twin: CrmTwin;
let csv: LocalHttp;
let csvText = 'email,name\nada@example.com,Ada\nbob@example.com,Bob\n';
/** The next this many requests are answered 429 (Retry-After: 1). */
let limitNext = 0;

beforeAll(async () => {
  twin = await serveCrmTwin({ tokens: ['pat-good'], rateLimit: () => limitNext > 0 && limitNext-- > 0, retryAfter: 1 });
  csv = await serveHttp((_req, res) => void res.writeHead(200, { 'content-type': 'text/csv' }).end(csvText));
  stack.integrations.sourcing.crm = { apiUrl: twin.url, timeoutMs: 10_000 };
  stack.integrations.sourcing.csvAllowPrivateNetworks = true;
  for (let i = 0; i < 250; i += 1) {
    twin.add('contacts', {
      email: `person${i}@example.com`,
      firstname: `P${i}`,
      lifecyclestage: i % 5 === 0 ? 'customer' : 'lead',
    });
  }
});
afterAll(async () => {
  await twin?.close();
  await csv?.close();
});

const h = () => withKey(paid.apiKey);
const post = (url: string, payload: object) => stack.app.inject({ method: 'POST', url, headers: h(), payload });
const get = (url: string) => stack.app.inject({ method: 'GET', url, headers: h() });

async function table(name: string) {
  const res = await post('/tables/', { name });
  expect(res.statusCode).toBe(201);
  return res.json().id as string;
}

/**
 * The import once it holds `runs` runs and its newest one has settled. It fails when that does not
 * happen: answering the import as it was would hand a caller an older run as if it were the newest.
 */
async function settledRun(tableId: string, importId: string, runs = 1) {
  return vi.waitFor(
    async () => {
      const imp = (await get(`/tables/${tableId}/imports/${importId}/`)).json();
      expect(imp.runs.length, `the import's runs: ${JSON.stringify(imp.runs)}`).toBeGreaterThanOrEqual(runs);
      expect(imp.runs[0].status).not.toBe('running');
      return imp;
    },
    { timeout: 60_000, interval: 100 },
  );
}

const rowCount = async (tableId: string) =>
  (await stack.sql<{ n: number }[]>`select count(*)::int as n from table_rows where table_id = ${tableId}`)[0]!.n;

let connectionId: string;

describe('CRM connection', () => {
  it('checks the token, keeps it sealed, never shows it, and refuses a second of the same name', async () => {
    const bad = await post('/integrations/crm/connections/', { name: 'HubSpot', access_token: 'pat-wrong-token' });
    expect(bad.statusCode).toBe(422);
    const res = await post('/integrations/crm/connections/', { name: 'HubSpot', access_token: 'pat-good' });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.body).not.toContain('pat-good');
    expect(res.json()).toMatchObject({
      provider: 'hubspot',
      auth_kind: 'private_app',
      account_id: '4242',
      status: 'connected',
    });
    connectionId = res.json().id;
    const [row] = await stack.sql<
      { token_sealed: string }[]
    >`select token_sealed from crm_connections where id = ${connectionId}`;
    expect(row!.token_sealed).toMatch(/^s1\./);
    expect(row!.token_sealed).not.toContain('pat-good');
    expect(
      (await post('/integrations/crm/connections/', { name: 'hubspot', access_token: 'pat-good' })).statusCode,
    ).toBe(409);
    expect((await get('/integrations/crm/connections/')).json().connections).toHaveLength(1);
    const other = await stack.app.inject({
      method: 'GET',
      url: `/integrations/crm/connections/${connectionId}/`,
      headers: withKey(free.apiKey),
    });
    expect(other.statusCode).toBe(404);
  });
});

describe('CRM import', () => {
  it('imports a filtered set through the mapping, then only what changed, and a repeat after a lost watermark adds nothing', async () => {
    const tableId = await table('Customers');
    limitNext = 1;
    const res = await post(`/tables/${tableId}/imports/`, {
      source: 'crm',
      name: 'Customers',
      connection_id: connectionId,
      object_type: 'contacts',
      filters: [{ property: 'lifecyclestage', operator: 'EQ', value: 'customer' }],
      mapping: [
        { source: 'email', column_name: 'Email' },
        { source: 'firstname', column_name: 'First name' },
      ],
    });
    expect(res.statusCode, res.body).toBe(201);
    const importId = res.json().id;
    let imp = await settledRun(tableId, importId);
    expect(imp.runs[0]).toMatchObject({ status: 'succeeded', records_read: 50, rows_created: 50, rows_updated: 0 });
    expect(twin.counts.rateLimited).toBe(1);
    expect(await rowCount(tableId)).toBe(50);
    expect(imp.watermark).not.toBeNull();

    // Three customers change in the CRM: the next run reads from the watermark and updates their rows.
    for (const id of [...twin.store.contacts.values()]
      .filter((o) => o.properties.lifecyclestage === 'customer')
      .slice(0, 3)
      .map((o) => o.id)) {
      twin.update('contacts', id, { firstname: 'Changed' });
    }
    expect((await post(`/tables/${tableId}/imports/${importId}/runs/`, {})).statusCode).toBe(202);
    imp = await settledRun(tableId, importId, 2);
    expect(imp.runs[0]).toMatchObject({ status: 'succeeded', rows_created: 0, rows_updated: 3 });
    expect(imp.runs[0].records_read).toBeLessThan(50);
    expect(await rowCount(tableId)).toBe(50);

    // A run that lost its watermark (a crash before the commit) reads everything again and adds nothing.
    await stack.sql`update sourcing_imports set watermark = null, watermark_id = null where id = ${importId}`;
    await post(`/tables/${tableId}/imports/${importId}/runs/`, {});
    imp = await settledRun(tableId, importId, 3);
    expect(imp.runs[0]).toMatchObject({ status: 'succeeded', rows_created: 0, rows_updated: 0, rows_unchanged: 50 });
    expect(await rowCount(tableId)).toBe(50);
  });

  it('imports every record of an unfiltered set across pages (100 a page)', async () => {
    const tableId = await table('Everyone');
    const res = await post(`/tables/${tableId}/imports/`, {
      source: 'crm',
      name: 'Everyone',
      connection_id: connectionId,
      object_type: 'contacts',
      mapping: [{ source: 'email', column_name: 'Email' }],
    });
    const imp = await settledRun(tableId, res.json().id);
    expect(imp.runs[0]).toMatchObject({ status: 'succeeded', rows_created: 250 });
    expect(await rowCount(tableId)).toBe(250);
  });

  it('imports the members of a list', async () => {
    const tableId = await table('List');
    twin.lists.set('77', [...twin.store.contacts.keys()].slice(0, 120));
    const res = await post(`/tables/${tableId}/imports/`, {
      source: 'crm',
      name: 'List 77',
      connection_id: connectionId,
      object_type: 'contacts',
      list_id: '77',
      mapping: [{ source: 'email', column_name: 'Email' }],
    });
    const imp = await settledRun(tableId, res.json().id);
    expect(imp.runs[0]).toMatchObject({ status: 'succeeded', rows_created: 120 });
    expect(await rowCount(tableId)).toBe(120);
  });

  it('refuses bad imports: an unknown connection, too many filters, a private CSV address when private networks are not allowed', async () => {
    const tableId = await table('Refusals');
    const base = {
      source: 'crm',
      name: 'x',
      connection_id: connectionId,
      object_type: 'contacts',
      mapping: [{ source: 'email', column_name: 'Email' }],
    };
    expect(
      (await post(`/tables/${tableId}/imports/`, { ...base, connection_id: '00000000-0000-4000-8000-000000000000' }))
        .statusCode,
    ).toBe(404);
    const filter = { property: 'email', operator: 'HAS_PROPERTY' };
    expect(
      (await post(`/tables/${tableId}/imports/`, { ...base, filters: Array(6).fill(filter), run_now: false }))
        .statusCode,
    ).toBe(422);
    expect(
      (await post(`/tables/${tableId}/imports/`, { ...base, filters: Array(5).fill(filter), run_now: false }))
        .statusCode,
    ).toBe(201);
    expect((await post(`/tables/${tableId}/imports/`, { ...base, mapping: [] })).statusCode).toBe(422);
    expect(
      (
        await post(`/tables/${tableId}/imports/`, {
          ...base,
          mapping: Array.from({ length: 51 }, (_, i) => ({ source: `p${i}`, column_name: `C${i}` })),
        })
      ).statusCode,
    ).toBe(422);
    stack.integrations.sourcing.csvAllowPrivateNetworks = false;
    try {
      const res = await post(`/tables/${tableId}/imports/`, {
        source: 'csv_url',
        name: 'csv',
        csv_url: `${csv.url}/people.csv`,
        key_field: 'email',
        mapping: [{ source: 'email', column_name: 'Email' }],
      });
      const imp = await settledRun(tableId, res.json().id);
      expect(imp.runs[0].status).toBe('failed');
      expect(imp.runs[0].error).toMatch(/private network/);
    } finally {
      stack.integrations.sourcing.csvAllowPrivateNetworks = true;
    }
  });

  it('imports a CSV at an address keyed by a column; unchanged content imports nothing, a changed line updates its row', async () => {
    const tableId = await table('CSV');
    const res = await post(`/tables/${tableId}/imports/`, {
      source: 'csv_url',
      name: 'People CSV',
      csv_url: `${csv.url}/people.csv`,
      key_field: 'email',
      mapping: [
        { source: 'email', column_name: 'Email' },
        { source: 'name', column_name: 'Name' },
      ],
    });
    expect(res.statusCode, res.body).toBe(201);
    const importId = res.json().id;
    let imp = await settledRun(tableId, importId);
    expect(imp.runs[0]).toMatchObject({ status: 'succeeded', rows_created: 2 });
    await post(`/tables/${tableId}/imports/${importId}/runs/`, {});
    imp = await settledRun(tableId, importId, 2);
    expect(imp.runs[0]).toMatchObject({ status: 'succeeded', records_read: 0, rows_created: 0 });
    csvText = 'email,name\nada@example.com,Ada Lovelace\nbob@example.com,Bob\ncy@example.com,Cy\n';
    await post(`/tables/${tableId}/imports/${importId}/runs/`, {});
    imp = await settledRun(tableId, importId, 3);
    expect(imp.runs[0]).toMatchObject({ status: 'succeeded', rows_created: 1, rows_updated: 1, rows_unchanged: 1 });
    expect(await rowCount(tableId)).toBe(3);
  });
});

describe('write-back', () => {
  it('upserts rows by email, fails the refused rows alone with a result on each row, and the same write twice changes nothing', async () => {
    const tableId = await table('Write back');
    const email = (await post(`/tables/${tableId}/columns/`, { kind: 'input', name: 'Email' })).json().id;
    const name = (await post(`/tables/${tableId}/columns/`, { kind: 'input', name: 'Name' })).json().id;
    const rows = [
      { [email]: 'new1@example.com', [name]: 'New One' },
      { [email]: 'person1@example.com', [name]: 'Known' },
      { [email]: 'not-an-email', [name]: 'Bad' },
      { [name]: 'No email' },
      { [email]: 'new2@example.com', [name]: 'New Two' },
    ];
    for (const cells of rows) expect((await post(`/tables/${tableId}/rows/`, { cells })).statusCode).toBe(201);
    const start = () =>
      post(`/tables/${tableId}/write-backs/`, {
        connection_id: connectionId,
        object_type: 'contacts',
        id_property: 'email',
        result_column_name: 'CRM result',
        mapping: [
          { column_id: email, property: 'email' },
          { column_id: name, property: 'firstname' },
        ],
      });
    const finished = async (id: string) => {
      await stack.client.workflow.getHandle(`write-back/${id}`).result();
      return (await get(`/tables/${tableId}/write-backs/${id}/`)).json();
    };
    const limitedBefore = twin.counts.rateLimited;
    limitNext = 1;
    const first = await start();
    expect(first.statusCode, first.body).toBe(202);
    const done = await finished(first.json().id);
    expect(twin.counts.rateLimited).toBe(limitedBefore + 1);
    expect(done).toMatchObject({
      status: 'succeeded',
      rows_total: 5,
      rows_written: 3,
      rows_failed: 2,
      rows_unchanged: 0,
    });
    const results = (await get(`/tables/${tableId}/write-backs/${done.id}/rows/?result=failed`)).json();
    expect(results.total_count).toBe(2);
    expect(results.rows.map((r: { error: string }) => r.error).join(' ')).toMatch(
      /not valid[\s\S]*no value for email|no value for email[\s\S]*not valid/,
    );
    const [known] = [...twin.store.contacts.values()].filter((o) => o.properties.email === 'person1@example.com');
    expect(known!.properties.firstname).toBe('Known');
    expect([...twin.store.contacts.values()].some((o) => o.properties.email === 'new2@example.com')).toBe(true);
    const cells = await stack.sql<
      { cells: Record<string, string> }[]
    >`select cells from table_rows where table_id = ${tableId} order by seq`;
    const resultColumn = (
      await stack.sql<
        { id: string }[]
      >`select id from table_columns where table_id = ${tableId} and name = 'CRM result'`
    )[0]!.id;
    expect(cells.map((c) => c.cells[resultColumn]!.split(' ')[0])).toEqual([
      'written',
      'written',
      'failed:',
      'failed:',
      'written',
    ]);

    const base = {
      connection_id: connectionId,
      object_type: 'contacts',
      id_property: 'email',
      mapping: [{ column_id: email, property: 'email' }],
    };
    const many = (k: number) => Array.from({ length: k }, () => crypto.randomUUID());
    expect((await post(`/tables/${tableId}/write-backs/`, { ...base, row_ids: [] })).statusCode).toBe(422);
    expect((await post(`/tables/${tableId}/write-backs/`, { ...base, row_ids: many(1001) })).statusCode).toBe(422);
    const atBound = await post(`/tables/${tableId}/write-backs/`, { ...base, row_ids: many(1000) });
    expect(atBound.statusCode).toBe(202);
    expect(await finished(atBound.json().id)).toMatchObject({ status: 'succeeded', rows_total: 0, rows_written: 0 });
    expect((await post(`/tables/${tableId}/write-backs/`, { ...base, id_property: 'domain' })).statusCode).toBe(422);
    expect(
      (
        await post(`/tables/${tableId}/write-backs/`, {
          ...base,
          mapping: [{ column_id: crypto.randomUUID(), property: 'email' }],
        })
      ).statusCode,
    ).toBe(422);

    const upserted = twin.counts.upserted;
    const again = await finished((await start()).json().id);
    expect(again).toMatchObject({ status: 'succeeded', rows_written: 0, rows_unchanged: 3, rows_failed: 2 });
    expect(twin.counts.upserted).toBe(upserted);
  });
});

describe('import schedules', () => {
  it('are Temporal Schedules with next run times, overlap skip, pause and resume, one per import; a firing imports only what changed', async () => {
    const tableId = await table('Scheduled');
    const imp = (
      await post(`/tables/${tableId}/imports/`, {
        source: 'crm',
        name: 'Scheduled',
        connection_id: connectionId,
        object_type: 'contacts',
        run_now: false,
        filters: [{ property: 'lifecyclestage', operator: 'EQ', value: 'customer' }],
        mapping: [{ source: 'email', column_name: 'Email' }],
      })
    ).json();
    expect((await post('/import-schedules/', { import_id: imp.id, interval_seconds: 59 })).statusCode).toBe(422);
    expect((await post('/import-schedules/', { import_id: imp.id, interval_seconds: 2_678_401 })).statusCode).toBe(422);
    expect(
      (await post('/import-schedules/', { import_id: imp.id, interval_seconds: 60, catchup_window_seconds: 59 }))
        .statusCode,
    ).toBe(422);
    expect(
      (await post('/import-schedules/', { import_id: '00000000-0000-4000-8000-000000000000', interval_seconds: 60 }))
        .statusCode,
    ).toBe(404);
    const created = await post('/import-schedules/', {
      import_id: imp.id,
      interval_seconds: 3600,
      catchup_window_seconds: 600,
    });
    expect(created.statusCode, created.body).toBe(201);
    const schedule = created.json();
    expect(schedule).toMatchObject({
      overlap: 'skip',
      paused: false,
      interval_seconds: 3600,
      catchup_window_seconds: 600,
      schedule_id: `import-schedule/${schedule.id}`,
    });
    expect(schedule.next_run_times.length).toBeGreaterThan(0);
    expect((await post('/import-schedules/', { import_id: imp.id, interval_seconds: 60 })).statusCode).toBe(409);
    const described = await stack.client.schedule.getHandle(schedule.schedule_id).describe();
    expect(described.policies.overlap).toBe('SKIP');

    // A firing (triggered now) runs the import.
    await stack.client.schedule.getHandle(schedule.schedule_id).trigger();
    const first = await settledRun(tableId, imp.id);
    expect(first.runs[0]).toMatchObject({ trigger: 'schedule', status: 'succeeded', rows_created: 50 });
    // The run's row says succeeded a moment before its workflow closes; a firing in that moment is
    // skipped by the overlap policy, so the next one waits until the Schedule runs nothing.
    const handle = stack.client.schedule.getHandle(schedule.schedule_id);
    await vi.waitFor(async () => expect((await handle.describe()).info.runningActions).toEqual([]), {
      timeout: 10_000,
      interval: 100,
    });
    await stack.client.schedule.getHandle(schedule.schedule_id).trigger();
    const second = await settledRun(tableId, imp.id, 2);
    expect(second.runs[0]).toMatchObject({
      trigger: 'schedule',
      status: 'succeeded',
      rows_created: 0,
      rows_updated: 0,
    });
    expect(second.runs[1].id).toBe(first.runs[0].id);
    expect(await rowCount(tableId)).toBe(50);

    const paused = (await post(`/import-schedules/${schedule.id}/pause/`, {})).json();
    expect(paused).toMatchObject({ paused: true, next_run_times: [] });
    const resumed = (await post(`/import-schedules/${schedule.id}/resume/`, {})).json();
    expect(resumed.paused).toBe(false);
    expect(resumed.next_run_times.length).toBeGreaterThan(0);
    expect((await get('/import-schedules/')).json().schedules).toHaveLength(1);
    expect(
      (
        await stack.app.inject({
          method: 'GET',
          url: `/import-schedules/${schedule.id}/`,
          headers: withKey(free.apiKey),
        })
      ).statusCode,
    ).toBe(404);
    expect(
      (await stack.app.inject({ method: 'DELETE', url: `/import-schedules/${schedule.id}/`, headers: h() })).statusCode,
    ).toBe(204);
    await expect(stack.client.schedule.getHandle(schedule.schedule_id).describe()).rejects.toThrow();
  }, 180_000);
});
