/**
 * `npm run bench:connected-apps`: what an MCP tool call costs over the same operation called
 * directly. A connected app's `tools/call listTables` is authorised on its own (token, app, member,
 * plan in one query), goes through a fresh SDK server and transport, and reaches the route through
 * the in-process operation door; the direct call is `GET /tables/` with an API key. Both are timed
 * on the stack `npm start` runs, sequentially and at 8 concurrent callers, in one run; the ratio is
 * MCP over direct. BENCH_CALLS (default 400) calls per series. Also `tools/list` (the catalogue
 * as tools) and the OAuth token endpoint's refresh.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createSql } from '../db/sql.js';
import { createWorkspaceWithAdmin } from '../worker/provisioning.js';
import { startBenchStack } from './stack.js';

const log = (line: string) => console.log(line);
const calls = Number(process.env.BENCH_CALLS ?? 400);
const dataDir = mkdtempSync(join(tmpdir(), 'bench-connected-apps-'));
chmodSync(dataDir, 0o755);
const { serve } = await startBenchStack(dataDir, `${dataDir}.log`, log);
const base = serve.apiUrl.replace(/\/+$/, '');
const sql = createSql(serve.databaseUrl, { max: 2 });

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};
const ms = (v: number) => v.toFixed(2);

try {
  const ws = await createWorkspaceWithAdmin(sql, { name: 'Bench apps', plan: 'paid' });
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${base}${path}`, {
      ...init,
      headers: { 'x-api-key': ws.api_key, 'content-type': 'application/json', ...(init.headers ?? {}) },
    });
  for (let i = 0; i < 20; i += 1)
    await api('/tables/', { method: 'POST', body: JSON.stringify({ name: `Table ${i}` }) });

  // An app connected as a person would: register, authorize, approve, exchange.
  const redirect = 'http://127.0.0.1:1/callback';
  const { client_id } = (await (
    await fetch(`${base}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'Bench app', redirect_uris: [redirect] }),
    })
  ).json()) as { client_id: string };
  const verifier = randomBytes(32).toString('base64url');
  const authorize = new URL(`${base}/oauth/authorize`);
  for (const [k, v] of Object.entries({
    response_type: 'code',
    client_id,
    redirect_uri: redirect,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    resource: `${base}/mcp`,
  }))
    authorize.searchParams.set(k, v);
  const consentId = (await fetch(authorize, { redirect: 'manual' })).headers.get('location')!.split('/').pop()!;
  const approved = (await (
    await fetch(`${base}/connected-apps/consent-requests/${consentId}/approve/`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ws.access_token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ workspace_id: ws.workspace_id, access: 'write' }),
    })
  ).json()) as { redirect_url: string };
  const form = (values: Record<string, string>) => ({
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(values).toString(),
  });
  let tokens = (await (
    await fetch(
      `${base}/oauth/token`,
      form({
        grant_type: 'authorization_code',
        code: new URL(approved.redirect_url).searchParams.get('code')!,
        client_id,
        redirect_uri: redirect,
        code_verifier: verifier,
      }),
    )
  ).json()) as { access_token: string; refresh_token: string };

  const mcp = async (method: string, params: unknown) => {
    const res = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${tokens.access_token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    const body = (await res.json()) as { result?: { isError?: boolean } };
    if (res.status !== 200 || !body.result || body.result.isError)
      throw new Error(`MCP ${method}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  };
  const direct = async () => {
    const res = await api('/tables/');
    if (res.status !== 200) throw new Error(`GET /tables/: ${res.status}`);
    await res.arrayBuffer();
  };

  async function series(run: () => Promise<void>, concurrency: number) {
    for (let i = 0; i < 20; i += 1) await run(); // warm up
    const latencies: number[] = [];
    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < calls) {
          next += 1;
          const t = performance.now();
          await run();
          latencies.push(performance.now() - t);
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    return { p50: percentile(latencies, 50), p95: percentile(latencies, 95), perSecond: calls / seconds };
  }

  log(`## Connected apps: an MCP tool call against the direct call (${calls} calls a series)`);
  log(
    '| Series | Concurrency | Direct p50 / p95 ms | MCP p50 / p95 ms | Direct calls/s | MCP calls/s | MCP / direct (p50) |',
  );
  log('|---|---|---|---|---|---|---|');
  for (const concurrency of [1, 8]) {
    const d = await series(direct, concurrency);
    const m = await series(() => mcp('tools/call', { name: 'listTables', arguments: {} }), concurrency);
    log(
      `| listTables | ${concurrency} | ${ms(d.p50)} / ${ms(d.p95)} | ${ms(m.p50)} / ${ms(m.p95)} | ${d.perSecond.toFixed(0)} | ${m.perSecond.toFixed(0)} | ${(m.p50 / d.p50).toFixed(2)}x |`,
    );
  }
  const list = await series(() => mcp('tools/list', {}), 1);
  log(`tools/list: p50 ${ms(list.p50)} ms, p95 ${ms(list.p95)} ms`);
  const refreshes: number[] = [];
  for (let i = 0; i < 50; i += 1) {
    const t = performance.now();
    const res = await fetch(
      `${base}/oauth/token`,
      form({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id }),
    );
    tokens = (await res.json()) as typeof tokens;
    if (!tokens.access_token) throw new Error('refresh failed');
    refreshes.push(performance.now() - t);
  }
  log(`refresh (rotating): p50 ${ms(percentile(refreshes, 50))} ms, p95 ${ms(percentile(refreshes, 95))} ms`);
} finally {
  await sql.end({ timeout: 5 });
  await serve.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
