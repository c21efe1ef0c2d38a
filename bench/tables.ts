/**
 * `npm run bench:tables`: the data plane at 100,000 rows.
 *
 * Starts the local stack (bench/serve.ts) on a temporary DATA_DIR, provisions a workspace, and for
 * a small table (BENCH_SMALL_ROWS, 10,000) and then a large one (BENCH_ROWS, 100,000), through the
 * HTTP API as a client would:
 *   import   streams a generated CSV (7 fields a row) to POST /tables/{id}/csv/;
 *   formula  adds a formula column over two input columns (computed for every row in the request);
 *   grid     pages through GET /tables/{id}/rows/ at 1,000 rows a page;
 *   export   streams GET /tables/{id}/csv/ and counts its lines.
 * It prints rows per second for each, the API process's peak resident memory above its level
 * before the step, and the CPU seconds the API process and Postgres spent on it (on a shared
 * machine the rates move with the load; the CPU a step costs moves much less).
 *
 * Next to the import and the export it measures what Postgres alone does with the same rows, on
 * the same Postgres, just before and just after the step (the mean of the two is the limit), and
 * prints the step's ratio against it:
 *   import limit  `COPY` of the same CSV into a temporary staging table, then one
 *                 `insert … select jsonb_build_object(…)` into a table shaped like table_rows
 *                 (its defaults, identity and indexes; no triggers);
 *   export limit  `COPY (select cells->>… from table_rows … order by seq) TO STDOUT (format csv)`
 *                 over the imported table's rows (its input columns).
 * The API process
 * (API and worker) runs with its V8 heap capped at BENCH_HEAP_MIB (256 MiB): every step at
 * 100,000 rows completing under the same cap as at 10,000 is what shows memory flat in the row
 * count (resident memory alone mostly shows when the collector ran).
 */
import { createReadStream, createWriteStream, chmodSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { pipeline } from 'node:stream/promises';
import { createSql, type Sql } from '../db/sql.js';
import { createWorkspaceWithAdmin } from '../worker/provisioning.js';
import { cpuSnapshot } from './cpu.js';
import { pidFromFile, startServe } from './stack.js';

const largeRows = Number(process.env.BENCH_ROWS ?? 100_000);
const smallRows = Number(process.env.BENCH_SMALL_ROWS ?? 10_000);
const pageSize = 1000;
/** The API process's heap cap: every step at every size must complete under it. */
const heapMiB = Number(process.env.BENCH_HEAP_MIB ?? 256);

const log = (line: string) => process.stdout.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);

interface Step {
  seconds: number;
  peakMiB: number;
  /** CPU seconds spent during the step by the API process (API and worker) and by Postgres. */
  apiCpu: number;
  postgresCpu: number;
}

/**
 * Resident memory of a process, in MiB, sampled every 50 ms while `work` runs: the peak above the
 * level before; and the CPU the API process and Postgres spent meanwhile.
 */
async function withPeakMemory<T>(
  pid: number,
  others: { postgres: number | undefined; temporal: number | undefined },
  work: () => Promise<T>,
): Promise<{ result: T } & Step> {
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
  // Postgres and Temporal are children of the API process: counted apart, not as its own.
  const cpu = () => cpuSnapshot({ api: pid, postgres: others.postgres, temporal: others.temporal, bench: undefined });
  const before = rss();
  const cpuBefore = cpu();
  let peak = before;
  const timer = setInterval(() => (peak = Math.max(peak, rss())), 50);
  const started = performance.now();
  try {
    const result = await work();
    peak = Math.max(peak, rss());
    const cpuAfter = cpu();
    return {
      result,
      seconds: (performance.now() - started) / 1000,
      peakMiB: Math.max(0, peak - before),
      apiCpu: cpuAfter.api - cpuBefore.api,
      postgresCpu: cpuAfter.postgres - cpuBefore.postgres,
    };
  } finally {
    clearInterval(timer);
  }
}

async function writeCsv(file: string, rows: number): Promise<number> {
  const out = createWriteStream(file);
  const cities = ['Berlin', 'Lisbon', 'New York', 'Toronto', 'Nairobi', 'Osaka', 'São Paulo'];
  out.write('first_name,last_name,email,company,title,employees,city\n');
  let chunk = '';
  for (let i = 0; i < rows; i += 1) {
    chunk += `Person${i},"Family, ${i % 997}",person${i}@example${i % 500}.com,Company ${i % 5000},"Head of ""Growth""",${(i * 37) % 10_000},${cities[i % cities.length]}\n`;
    if (chunk.length > 1 << 16) {
      if (!out.write(chunk)) await once(out, 'drain');
      chunk = '';
    }
  }
  out.end(chunk);
  await once(out, 'finish');
  return statSync(file).size;
}

interface Figures {
  rows: number;
  import: Step;
  formula: Step;
  grid: Step;
  export: Step;
  csvMiB: number;
  /** Seconds Postgres alone took for the same rows, measured before and after the step. */
  limits: { import: number[]; export: number[] };
}

const csvFields = ['first_name', 'last_name', 'email', 'company', 'title', 'employees', 'city'];

/**
 * The import's limit: the same CSV copied into a temporary staging table, then one set-based
 * insert building each row's cells (keyed by column ids) into a table shaped like table_rows.
 * Seconds, commit included.
 */
async function importLimit(sql: Sql, file: string, workspaceId: string, tableId: string): Promise<number> {
  const build = csvFields.map((f) => `'${randomUUID()}', ${f}`).join(', ');
  await sql`drop table if exists bench_limit_rows`;
  await sql`create table bench_limit_rows (like table_rows including defaults including identity including indexes)`;
  const started = performance.now();
  await sql.begin(async (tx) => {
    await tx.unsafe(
      `create temporary table bench_limit_stage (n bigint generated always as identity, ${csvFields.map((f) => `${f} text`).join(', ')}) on commit drop`,
    );
    const copy = await tx
      .unsafe(`copy bench_limit_stage (${csvFields.join(', ')}) from stdin (format csv, header true)`)
      .writable();
    await pipeline(createReadStream(file), copy);
    await tx.unsafe(
      `insert into bench_limit_rows (workspace_id, table_id, cells)
       select $1, $2, jsonb_build_object(${build}) from bench_limit_stage order by n`,
      [workspaceId, tableId],
    );
  });
  const seconds = (performance.now() - started) / 1000;
  await sql`drop table bench_limit_rows`;
  return seconds;
}

/** The export's limit: the imported table's input cells copied out as CSV in the grid's order. Seconds. */
async function exportLimit(sql: Sql, tableId: string, rows: number): Promise<number> {
  const ids = await columnIds(sql, tableId);
  const fields = csvFields.map((f) => `cells->>'${ids.get(f)!}'`).join(', ');
  const started = performance.now();
  const out = await sql
    .unsafe(`copy (select ${fields} from table_rows where table_id = '${tableId}' order by seq) to stdout (format csv)`)
    .readable();
  let lines = 0;
  for await (const chunk of out) for (const byte of chunk as Buffer) if (byte === 0x0a) lines += 1;
  if (lines !== rows) throw new Error(`the export limit copied ${lines} lines of ${rows} rows`);
  return (performance.now() - started) / 1000;
}

async function columnIds(sql: Sql, tableId: string): Promise<Map<string, string>> {
  const found = await sql<
    { id: string; name: string }[]
  >`select id, name from table_columns where table_id = ${tableId}`;
  const ids = new Map(found.map((c) => [c.name, c.id]));
  for (const f of csvFields) if (!ids.has(f)) throw new Error(`the table has no column ${f}`);
  return ids;
}

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-tables-'));
  chmodSync(dataDir, 0o755); // Postgres runs as its own user and must reach its data folder
  log(`starting the stack in ${dataDir}`);
  const serve = await startServe(dataDir, join(dataDir, 'stack.log'), { heapMiB });
  const sql = createSql(serve.databaseUrl, { max: 2 });
  const stackPids = {
    postgres: pidFromFile(join(dataDir, 'postgres', 'postmaster.pid')),
    temporal: pidFromFile(join(dataDir, 'temporal.pid')),
  };
  let failed = false;
  const results: Figures[] = [];
  try {
    const admin = await createWorkspaceWithAdmin(sql, { name: 'Bench tables', plan: 'paid' });
    const headers = { 'x-api-key': admin.api_key };
    const api = async <T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> => {
      const res = await request(`${serve.apiUrl}${path}`, {
        method,
        headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        headersTimeout: 0,
        bodyTimeout: 0,
      });
      const text = await res.body.text();
      if (res.statusCode >= 300) throw new Error(`${method} ${path} answered ${res.statusCode}: ${text.slice(0, 300)}`);
      return JSON.parse(text) as T;
    };

    for (const rows of [smallRows, largeRows]) {
      const csv = join(dataDir, `rows-${rows}.csv`);
      const bytes = await writeCsv(csv, rows);
      const table = await api<{ id: string }>('POST', '/tables/', { name: `Bench ${rows}` });
      log(`${rows} rows: the import's limit, then importing ${(bytes / 2 ** 20).toFixed(1)} MiB`);
      const importLimits = [await importLimit(sql, csv, admin.workspace_id, table.id)];

      const imported = await withPeakMemory(serve.pid, stackPids, async () => {
        const res = await request(`${serve.apiUrl}/tables/${table.id}/csv/`, {
          method: 'POST',
          headers: { ...headers, 'content-type': 'text/csv', 'content-length': String(bytes) },
          body: createReadStream(csv),
          headersTimeout: 0,
          bodyTimeout: 0,
        });
        const report = (await res.body.json()) as { rows_added: number; rejected_count: number };
        if (res.statusCode !== 200 || report.rows_added !== rows)
          throw new Error(`import answered ${res.statusCode}: ${JSON.stringify(report).slice(0, 300)}`);
        return report;
      });
      importLimits.push(await importLimit(sql, csv, admin.workspace_id, table.id));

      log(`${rows} rows: formula column`);
      const formula = await withPeakMemory(serve.pid, stackPids, () =>
        api('POST', `/tables/${table.id}/columns/`, {
          kind: 'formula',
          name: 'Label',
          formula: 'concat(upper({first_name}), " at ", {company}, " / ", {employees} * 2)',
        }),
      );
      const sample = await api<{ rows: { computed: Record<string, { value: unknown }> }[] }>(
        'GET',
        `/tables/${table.id}/rows/?limit=1&offset=${rows - 1}`,
      );
      const labels = Object.values(sample.rows[0]!.computed).map((c) => c.value);
      if (!labels.some((v) => typeof v === 'string' && v.includes(' at Company ')))
        throw new Error(`the last row has no formula value: ${JSON.stringify(sample).slice(0, 300)}`);

      log(`${rows} rows: paging the grid`);
      const grid = await withPeakMemory(serve.pid, stackPids, async () => {
        let seen = 0;
        for (let offset = 0; ; offset += pageSize) {
          const page = await api<{ rows: unknown[] }>(
            'GET',
            `/tables/${table.id}/rows/?limit=${pageSize}&offset=${offset}`,
          );
          seen += page.rows.length;
          if (page.rows.length < pageSize) break;
        }
        if (seen !== rows) throw new Error(`the grid showed ${seen} rows of ${rows}`);
      });

      log(`${rows} rows: the export's limit, export`);
      const exportLimits = [await exportLimit(sql, table.id, rows)];
      const exported = await withPeakMemory(serve.pid, stackPids, async () => {
        const res = await request(`${serve.apiUrl}/tables/${table.id}/csv/`, {
          headers,
          headersTimeout: 0,
          bodyTimeout: 0,
        });
        if (res.statusCode !== 200) throw new Error(`export answered ${res.statusCode}`);
        let lines = 0;
        let quoted = false;
        for await (const chunk of res.body) {
          // Count record ends, not line breaks inside quoted fields.
          for (const byte of chunk as Buffer) {
            if (byte === 0x22) quoted = !quoted;
            else if (byte === 0x0a && !quoted) lines += 1;
          }
        }
        if (lines !== rows + 1) throw new Error(`the export had ${lines} lines for ${rows} rows and a header`);
      });
      exportLimits.push(await exportLimit(sql, table.id, rows));
      results.push({
        rows,
        csvMiB: bytes / 2 ** 20,
        import: imported,
        formula,
        grid,
        export: exported,
        limits: { import: importLimits, export: exportLimits },
      });
      rmSync(csv);
      await sleep(500);
    }
    printTable(results);
  } catch (error) {
    failed = true;
    console.error(error);
  } finally {
    await sql.end();
    await serve.stop();
    if (!failed) rmSync(dataDir, { recursive: true, force: true });
    else log(`the stack's log is kept in ${dataDir}/stack.log`);
  }
  process.exit(failed ? 1 : 0);
}

function printTable(results: Figures[]) {
  const small = results[0]!;
  const large = results[results.length - 1]!;
  const steps = ['import', 'formula', 'grid', 'export'] as const;
  /** The ratio each step must reach against its limit, measured in the same run. */
  const targets = { import: 0.6, export: 0.5 } as const;
  const limited = (k: (typeof steps)[number]): k is keyof typeof targets => k in targets;
  const rate = (f: Figures, k: (typeof steps)[number]) => f.rows / f[k].seconds;
  /** Rows a second of Postgres alone: the mean of its two measurements' seconds. */
  const limit = (f: Figures, k: keyof typeof targets) =>
    f.rows / (f.limits[k].reduce((a, b) => a + b, 0) / f.limits[k].length);
  const n = (v: number) => Math.round(v).toLocaleString('en-US');
  const lines = [
    `Machine: ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB; rows of 7 fields (${large.csvMiB.toFixed(1)} MiB CSV at ${n(large.rows)} rows); ` +
      `API process heap capped at ${heapMiB} MiB, every step completed under it at both sizes`,
    '',
    `| Step | rows/s at ${n(large.rows)} | limit rows/s | ratio (target) | rows/s at ${n(small.rows)} | limit rows/s | ratio | peak memory above idle at ${n(large.rows)} / at ${n(small.rows)} (ratio) | CPU s at ${n(large.rows)}: API / Postgres |`,
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const k of steps) {
    const memRatio = small[k].peakMiB > 0 ? (large[k].peakMiB / small[k].peakMiB).toFixed(2) : 'n/a';
    const against = (f: Figures, withTarget: boolean) => {
      if (!limited(k)) return ['-', '-'];
      const ratio = rate(f, k) / limit(f, k);
      const verdict = withTarget ? ` (≥ ${targets[k]}×: ${ratio >= targets[k] ? 'met' : 'missed'})` : '';
      return [n(limit(f, k)), `${ratio.toFixed(2)}×${verdict}`];
    };
    lines.push(
      `| ${k} | ${n(rate(large, k))} | ${against(large, true).join(' | ')} | ${n(rate(small, k))} | ${against(small, false).join(' | ')} | ` +
        `${large[k].peakMiB.toFixed(0)} MiB / ${small[k].peakMiB.toFixed(0)} MiB (${memRatio}) | ${large[k].apiCpu.toFixed(2)} / ${large[k].postgresCpu.toFixed(2)} |`,
    );
  }
  const seconds = (f: Figures, k: keyof typeof targets) => f.limits[k].map((s) => `${s.toFixed(2)} s`).join(' / ');
  lines.push(
    '',
    `Limits measured just before / just after each step, at ${n(large.rows)} rows: import ${seconds(large, 'import')}, export ${seconds(large, 'export')}; ` +
      `at ${n(small.rows)}: import ${seconds(small, 'import')}, export ${seconds(small, 'export')}.`,
  );
  process.stdout.write(`\n${lines.join('\n')}\n`);
}

await main();
