/**
 * `npm run bench:documents`: business-context documents through their workflow (decision 035).
 *
 * Starts the stack (bench/stack.ts: API and worker in one process, embedded Postgres, the Temporal
 * dev server) with no chat model configured, so every summary is the local extract, and
 * DOCUMENTS_MAX raised to 1000. For each of two sets of PDFs built with pdf-lib (a company's pages:
 * a heading, prose about what it sells and a price table), the small one first:
 *
 * - the raw extraction rate: the same files read by the extractor alone
 *   (`integrations/documents/extractor.ts`, the worker's options: two readers), no workflow;
 * - the workflow: a fresh workspace uploads every file (multipart, `POST /business-context/documents/`,
 *   8 at a time) and polls `GET /business-context/documents/` until each is ready or failed; the
 *   time runs from the first upload to the last document's final write (its `updated_at`), so it
 *   holds the upload, the workflow, the extract, chunk and summarise steps and Postgres;
 * - the ratio of the two times (target: the workflow adds at most 20%, a ratio ≤ 1.20);
 * - the `document/<id>` workflows' history length (events), from a sample fetched with the client;
 * - the stack process's resident memory (VmRSS every 100 ms): its peak while the set runs and its
 *   level just before, so the small and the large set's peaks compare (flat in the page count).
 *
 * Knobs: BENCH_DOCUMENTS (200) of BENCH_DOCUMENT_PAGES (20) pages; the smaller set
 * BENCH_SMALL_DOCUMENTS (50) of BENCH_SMALL_PAGES (5) pages (0 documents skips it);
 * BENCH_HISTORIES (25) histories fetched per set; BENCH_UPLOAD_CONCURRENCY (8).
 */
import { Client, Connection } from '@temporalio/client';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import { FormData, request } from 'undici';
import { createSql, type Sql } from '../db/sql.js';
import { defaultChatAttachmentLimits } from '../domain/assistant/attachments.js';
import { createDocumentExtractor } from '../integrations/documents/extractor.js';
import { mapLimit } from '../sim/chaos-run.js';
import { createWorkspaceWithAdmin } from '../worker/provisioning.js';
import { documentWorkflowId } from '../workflows/documents/document.contract.js';
import { startBenchStack } from './stack.js';

const large = {
  documents: Number(process.env.BENCH_DOCUMENTS ?? 200),
  pages: Number(process.env.BENCH_DOCUMENT_PAGES ?? 20),
};
const small = {
  documents: Number(process.env.BENCH_SMALL_DOCUMENTS ?? 50),
  pages: Number(process.env.BENCH_SMALL_PAGES ?? 5),
};
const historySample = Number(process.env.BENCH_HISTORIES ?? 25);
const uploadConcurrency = Number(process.env.BENCH_UPLOAD_CONCURRENCY ?? 8);
const settleSeconds = Number(process.env.BENCH_SETTLE_SECONDS ?? 1800);
const maxOverhead = 0.2;

const log = (line: string) => process.stdout.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const n = (v: number, digits = 0) =>
  v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;

// ---- the files ----

const products = [
  'Outreach Starter',
  'Pipeline Pro',
  'Inbox Guard',
  'Signal Finder',
  'Reply Coach',
  'Territory Planner',
  'Deal Desk',
  'Forecast Lens',
];
const audiences = [
  'B2B sales teams',
  'agencies',
  'founders who sell',
  'revenue operations',
  'customer success teams',
  'recruiters',
];

/** Splits prose into lines of at most `width` characters. */
function wrap(prose: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of prose.split(' ')) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}

/**
 * Document `index` of `pages` pages about a company: each page a heading, three paragraphs on what
 * it sells and to whom (different words per document and page), and a 12-row price table.
 */
async function businessPdf(index: number, pages: number): Promise<Buffer> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  const bold = await doc.embedFont(StandardFonts.HelveticaBold);
  const company = `Company ${index + 1}`;
  for (let p = 0; p < pages; p += 1) {
    const page = doc.addPage([612, 792]);
    let top = 56;
    const text = (s: string, x: number, size = 10, f = font) => page.drawText(s, { x, y: 792 - top, size, font: f });
    const product = products[(index + p) % products.length]!;
    const audience = audiences[(index * 3 + p) % audiences.length]!;
    text(`${company}: ${product} (page ${p + 1} of ${pages})`, 50, 16, bold);
    top += 30;
    const paragraphs = [
      `${company} sells ${product} to ${audience}. It finds the accounts worth a first email, writes the message from what the prospect published last quarter, and books the meeting when the reply is a yes.`,
      `Customers such as Customer ${index * 7 + p + 1} and Customer ${index * 11 + p + 2} use ${product} every week; they report ${10 + ((index + p) % 40)}% more replies and ${2 + ((index * p) % 9)} hours saved per seller each week after the first month.`,
      `Onboarding takes ${1 + (p % 5)} days: a sender is connected, the first table is imported, and a sequence of ${3 + (index % 4)} steps starts. Support answers within ${1 + (index % 8)} business hours in English, German and French.`,
    ];
    for (const paragraph of paragraphs) {
      for (const line of wrap(paragraph, 95)) {
        text(line, 50);
        top += 14;
      }
      top += 8;
    }
    top += 10;
    const row = (cells: string[], f = font) => {
      cells.forEach((cell, c) => page.drawText(cell, { x: [50, 230, 350, 470][c]!, y: 792 - top, size: 10, font: f }));
      top += 18;
    };
    row(['Plan', 'Seats', 'Price per month', 'Term'], bold);
    for (let r = 0; r < 12; r += 1) {
      row([
        `${product} ${['Solo', 'Team', 'Business', 'Enterprise'][r % 4]}`,
        String(1 + r * 5),
        `EUR ${(49 + r * 37 + index).toFixed(2)}`,
        r % 3 === 0 ? 'annual' : 'monthly',
      ]);
    }
  }
  return Buffer.from(await doc.save());
}

// ---- memory of the stack process ----

function rssMiB(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
  } catch {
    return 0;
  }
}

/** Samples a process's resident memory every 100 ms until stopped: its level at the start and its peak. */
function watchMemory(pid: number) {
  const before = rssMiB(pid);
  let peak = before;
  const timer = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 100);
  return {
    stop: () => {
      clearInterval(timer);
      peak = Math.max(peak, rssMiB(pid));
      return { beforeMiB: before, peakMiB: peak };
    },
  };
}

// ---- one set ----

interface ListedDocument {
  id: string;
  status: 'pending' | 'processing' | 'ready' | 'failed';
  error: string | null;
  summary: string | null;
  updated_at: string;
  steps: { name: string; duration_ms: number }[];
}

interface SetResult {
  documents: number;
  pages: number;
  megabytes: number;
  extraction: { seconds: number; peakThreadHeapMiB: number };
  workflow: {
    seconds: number;
    uploadSeconds: number;
    ready: number;
    failed: number;
    stepMs: Record<string, number>;
    localSummaries: number;
  };
  histories: { min: number; median: number; max: number; read: number };
  memory: { beforeMiB: number; peakMiB: number };
}

async function runSet(
  set: { documents: number; pages: number },
  stack: { apiUrl: string; pid: number; sql: Sql; temporal: Client },
): Promise<SetResult> {
  log(`set: ${set.documents} documents of ${set.pages} pages; building the PDFs`);
  const files: Buffer[] = [];
  for (let i = 0; i < set.documents; i += 1) files.push(await businessPdf(i, set.pages));
  const bytes = files.reduce((sum, f) => sum + f.length, 0);

  // The extractor alone, with the worker's options (two readers, each replaced after 25 files), on cold readers as the stack's are.
  const extractor = createDocumentExtractor(defaultChatAttachmentLimits);
  let peakHeap = 0;
  const extractStarted = performance.now();
  try {
    await Promise.all(
      files.map(async (file) => {
        const result = await extractor.extract('pdf', file);
        if (result.pages.length !== set.pages)
          throw new Error(`extracted ${result.pages.length} pages, expected ${set.pages}`);
        peakHeap = Math.max(peakHeap, result.peakHeapBytes);
      }),
    );
  } finally {
    await extractor.close();
  }
  const extractSeconds = (performance.now() - extractStarted) / 1000;
  log(
    `  extractor alone: ${extractSeconds.toFixed(1)} s, ${n((set.documents * 60) / extractSeconds, 1)} documents/min, ${n((set.documents * set.pages) / extractSeconds)} pages/s`,
  );
  await sleep(2000); // the bench's readers gone before the stack's turn

  const admin = await createWorkspaceWithAdmin(stack.sql, {
    name: `Bench documents ${set.documents}x${set.pages}`,
    plan: 'paid',
  });
  const memory = watchMemory(stack.pid);
  const startedAt = Date.now();
  const started = performance.now();
  const ids = await mapLimit(files, uploadConcurrency, async (file, i) => {
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(file)], { type: 'application/pdf' }), `company-${i + 1}.pdf`);
    const res = await request(`${stack.apiUrl}/business-context/documents/`, {
      method: 'POST',
      headers: { 'x-api-key': admin.api_key },
      body: form,
    });
    const text = await res.body.text();
    if (res.statusCode !== 202) throw new Error(`upload ${i + 1}: ${res.statusCode} ${text}`);
    return (JSON.parse(text) as { id: string }).id;
  });
  const uploadSeconds = (performance.now() - started) / 1000;
  log(`  uploaded ${ids.length} in ${uploadSeconds.toFixed(1)} s`);

  let listed: ListedDocument[] = [];
  let lastLog = performance.now();
  for (;;) {
    const res = await request(`${stack.apiUrl}/business-context/documents/`, {
      headers: { 'x-api-key': admin.api_key },
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`list: ${res.statusCode} ${text}`);
    listed = (JSON.parse(text) as { documents: ListedDocument[] }).documents;
    const settled = listed.filter((d) => d.status === 'ready' || d.status === 'failed').length;
    if (settled === ids.length) break;
    if ((performance.now() - started) / 1000 > settleSeconds)
      throw new Error(`${ids.length - settled} documents not settled after ${settleSeconds} s`);
    if (performance.now() - lastLog > 15_000) {
      lastLog = performance.now();
      log(`  settled ${settled}/${ids.length}; stack RSS ${rssMiB(stack.pid).toFixed(0)} MiB`);
    }
    await sleep(250);
  }
  const mem = memory.stop();
  const lastWrite = Math.max(...listed.map((d) => Date.parse(d.updated_at)));
  const seconds = (lastWrite - startedAt) / 1000;
  const failed = listed.filter((d) => d.status === 'failed');
  if (failed.length > 0) log(`  ${failed.length} failed, e.g. ${failed[0]!.error}`);
  const stepMs: Record<string, number> = {};
  for (const d of listed) for (const s of d.steps) stepMs[s.name] = (stepMs[s.name] ?? 0) + s.duration_ms;
  const localSummaries = listed.filter((d) => d.summary !== null).length;
  log(
    `  workflow: ${seconds.toFixed(1)} s, ${n((set.documents * 60) / seconds, 1)} documents/min; ${listed.length - failed.length} ready, ${failed.length} failed`,
  );

  // History length of a sample (every document when fewer), read from Temporal.
  const sample = ids
    .filter((_, i) => i % Math.max(1, Math.floor(ids.length / historySample)) === 0)
    .slice(0, historySample);
  // Each read once its workflow has closed (a document is ready a moment before its workflow completes).
  const lengths = await mapLimit(sample, 8, async (id) => {
    const handle = stack.temporal.workflow.getHandle(documentWorkflowId(id));
    await handle.result();
    return (await handle.fetchHistory()).events?.length ?? 0;
  });

  return {
    documents: set.documents,
    pages: set.pages,
    megabytes: bytes / 1024 / 1024,
    extraction: { seconds: extractSeconds, peakThreadHeapMiB: peakHeap / 1024 / 1024 },
    workflow: {
      seconds,
      uploadSeconds,
      ready: listed.length - failed.length,
      failed: failed.length,
      stepMs,
      localSummaries,
    },
    histories: { min: Math.min(...lengths), median: median(lengths), max: Math.max(...lengths), read: lengths.length },
    memory: mem,
  };
}

// ---- main ----

// No chat model: every summary is the local extract. 200 documents are past the default DOCUMENTS_MAX (25).
for (const name of ['OPENAI_API_KEY', 'OPENAI_MODEL', 'OPENAI_BASE_URL']) delete process.env[name];
process.env.DOCUMENTS_MAX = String(Math.max(1000, large.documents, small.documents));

const dataDir = mkdtempSync(join(tmpdir(), 'bench-documents-'));
chmodSync(dataDir, 0o755);
log(
  `starting the stack (DATA_DIR ${dataDir}); load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
const { serve, pids } = await startBenchStack(dataDir, `${dataDir}.log`, log);
const sql = createSql(serve.databaseUrl, { max: 2 });
const connection = await Connection.connect({ address: serve.temporalAddress });
const temporal = new Client({ connection });
const results: SetResult[] = [];
try {
  for (const set of [small, large]) {
    if (set.documents > 0 && set.pages > 0)
      results.push(await runSet(set, { apiUrl: serve.apiUrl, pid: pids.api, sql, temporal }));
  }
} finally {
  await connection.close();
  await sql.end();
  await serve.stop();
  rmSync(dataDir, { recursive: true, force: true });
}

log(
  `done; load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
console.log('');
console.log(
  '| documents × pages | PDFs | extractor alone (documents/min) | workflow, upload to last ready (documents/min) | workflow ÷ extraction (target ≤ 1.20) | history events per workflow (min / median / max, of n) | stack RSS before → peak | extractor reader peak heap |',
);
console.log('|---|---|---|---|---|---|---|---|');
for (const r of results) {
  const ratio = r.workflow.seconds / r.extraction.seconds;
  console.log(
    `| ${r.documents} × ${r.pages} | ${r.megabytes.toFixed(1)} MiB | ${n((r.documents * 60) / r.extraction.seconds, 1)} (${r.extraction.seconds.toFixed(1)} s) | ` +
      `${n((r.documents * 60) / r.workflow.seconds, 1)} (${r.workflow.seconds.toFixed(1)} s; ${r.workflow.ready} ready, ${r.workflow.failed} failed) | ` +
      `${ratio.toFixed(2)}× (${ratio <= 1 + maxOverhead ? 'met' : 'missed'}) | ${r.histories.min} / ${r.histories.median} / ${r.histories.max} (${r.histories.read}) | ` +
      `${r.memory.beforeMiB.toFixed(0)} → ${r.memory.peakMiB.toFixed(0)} MiB | ${r.extraction.peakThreadHeapMiB.toFixed(0)} MiB |`,
  );
}
console.log('');
for (const r of results) {
  const steps = Object.entries(r.workflow.stepMs)
    .map(([name, ms]) => `${name} ${(ms / r.documents).toFixed(0)} ms`)
    .join(', ');
  console.log(
    `${r.documents} × ${r.pages}: upload of all ${r.workflow.uploadSeconds.toFixed(1)} s; steps, mean per document: ${steps}; ${r.workflow.localSummaries} local summaries.`,
  );
}
if (results.length === 2) {
  const [s, l] = results as [SetResult, SetResult];
  console.log(
    `Memory in the page count: peak stack RSS ${s.memory.peakMiB.toFixed(0)} MiB at ${s.documents} × ${s.pages} pages, ${l.memory.peakMiB.toFixed(0)} MiB at ${l.documents} × ${l.pages} ` +
      `(${((l.documents * l.pages) / (s.documents * s.pages)).toFixed(0)}× the pages, ${(l.memory.peakMiB / s.memory.peakMiB).toFixed(2)}× the peak).`,
  );
}
