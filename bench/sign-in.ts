/**
 * `npm run bench:sign-in`: what a bearer request's sign-in costs (services/platform/sign-in.ts),
 * side by side in one run. `GET /workspace/` over real HTTP (loopback, keep-alive) for:
 *
 * - (a) a known member's development token naming the workspace id (as before teams);
 * - (b) an API key (the path teams did not change);
 * - (c) a new person of a known organisation (a workspace mapped by `external_org_id`): each
 *   request a new `sub` and email, so each one joins on first use;
 * - (d) with `provisionOnFirstUse` in the verifier's policy, a new organisation: each request a new
 *   org id and person, so each one creates its workspace.
 *
 * Beside them, on the API's own pool: a bare `select 1` (one round trip, the unit the extra cost is
 * expressed in), and the bearer lookup alone, before (`memberOfIdpUser`) and now (`reachWorkspace`).
 * `GET /health/postgres/` (HTTP plus one `select 1`) is the HTTP floor. Statements are counted on the
 * pool with postgres.js's `debug` hook. The series are interleaved in BENCH_ROUNDS rounds so the
 * machine's drift falls on all of them alike.
 *
 * The app is built with buildApp in this process on an embedded Postgres (durable, as `npm start`
 * runs it), so the policy and the pool can be set here; no route measured reaches Temporal, so its
 * client is a lazy connection that is never opened. BENCH_REQUESTS (default 2,000) requests a
 * series, BENCH_CONCURRENCY (default `1,8`), BENCH_ROUNDS (5), BENCH_WORKSPACES (1,000 other
 * workspaces seeded first, so the lookups run against a table that is not tiny), BENCH_PG_FAST=1
 * (Postgres without fsync or synchronous commit: what the first-use commits' flushes cost).
 */
import { Client, Connection } from '@temporalio/client';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { buildApp } from '../api/app.js';
import { migrate } from '../db/migrate.js';
import { createSql } from '../db/sql.js';
import { createIntegrations, readIntegrationsConfig } from '../integrations/config.js';
import { createTokenVerifier, mintAccessToken, type TokenConfig } from '../services/platform/tokens.js';
import { memberOfIdpUser, reachWorkspace } from '../store/platform/auth.js';
import { createWorkspace } from '../store/platform/workspaces.js';
import { resolveTokenConfig } from '../worker/auth-config.js';
import { startEmbeddedPostgres } from '../worker/embedded-postgres.js';
import { createWorkspaceWithAdmin } from '../worker/provisioning.js';
import { databaseName, ensureDatabase } from '../worker/stack-file.js';

const requests = Number(process.env.BENCH_REQUESTS ?? 2000);
const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 5));
const concurrencies = (process.env.BENCH_CONCURRENCY ?? '1,8').split(',').map(Number);
const seedWorkspaces = Number(process.env.BENCH_WORKSPACES ?? 1000);
const warmUp = 20;
const log = (line: string) => process.stdout.write(`${line}\n`);
const stamp = () => new Date().toISOString().slice(11, 19);

const dataDir = mkdtempSync(join(tmpdir(), 'bench-sign-in-'));
// The embedded Postgres runs as its own user (as root): the folder must be readable by it.
chmodSync(dataDir, 0o755);
// BENCH_PG_FAST=1: no fsync and no synchronous commit (as the tests run it), to see what a commit's flush costs.
const pg = await startEmbeddedPostgres({ dataDir: join(dataDir, 'postgres'), fast: process.env.BENCH_PG_FAST === '1' });
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => {
    void pg.stop().finally(() => {
      rmSync(dataDir, { recursive: true, force: true });
      process.exit(130);
    });
  });
await ensureDatabase(pg.url('postgres'), databaseName);
const sql = createSql(pg.url(databaseName));

// Every statement the pool sends (the bench's own included), counted; `capture` keeps their text.
let statements = 0;
let capture: Array<{ query: string; parameters: unknown[] }> | null = null;
(sql.options as unknown as { debug: (conn: number, query: string, parameters: unknown[]) => void }).debug = (
  _conn,
  query,
  parameters,
) => {
  statements += 1;
  capture?.push({ query, parameters });
};
const short = (query: string) => query.replace(/\s+/g, ' ').trim().slice(0, 72);

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
const ms = (v: number) => v.toFixed(2);

type Series = { name: string; run: (i: number) => Promise<void> };
interface Figures {
  p50: number;
  p99: number;
  mean: number;
  perSecond: number;
  statements: number;
}

const apps: Array<{ close: () => Promise<unknown> }> = [];
try {
  await migrate(sql);
  const auth = await resolveTokenConfig(sql, {});
  if (auth.kind !== 'secret') throw new Error('the bench signs development tokens');
  const secret = auth.secret;
  const integrations = createIntegrations(readIntegrationsConfig());
  // GET /workspace/ never reaches Temporal: a lazy connection, never opened, stands for the client.
  const temporal = {
    client: new Client({ connection: Connection.lazy({ address: '127.0.0.1:1' }) }),
    taskQueue: 'bench',
  };
  const listening = async (config: TokenConfig) => {
    const app = await buildApp({
      sql,
      temporal,
      verifyToken: createTokenVerifier(config),
      // On (every request takes from its bucket) but above what the bench sends per key, as bench/stack.ts sets it.
      rateLimit: { limit: 1_000_000, windowSeconds: 60 },
      logger: pino({ level: process.env.LOG_LEVEL ?? 'warn' }),
      integrations,
    });
    apps.push(app);
    return (await app.listen({ port: 0, host: '127.0.0.1' })).replace(/\/+$/, '');
  };
  const base = await listening({ ...auth, policy: { provisionOnFirstUse: false } });
  const provisioning = await listening({ ...auth, policy: { provisionOnFirstUse: true } });

  const seeded = performance.now();
  for (let i = 0; i < seedWorkspaces; i += 100)
    await sql.begin(async (tx) => {
      for (let k = i; k < Math.min(seedWorkspaces, i + 100); k += 1)
        await createWorkspace(tx, { name: `Seed ${k}`, plan: 'paid', externalOrgId: `seed-org-${k}` });
    });
  const org = 'org_bench_known';
  const ws = await createWorkspaceWithAdmin(sql, {
    name: 'Bench sign-in',
    plan: 'paid',
    email: 'admin@bench.example',
    externalOrgId: org,
  });
  await sql`analyze`;
  log(
    `[${stamp()}] seeded ${seedWorkspaces + 1} workspaces in ${((performance.now() - seeded) / 1000).toFixed(1)} s; ` +
      `${requests} requests a series, ${rounds} rounds, concurrency ${concurrencies.join(' and ')}`,
  );

  // Tokens are signed before any clock runs: a first-use series takes a fresh one per request.
  const memberToken = await mintAccessToken(secret, {
    sub: ws.user_id,
    org_id: ws.workspace_id,
    email: 'admin@bench.example',
    email_verified: true,
    name: 'Bench Admin',
  });
  const fresh = async (kind: 'join' | 'provision', count: number) => {
    const tag = Math.random().toString(36).slice(2, 8);
    return Promise.all(
      Array.from({ length: count }, (_, i) =>
        mintAccessToken(secret, {
          sub: `${kind}-${tag}-${i}`,
          org_id: kind === 'join' ? org : `org-${tag}-${i}`,
          email: `${kind}-${tag}-${i}@bench.example`,
          email_verified: true,
          name: `Person ${i}`,
          org_role: 'member',
        }),
      ),
    );
  };

  const get = async (url: string, headers: Record<string, string>, via: string) => {
    const res = await fetch(url, { headers });
    const body = (await res.json()) as { via?: string; member?: unknown };
    if (res.status !== 200 || body.via !== via || (via === 'bearer' && !body.member))
      throw new Error(`GET ${url} (${via}): ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  };
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const known = { userId: ws.user_id, orgId: ws.workspace_id, orgMayBeWorkspaceId: true, workspaceId: null };

  /** The series of one concurrency: each first-use series gets `count` fresh tokens. */
  const seriesFor = async (count: number): Promise<Series[]> => {
    const joins = await fresh('join', count);
    const provisions = await fresh('provision', count);
    return [
      {
        name: 'select 1 (the pool, one round trip)',
        run: async () => {
          await sql`select 1`;
        },
      },
      {
        name: 'bearer lookup before: memberOfIdpUser',
        run: async () => {
          if (!(await memberOfIdpUser(sql, ws.workspace_id, ws.user_id))) throw new Error('no member');
        },
      },
      {
        name: 'bearer lookup now: reachWorkspace',
        run: async () => {
          if (!(await reachWorkspace(sql, known))?.member_id) throw new Error('no member');
        },
      },
      {
        name: 'GET /health/postgres/ (HTTP + select 1)',
        run: async () => {
          const res = await fetch(`${base}/health/postgres/`);
          if (res.status !== 200) throw new Error(`health: ${res.status}`);
          await res.arrayBuffer();
        },
      },
      { name: '(a) known member, bearer', run: () => get(`${base}/workspace/`, bearer(memberToken), 'bearer') },
      { name: '(b) API key', run: () => get(`${base}/workspace/`, { 'x-api-key': ws.api_key }, 'api_key') },
      {
        name: '(c) new person of a known org (joins)',
        run: (i) => get(`${base}/workspace/`, bearer(joins[i]!), 'bearer'),
      },
      {
        name: '(d) new org, provisionOnFirstUse (creates)',
        run: (i) => get(`${provisioning}/workspace/`, bearer(provisions[i]!), 'bearer'),
      },
    ];
  };

  // Warm-up: every series on every connection of the pool, and the statements of one request each.
  const warm = await seriesFor(warmUp * 8 + 1);
  const oneRequest = new Map<string, Array<{ query: string; parameters: unknown[] }>>();
  for (const s of warm) {
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < warmUp * 8) await s.run(next++);
      }),
    );
    capture = [];
    await s.run(warmUp * 8);
    oneRequest.set(s.name, capture);
    capture = null;
  }

  const results = new Map<number, Map<string, Figures>>();
  for (const concurrency of concurrencies) {
    const series = await seriesFor(requests);
    const latencies = new Map(series.map((s) => [s.name, [] as number[]]));
    const seconds = new Map(series.map((s) => [s.name, 0]));
    const counted = new Map(series.map((s) => [s.name, 0]));
    const cursor = new Map(series.map((s) => [s.name, 0]));
    for (let round = 0; round < rounds; round += 1) {
      // Statistics as autovacuum would keep them: the joins grow the bench's workspace by a thousand
      // members a series, and with the counts of its start the planner reads them all to find one.
      await sql`analyze members, workspaces`;
      // Each round in a turned order: no series always follows the same one.
      const order = series.map((_, k) => series[(k + round) % series.length]!);
      for (const s of order) {
        const until = Math.round(((round + 1) * requests) / rounds);
        const into = latencies.get(s.name)!;
        const before = statements;
        const started = performance.now();
        await Promise.all(
          Array.from({ length: concurrency }, async () => {
            for (let i = cursor.get(s.name)!; i < until; i = cursor.get(s.name)!) {
              cursor.set(s.name, i + 1);
              const t = performance.now();
              await s.run(i);
              into.push(performance.now() - t);
            }
          }),
        );
        seconds.set(s.name, seconds.get(s.name)! + (performance.now() - started) / 1000);
        counted.set(s.name, counted.get(s.name)! + statements - before);
      }
    }
    const figures = new Map<string, Figures>();
    for (const s of series) {
      const sorted = latencies.get(s.name)!.sort((x, y) => x - y);
      figures.set(s.name, {
        p50: percentile(sorted, 50),
        p99: percentile(sorted, 99),
        mean: sorted.reduce((sum, v) => sum + v, 0) / sorted.length,
        perSecond: sorted.length / seconds.get(s.name)!,
        statements: counted.get(s.name)! / sorted.length,
      });
    }
    results.set(concurrency, figures);
    log(`[${stamp()}] concurrency ${concurrency} done (load average ${loadavg()[0]!.toFixed(1)})`);
  }

  log('');
  log(
    `## Sign-in: GET /workspace/ by credential (${requests} requests a series, ${cpus().length} cores, Node ${process.version}, load average ${loadavg()[0]!.toFixed(1)} at the end)`,
  );
  log('| Series | Concurrency | Statements / request | p50 ms | p99 ms | mean ms | requests/s |');
  log('|---|---|---|---|---|---|---|');
  for (const [concurrency, figures] of results)
    for (const [name, f] of figures)
      log(
        `| ${name} | ${concurrency} | ${f.statements.toFixed(2)} | ${ms(f.p50)} | ${ms(f.p99)} | ${ms(f.mean)} | ${f.perSecond.toFixed(0)} |`,
      );
  log('');
  log('Extra cost over (a), in round trips of `select 1` on the same pool (same concurrency):');
  log('| Concurrency | Series | p99 − p99(a) | ÷ p99(select 1) | p50 − p50(a) | ÷ p50(select 1) | Target (p99) |');
  log('|---|---|---|---|---|---|---|');
  for (const [concurrency, figures] of results) {
    const one = figures.get('select 1 (the pool, one round trip)')!;
    const a = figures.get('(a) known member, bearer')!;
    for (const name of [
      '(b) API key',
      '(c) new person of a known org (joins)',
      '(d) new org, provisionOnFirstUse (creates)',
    ]) {
      const f = figures.get(name)!;
      const trips = (f.p99 - a.p99) / one.p99;
      log(
        `| ${concurrency} | ${name} | ${ms(f.p99 - a.p99)} ms | ${trips.toFixed(1)} | ${ms(f.p50 - a.p50)} ms | ${((f.p50 - a.p50) / one.p50).toFixed(1)} | ${name.startsWith('(b)') ? '' : trips <= 1 ? '≤ 1: met' : '≤ 1: missed'} |`,
      );
    }
  }
  log('');
  log('A known member against today (the lookup was `memberOfIdpUser`, one statement, before teams):');
  log(
    '| Concurrency | Lookup before p50 / p99 ms | Lookup now p50 / p99 ms | Now / before (p99) | (a) statements | (a) / (b) p99 |',
  );
  log('|---|---|---|---|---|---|');
  for (const [concurrency, figures] of results) {
    const before = figures.get('bearer lookup before: memberOfIdpUser')!;
    const now = figures.get('bearer lookup now: reachWorkspace')!;
    const a = figures.get('(a) known member, bearer')!;
    const b = figures.get('(b) API key')!;
    log(
      `| ${concurrency} | ${ms(before.p50)} / ${ms(before.p99)} | ${ms(now.p50)} / ${ms(now.p99)} | ${(now.p99 / before.p99).toFixed(2)}x | ${a.statements.toFixed(2)} | ${(a.p99 / b.p99).toFixed(2)}x |`,
    );
  }
  log('');
  log('Statements of one request (after warm-up), in order:');
  for (const [name, list] of oneRequest) {
    if (!name.startsWith('(')) continue;
    log(`- ${name}: ${list.length}`);
    for (const statement of list) log(`    ${short(statement.query)}`);
  }
  // The two lookups' plans now, with the tables as the run left them (its joins and workspaces in).
  log('');
  for (const name of ['bearer lookup before: memberOfIdpUser', 'bearer lookup now: reachWorkspace']) {
    const [lookup] = oneRequest.get(name)!;
    // The service's own statement as the pool saw it, its values still bound as parameters: no input is spliced in.
    const plan = await sql.unsafe(
      `explain (analyze, costs off, timing off, buffers off, summary off) ${lookup!.query}`,
      lookup!.parameters as never[],
    );
    log(`Plan of ${name}:`);
    for (const row of plan) log(`    ${String(Object.values(row)[0])}`);
  }
} finally {
  for (const app of apps) await app.close();
  await sql.end({ timeout: 5 });
  await pg.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
