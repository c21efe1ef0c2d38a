/**
 * `npm run bench:sourcing` (decision 042): CRM import and write-back against the local CRM twin
 * (sim/crm-server.ts, in this process), beside the twin's own ceiling measured from this process.
 *
 * - Ceiling: bare paged reads (the import's own search: changed at or after a watermark, oldest
 *   first, 100 a page, restarting from the watermark before the 10,000-deep paging limit) and bare
 *   batch upserts (100 a batch, by email, one after another) of every record, no database.
 * - Import: the stack (bench/stack.ts: API and worker in one process, embedded Postgres, the
 *   Temporal dev server) with HUBSPOT_API_URL at the twin; a connection, a table and an import of
 *   email, first and last name; the time from POST to the run succeeded (GET the import).
 *   A small set first (BENCH_SMALL_RECORDS, 10,000) into its own table, so the stack's peak
 *   memory (VmRSS every 100 ms) compares across record counts.
 * - Write-back: the large table's rows upserted back by email; POST to succeeded.
 * - Schedule: an import schedule every minute, 30 firings made at once by a backfill over the last
 *   30 minutes (the time-skipping test server has no Schedules), each firing's run history length
 *   and the scheduler's own history.
 * Knobs: BENCH_RECORDS (100,000), BENCH_SMALL_RECORDS (10,000).
 */
import { Client, Connection, ScheduleOverlapPolicy } from '@temporalio/client';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { createSql } from '../db/sql.js';
import { hubspotClient, modifiedProperty } from '../integrations/crm/hubspot.js';
import { serveCrmTwin } from '../sim/crm-server.js';
import { createWorkspaceWithAdmin, grantWorkspaceCredits } from '../worker/provisioning.js';
import { startBenchStack } from './stack.js';

const large = Number(process.env.BENCH_RECORDS ?? 100_000);
const small = Number(process.env.BENCH_SMALL_RECORDS ?? 10_000);
const log = (line: string) => process.stdout.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const n = (v: number, digits = 0) =>
  v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const rssMiB = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

const token = 'pat-bench';
const twin = await serveCrmTwin({ tokens: [token] });
for (let i = 0; i < large; i += 1)
  twin.add('contacts', {
    email: `person${i}@bench.example`,
    firstname: `First${i}`,
    lastname: `Last${i}`,
    segment: i < small ? 'small' : 'rest',
  });
log(`twin seeded with ${n(large)} contacts`);
const client = hubspotClient({ apiUrl: twin.url });

// ---- the ceiling ----
async function bareReads(): Promise<number> {
  const started = performance.now();
  let read = 0;
  let watermark: string | null = null;
  let after: string | null = null;
  for (;;) {
    const since: { propertyName: string; operator: string; value: string }[] = watermark
      ? [{ propertyName: modifiedProperty.contacts, operator: 'GTE', value: watermark }]
      : [];
    const page = await client.search(token, 'contacts', {
      filters: since,
      sort: { propertyName: modifiedProperty.contacts, direction: 'ASCENDING' },
      after,
      limit: 100,
      properties: ['email', 'firstname', 'lastname'],
    });
    read += page.results.length;
    if (!page.after) break;
    if (Number(page.after) >= 9000) {
      watermark = page.results.at(-1)!.updatedAt;
      after = null;
    } else after = page.after;
  }
  log(`bare reads: ${n(read)} (with the overlap at restarts)`);
  return (performance.now() - started) / 1000;
}
async function bareUpserts(): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < large; i += 100) {
    const inputs = Array.from({ length: Math.min(100, large - i) }, (_, k) => ({
      id: `person${i + k}@bench.example`,
      idProperty: 'email',
      properties: { email: `person${i + k}@bench.example`, firstname: `First${i + k}`, lastname: `Last${i + k}` },
    }));
    await client.batchUpsert(token, 'contacts', inputs);
  }
  return (performance.now() - started) / 1000;
}
const readSeconds = await bareReads();
const upsertSeconds = await bareUpserts();
log(`ceiling: reads ${n(large / readSeconds)}/s, upserts ${n(large / upsertSeconds)}/s`);

// ---- the stack ----
process.env.HUBSPOT_API_URL = twin.url;
const dataDir = mkdtempSync(join(tmpdir(), 'bench-sourcing-'));
chmodSync(dataDir, 0o755);
const { serve, pids } = await startBenchStack(dataDir, `${dataDir}.log`, log, { onFailure: () => twin.close() });
const sql = createSql(serve.databaseUrl, { max: 2 });
const connection = await Connection.connect({ address: serve.temporalAddress });
const temporal = new Client({ connection });
const ws = await createWorkspaceWithAdmin(sql, { name: 'Bench sourcing', plan: 'paid' });
await grantWorkspaceCredits(sql, { workspaceId: ws.workspace_id, amount: 1_000_000, causeKey: 'bench' });
const api = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${serve.apiUrl}${path}`, {
    method,
    headers: { 'x-api-key': ws.api_key, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : null;
};

async function watchMemory<T>(work: () => Promise<T>): Promise<{ result: T; beforeMiB: number; peakMiB: number }> {
  const beforeMiB = rssMiB(pids.api);
  let peakMiB = beforeMiB;
  const timer = setInterval(() => (peakMiB = Math.max(peakMiB, rssMiB(pids.api))), 100);
  try {
    return { result: await work(), beforeMiB, peakMiB };
  } finally {
    clearInterval(timer);
  }
}

const conn = await api('POST', '/integrations/crm/connections/', { name: 'Bench CRM', access_token: token });
async function importSet(records: number, label: string) {
  const table = await api('POST', '/tables/', { name: label });
  const started = performance.now();
  const imp = await api('POST', `/tables/${table.id}/imports/`, {
    source: 'crm',
    name: label,
    connection_id: conn.id,
    object_type: 'contacts',
    ...(records < large ? { filters: [{ property: 'segment', operator: 'EQ', value: 'small' }] } : {}),
    mapping: [
      { source: 'email', column_name: 'Email' },
      { source: 'firstname', column_name: 'First name' },
      { source: 'lastname', column_name: 'Last name' },
    ],
  });
  for (;;) {
    const now = await api('GET', `/tables/${table.id}/imports/${imp.id}/`);
    if (now.runs[0] && now.runs[0].status !== 'running') {
      const seconds = (performance.now() - started) / 1000;
      return { table: table.id, imp: now, run: now.runs[0], seconds };
    }
    await sleep(200);
  }
}
const smallSet = small > 0 ? await watchMemory(() => importSet(small, 'Small import')) : null;
const largeSet = await watchMemory(() => importSet(large, 'Import'));
log(
  `import: ${n(largeSet.result.run.rows_created)} rows in ${largeSet.result.seconds.toFixed(1)} s (${largeSet.result.run.status})`,
);

const columns = (await api('GET', `/tables/${largeSet.result.table}/columns/`)).columns as {
  id: string;
  name: string;
}[];
const col = (name: string) => columns.find((c) => c.name === name)!.id;
const wbStarted = performance.now();
const writeBack = await watchMemory(async () => {
  const wb = await api('POST', `/tables/${largeSet.result.table}/write-backs/`, {
    connection_id: conn.id,
    object_type: 'contacts',
    id_property: 'email',
    mapping: [
      { column_id: col('Email'), property: 'email' },
      { column_id: col('First name'), property: 'firstname' },
      { column_id: col('Last name'), property: 'lastname' },
    ],
  });
  for (;;) {
    const now = await api('GET', `/tables/${largeSet.result.table}/write-backs/${wb.id}/`);
    if (now.status !== 'running') return { wb: now, seconds: (performance.now() - wbStarted) / 1000 };
    await sleep(200);
  }
});
log(
  `write-back: ${n(writeBack.result.wb.rows_written)} written in ${writeBack.result.seconds.toFixed(1)} s (${writeBack.result.wb.status})`,
);

// ---- the schedule: 30 firings a minute apart, backfilled ----
const schedule = await api('POST', '/import-schedules/', {
  import_id: largeSet.result.imp.id,
  interval_seconds: 60,
  catchup_window_seconds: 3600,
  paused: true,
});
const handle = temporal.schedule.getHandle(schedule.schedule_id);
const end = new Date();
await handle.backfill({ start: new Date(end.getTime() - 30 * 60_000), end, overlap: ScheduleOverlapPolicy.BUFFER_ALL });
let runs: { status: string; workflowId: string }[] = [];
for (let i = 0; i < 600; i += 1) {
  const imp = await api('GET', `/tables/${largeSet.result.table}/imports/${largeSet.result.imp.id}/`);
  const scheduled = imp.runs.filter((r: { trigger: string }) => r.trigger === 'schedule');
  const done = await sql<
    { n: number }[]
  >`select count(*)::int as n from import_runs where import_id = ${largeSet.result.imp.id} and trigger = 'schedule' and status <> 'running'`;
  if (done[0]!.n >= 30) {
    runs = scheduled;
    break;
  }
  await sleep(500);
}
const scheduledRuns = await sql<{ workflow_id: string; rows_created: number; rows_updated: number }[]>`
  select workflow_id, rows_created, rows_updated from import_runs where import_id = ${largeSet.result.imp.id} and trigger = 'schedule'`;
const lengths: number[] = [];
for await (const wf of temporal.workflow.list({
  query: `WorkflowType = 'importRunWorkflow' AND WorkflowId STARTS_WITH 'import-run/${largeSet.result.imp.id}/scheduled'`,
})) {
  const history = await temporal.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory();
  lengths.push(history.events?.length ?? 0);
}
let schedulerEvents: number | null = null;
try {
  const h = await temporal.workflow.getHandle(`temporal-sys-scheduler:${schedule.schedule_id}`).fetchHistory();
  schedulerEvents = h.events?.length ?? null;
} catch {
  schedulerEvents = null;
}
void runs;

await connection.close();
await sql.end();
await serve.stop();
rmSync(dataDir, { recursive: true, force: true });
await twin.close();

const importRate = largeSet.result.run.rows_created / largeSet.result.seconds;
const writeRate = writeBack.result.wb.rows_written / writeBack.result.seconds;
console.log('');
console.log(
  '| records | ceiling: bare paged reads | import (POST to run succeeded) | import ÷ ceiling (target ≥ 0.5) | ceiling: bare batch upserts | write-back (POST to succeeded) | write-back ÷ ceiling (target ≥ 0.5) |',
);
console.log('|---|---|---|---|---|---|---|');
console.log(
  `| ${n(large)} | ${n(large / readSeconds)}/s (${readSeconds.toFixed(1)} s) | ${n(importRate)}/s (${largeSet.result.seconds.toFixed(1)} s, ${n(largeSet.result.run.rows_created)} rows) | ${(importRate / (large / readSeconds)).toFixed(2)} | ` +
    `${n(large / upsertSeconds)}/s (${upsertSeconds.toFixed(1)} s) | ${n(writeRate)}/s (${writeBack.result.seconds.toFixed(1)} s, ${n(writeBack.result.wb.rows_written)} written, ${writeBack.result.wb.rows_failed} failed) | ${(writeRate / (large / upsertSeconds)).toFixed(2)} |`,
);
console.log('');
if (smallSet) {
  console.log(
    `Stack RSS (before → peak): import of ${n(smallSet.result.run.rows_created)}: ${smallSet.beforeMiB.toFixed(0)} → ${smallSet.peakMiB.toFixed(0)} MiB; import of ${n(large)}: ${largeSet.beforeMiB.toFixed(0)} → ${largeSet.peakMiB.toFixed(0)} MiB ` +
      `(${(largeSet.result.run.rows_created / Math.max(1, smallSet.result.run.rows_created)).toFixed(1)}× the records, ${((largeSet.peakMiB - largeSet.beforeMiB) / Math.max(1, smallSet.peakMiB - smallSet.beforeMiB)).toFixed(2)}× the growth); write-back of ${n(large)}: ${writeBack.beforeMiB.toFixed(0)} → ${writeBack.peakMiB.toFixed(0)} MiB.`,
  );
}
console.log(
  `Schedule every minute, 30 firings (backfill of 30 minutes): ${scheduledRuns.length} runs, ${scheduledRuns.reduce((s, r) => s + r.rows_created, 0)} rows created by them; ` +
    `history events per run min/max ${Math.min(...lengths)}/${Math.max(...lengths)} (${lengths.length} read), summed ${lengths.reduce((s, x) => s + x, 0)}; scheduler workflow ${schedulerEvents ?? 'not readable'} events.`,
);
