/**
 * Subdomain discovery against a local CT log (sim/ct-log-server.ts: 429, 502, a timeout before it
 * answers) and a local DNS server (sim/dns-server.ts): one row per live subdomain with what
 * answered; wildcards, the apex, other domains and names without A/AAAA/CNAME left out; a
 * column's domains; a repeat adds nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ctLogClient } from '../../integrations/ct-log/ct-log.js';
import { hostResolver } from '../../integrations/ct-log/resolve.js';
import { serveCtLog, type CtFailure } from '../../sim/ct-log-server.js';
import { serveDnsZones } from '../../sim/dns-server.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid, free } = useTestStack();
let ct: Awaited<ReturnType<typeof serveCtLog>>;
let dns: Awaited<ReturnType<typeof serveDnsZones>>;
let failures: CtFailure[] = [];

beforeAll(async () => {
  ct = await serveCtLog(
    {
      'acme.test': [
        ['acme.test', 'www.acme.test'],
        ['*.acme.test', 'api.acme.test'],
        ['old.acme.test'],
        ['mail.other.test', 'cdn.acme.test'],
        ['WWW.acme.test'],
      ],
      'beta.test': [['app.beta.test']],
    },
    { fail: () => failures.shift() ?? null, hangMs: 1500 },
  );
  dns = await serveDnsZones({
    'www.acme.test': { a: ['192.0.2.10'] },
    'api.acme.test': { aaaa: ['2001:db8::1'] },
    'cdn.acme.test': { cname: 'edge.cdn.example' },
    'old.acme.test': {},
    'app.beta.test': { a: ['192.0.2.20'] },
  });
  stack.integrations.sourcing.ctLog = ctLogClient({ baseUrl: ct.url, timeoutMs: 500 });
  stack.integrations.sourcing.ctLogBackoffMs = 20;
  stack.integrations.sourcing.dns = hostResolver([dns.server], { timeoutMs: 1000 });
});
afterAll(async () => {
  await ct?.close();
  await dns?.close();
});

const post = (url: string, payload: object) =>
  stack.app.inject({ method: 'POST', url, headers: withKey(paid.apiKey), payload });
async function finished(id: string) {
  await stack.client.workflow.getHandle(`subdomain-discovery/${id}`).result();
  return (
    await stack.app.inject({ method: 'GET', url: `/subdomain-discoveries/${id}/`, headers: withKey(paid.apiKey) })
  ).json();
}
const cellsOf = async (tableId: string) => {
  const columns = await stack.sql<
    { id: string; name: string }[]
  >`select id, name from table_columns where table_id = ${tableId}`;
  const rows = await stack.sql<
    { cells: Record<string, string> }[]
  >`select cells from table_rows where table_id = ${tableId} order by seq`;
  return rows.map((r) => Object.fromEntries(columns.map((c) => [c.name, r.cells[c.id]])));
};

describe('subdomain discovery', () => {
  it('backs off through 429, 502 and a timeout, and lands one row per live subdomain with what answered', async () => {
    failures = ['429', '502', 'timeout'];
    const res = await post('/subdomain-discoveries/', { domain: 'ACME.test' });
    expect(res.statusCode, res.body).toBe(202);
    const done = await finished(res.json().id);
    expect(done).toMatchObject({
      status: 'succeeded',
      domain: 'acme.test',
      domains_total: 1,
      domains_done: 1,
      candidates: 4,
      live: 3,
      rows_landed: 3,
    });
    expect(ct.requestCount()).toBe(4);
    const rows = await cellsOf(done.table_id);
    expect(rows).toEqual([
      { Subdomain: 'api.acme.test', Domain: 'acme.test', 'DNS answer': 'AAAA 2001:db8::1' },
      { Subdomain: 'cdn.acme.test', Domain: 'acme.test', 'DNS answer': 'CNAME edge.cdn.example' },
      { Subdomain: 'www.acme.test', Domain: 'acme.test', 'DNS answer': 'A 192.0.2.10' },
    ]);
    // The same discovery into the same table adds nothing.
    const again = await finished(
      (await post('/subdomain-discoveries/', { domain: 'acme.test', table_id: done.table_id })).json().id,
    );
    expect(again).toMatchObject({ status: 'succeeded', live: 3, rows_landed: 0 });
    expect(await cellsOf(done.table_id)).toHaveLength(3);
  });

  it("reads a column's domains, records a domain the CT log never answers for, and refuses bad requests", async () => {
    const source = (await post('/tables/', { name: 'Companies' })).json().id;
    const column = (await post(`/tables/${source}/columns/`, { kind: 'input', name: 'Website' })).json().id;
    for (const v of ['https://www.beta.test/about', 'gamma.test', 'not a domain'])
      await post(`/tables/${source}/rows/`, { cells: { [column]: v } });
    failures = [null, '502', '502', '502', '502', '502'];
    const done = await finished(
      (await post('/subdomain-discoveries/', { source_table_id: source, source_column_id: column })).json().id,
    );
    expect(done).toMatchObject({ status: 'succeeded', domains_total: 2, domains_done: 2, live: 1, rows_landed: 1 });
    const [gamma] = await stack.sql<
      { error: string }[]
    >`select error from subdomain_discovery_domains where discovery_id = ${done.id} and domain = 'gamma.test'`;
    expect(gamma!.error).toMatch(/502/);

    for (const bad of [
      {},
      { domain: 'acme.test', source_table_id: source, source_column_id: column },
      { domain: 'not a domain' },
      { source_table_id: source },
    ]) {
      expect((await post('/subdomain-discoveries/', bad)).statusCode, JSON.stringify(bad)).toBe(422);
    }
    expect(
      (
        await post('/subdomain-discoveries/', {
          source_table_id: source,
          source_column_id: '00000000-0000-4000-8000-000000000000',
        })
      ).statusCode,
    ).toBe(422);
    expect(
      (await post('/subdomain-discoveries/', { domain: 'acme.test', table_id: '00000000-0000-4000-8000-000000000000' }))
        .statusCode,
    ).toBe(404);
    expect(
      (
        await stack.app.inject({
          method: 'GET',
          url: `/subdomain-discoveries/${done.id}/`,
          headers: withKey(free.apiKey),
        })
      ).statusCode,
    ).toBe(404);
  });
});
