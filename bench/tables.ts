/**
 * `npm run bench:tables`: the data plane at 100,000 rows.
 *
 * Starts the local stack (bench/serve.ts) on a temporary DATA_DIR, provisions a workspace, and for
 * a small table (BENCH_SMALL_ROWS, 10,000) and then a large one (BENCH_ROWS, 100,000), through the
 * HTTP API as a client would:
 *   import   streams a generated CSV (7 fields a row) to POST /tables/{id}/csv/ (over 50 MiB, as at
 *            1,000,000 rows, in uploads of 400,000 rows);
 *   formula  adds a formula column over two input columns (computed for every row in the request);
 *   grid     times 100-row pages of GET /tables/{id}/rows/ (BENCH_GRID_SAMPLES each, 100): the first
 *            page, a page at half the table by offset and by keyset cursor (`after`), sorted by an
 *            input column (once its index is built; the read before it and the build are timed
 *            too), filtered on an input column, and sorted and filtered on the formula column
 *            (a twentieth of the samples, at least 3: those are read without an index);
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
import { sortIndexMinRows } from '../store/tables/rows.js';
import { csvBytesMax } from '../domain/tables/tables.js';
import { cpuSnapshot } from './cpu.js';
import { pidFromFile, startServe } from './stack.js';

const largeRows = Number(process.env.BENCH_ROWS ?? 100_000);
const smallRows = Number(process.env.BENCH_SMALL_ROWS ?? 10_000);
/** Rows of a timed grid page, and how many times each kind of page is read. */
const gridPage = 100;
const gridSamples = Number(process.env.BENCH_GRID_SAMPLES ?? 100);
/** Rows of one upload when the CSV is over csvBytesMax (about 39 MiB at these rows). */
const importPartRows = 400_000;
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

/** Rows from `start` up to `end`, with the header. */
async function writeCsv(file: string, end: number, start = 0): Promise<number> {
  const out = createWriteStream(file);
  const cities = ['Berlin', 'Lisbon', 'New York', 'Toronto', 'Nairobi', 'Osaka', 'São Paulo'];
  out.write('first_name,last_name,email,company,title,employees,city\n');
  let chunk = '';
  for (let i = start; i < end; i += 1) {
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

/** Milliseconds a kind of grid page took: p50 and p99 of its samples (null: the API has no cursor). */
interface PageTimes {
  kind: string;
  /** Whether the page must answer under gridTargetMs at every size. */
  target: boolean;
  samples: number;
  p50: number | null;
  p99: number | null;
}

/** The p99 a grid page must stay under (docs/decisions/059-grid-at-a-million-rows.md). */
const gridTargetMs = 20;

interface Figures {
  rows: number;
  import: Step;
  formula: Step;
  grid: Step;
  pages: PageTimes[];
  /** Seconds from the first sorted read to its index being usable (null: none was built). */
  sortIndexSeconds: number | null;
  /** Milliseconds of that first sorted read, without the index. */
  sortUnindexedMs: number;
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

type Api = <T>(method: 'GET' | 'POST', path: string, body?: unknown) => Promise<T>;
interface GridPage {
  rows: unknown[];
  next_cursor?: string | null;
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;

/** Times `samples` reads of a grid page; milliseconds at p50 and p99 (the slowest read under 100 samples). */
async function timePage(api: Api, path: string, samples: number, kind: string, target = false): Promise<PageTimes> {
  const ms: number[] = [];
  for (let i = 0; i < samples; i += 1) {
    const started = performance.now();
    const page = await api<GridPage>('GET', path);
    ms.push(performance.now() - started);
    if (page.rows.length !== gridPage) throw new Error(`${kind}: ${page.rows.length} rows, not ${gridPage}`);
  }
  ms.sort((a, b) => a - b);
  return { kind, target, samples, p50: percentile(ms, 0.5), p99: percentile(ms, 0.99) };
}

/** The grid step: each kind of 100-row page, timed; the sort column's index build waited for and timed. */
async function timeGrid(
  sql: Sql,
  api: Api,
  tableId: string,
  rows: number,
  columns: { sorted: string; filtered: string; label: string },
) {
  const base = `/tables/${tableId}/rows/?limit=${gridPage}`;
  const half = Math.floor(rows / 2);
  /** The cursor of the page ending just before `offset`, or null from an API without keyset paging. */
  const cursorAt = async (query: string, offset: number) =>
    (await api<GridPage>('GET', `${base}${query}&offset=${offset - gridPage}`)).next_cursor ?? null;
  const pages: PageTimes[] = [];
  const viaCursor = async (query: string, offset: number, kind: string, target: boolean) => {
    const cursor = await cursorAt(query, offset);
    pages.push(
      cursor === null
        ? { kind, target, samples: 0, p50: null, p99: null }
        : await timePage(api, `${base}${query}&after=${encodeURIComponent(cursor)}`, gridSamples, kind, target),
    );
  };
  pages.push(await timePage(api, base, gridSamples, 'first page', true));
  pages.push(await timePage(api, `${base}&offset=${half}`, gridSamples, 'page at half the table, by offset'));
  await viaCursor('', half, 'page at half the table, by cursor', true);

  const sorted = `&sort=${columns.sorted}`;
  const started = performance.now();
  await api<GridPage>('GET', `${base}${sorted}`);
  const sortUnindexedMs = performance.now() - started;
  // The read above starts the column's index build on a large table (an API with sort indexes answers a cursor).
  let sortIndexSeconds: number | null = null;
  if (rows >= sortIndexMinRows && (await cursorAt(sorted, gridPage)) !== null) {
    const name = `table_rows_sort_${columns.sorted.replace(/-/g, '')}_a`;
    for (;;) {
      const [ready] = await sql`
        select 1 from pg_class c join pg_index i on i.indexrelid = c.oid where c.relname = ${name} and i.indisvalid`;
      if (ready) break;
      if (performance.now() - started > 30 * 60_000) throw new Error(`${name} was not built in 30 minutes`);
      await sleep(100);
    }
    sortIndexSeconds = (performance.now() - started) / 1000;
  }
  pages.push(await timePage(api, `${base}${sorted}`, gridSamples, 'sorted by an input column', true));
  await viaCursor(sorted, half, 'sorted, at half the table by cursor', false);
  const filtered = `&filter=${columns.filtered}:eq:Berlin`;
  pages.push(
    await timePage(api, `${base}${filtered}`, gridSamples, 'filtered on an input column (city = Berlin)', true),
  );
  await viaCursor(filtered, gridPage * 10, 'filtered, page 11 by cursor', false);
  const few = Math.max(3, Math.round(gridSamples / 20));
  pages.push(await timePage(api, `${base}&sort=${columns.label}`, few, 'sorted by the formula column'));
  pages.push(
    await timePage(api, `${base}&filter=${columns.label}:contains:company`, few, 'filtered on the formula column'),
  );
  return { pages, sortIndexSeconds, sortUnindexedMs };
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
    const api: Api = async <T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> => {
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

      // One upload holds at most csvBytesMax: a larger table is imported in parts of importPartRows.
      const parts: { file: string; rows: number; bytes: number }[] = [];
      if (bytes <= csvBytesMax) parts.push({ file: csv, rows, bytes });
      else
        for (let start = 0; start < rows; start += importPartRows) {
          const end = Math.min(rows, start + importPartRows);
          const file = join(dataDir, `rows-${rows}-${start}.csv`);
          parts.push({ file, rows: end - start, bytes: await writeCsv(file, end, start) });
        }
      const imported = await withPeakMemory(serve.pid, stackPids, async () => {
        for (const part of parts) {
          const res = await request(`${serve.apiUrl}/tables/${table.id}/csv/`, {
            method: 'POST',
            headers: { ...headers, 'content-type': 'text/csv', 'content-length': String(part.bytes) },
            body: createReadStream(part.file),
            headersTimeout: 0,
            bodyTimeout: 0,
          });
          const report = (await res.body.json()) as { rows_added: number; rejected_count: number };
          if (res.statusCode !== 200 || report.rows_added !== part.rows)
            throw new Error(`import answered ${res.statusCode}: ${JSON.stringify(report).slice(0, 300)}`);
        }
      });
      for (const part of parts) if (part.file !== csv) rmSync(part.file);
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

      log(`${rows} rows: timing grid pages`);
      const ids = await columnIds(sql, table.id);
      const label = ids.get('Label')!;
      const grid = await withPeakMemory(serve.pid, stackPids, () =>
        timeGrid(sql, api, table.id, rows, { sorted: ids.get('company')!, filtered: ids.get('city')!, label }),
      );
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
        pages: grid.result.pages,
        sortIndexSeconds: grid.result.sortIndexSeconds,
        sortUnindexedMs: grid.result.sortUnindexedMs,
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
  const ms = (v: number | null) => (v === null ? '-' : v.toFixed(1));
  lines.push(
    '',
    `Grid pages of ${gridPage} rows, ms (p99 target for the marked kinds < ${gridTargetMs} ms); the grid step's rows/s above is rows served while timing them:`,
    '',
    `| Page | p50 at ${n(large.rows)} | p99 at ${n(large.rows)} | p50 at ${n(small.rows)} | p99 at ${n(small.rows)} | samples |`,
    '|---|---|---|---|---|---|',
  );
  large.pages.forEach((p, i) => {
    const s = small.pages[i]!;
    const verdict = p.target && p.p99 !== null ? ` (${p.p99 < gridTargetMs ? 'met' : 'missed'})` : '';
    lines.push(`| ${p.kind} | ${ms(p.p50)} | ${ms(p.p99)}${verdict} | ${ms(s.p50)} | ${ms(s.p99)} | ${p.samples} |`);
  });
  const built = (f: Figures) =>
    `${f.sortIndexSeconds === null ? 'no index' : `index usable after ${f.sortIndexSeconds.toFixed(1)} s`}, the read before it ${f.sortUnindexedMs.toFixed(0)} ms`;
  lines.push('', `Sort column: at ${n(large.rows)} rows ${built(large)}; at ${n(small.rows)} rows ${built(small)}.`);
  process.stdout.write(`\n${lines.join('\n')}\n`);
}

await main();
