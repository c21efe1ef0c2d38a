/**
 * `npm run bench:assistant`: the assistant's benchmarks, one function per section, chosen with
 * BENCH_SECTIONS (comma-separated, default all):
 *
 * - `attachments`: chat attachment pages. A 50- and a 200-page PDF of text and tables (pdf-lib)
 *   read by our extractor, the code path of the activity (a reader process with its limits), in
 *   pages per second and peak memory (the reader's heap and its RSS growth), beside poppler's
 *   `pdftotext -layout` on the same files when it is installed, with the ratio against the target
 *   (at least 0.5x poppler's pages per second) and how many pages read line for line like poppler's
 *   once its gaps are cut to three spaces. BENCH_ATTACHMENT_RUNS (default 5) runs per file.
 * - `turns`: the answer stream's first byte and approve-all of 50 cards (bench/assistant-turns.ts).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import { defaultChatAttachmentLimits } from '../domain/assistant/attachments.js';
import { createDocumentExtractor } from '../integrations/documents/extractor.js';

type Log = (line: string) => void;
const log: Log = (line) => console.log(line);

// ---- attachments ----

/** `pages` pages of a report: a title, a line of prose, a 30-row table of four columns, one cell of each tenth row over two lines. */
async function reportPdf(pages: number): Promise<Buffer> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (let p = 0; p < pages; p += 1) {
    const page = doc.addPage([612, 792]);
    const text = (s: string, x: number, top: number, size = 10) => page.drawText(s, { x, y: 792 - top, size, font });
    text(`Quarterly report, page ${p + 1}`, 50, 52, 16);
    text('Sales by item and region, in euros, as booked at the end of the quarter.', 50, 82, 11);
    let top = 112;
    const row = (cells: string[]) => {
      cells.forEach((cell, c) =>
        cell.split('\n').forEach((line, i) => text(line, [50, 200, 350, 480][c]!, top + i * 14)),
      );
      top += 14 * Math.max(...cells.map((c) => c.split('\n').length)) + 4;
    };
    row(['Item', 'Region', 'Amount', 'Status']);
    for (let r = 0; r < 28; r += 1)
      row([
        `Item ${p * 28 + r + 1}`,
        r % 10 === 0 ? `Region ${r % 4}\n(north)` : `Region ${r % 4}`,
        (r * 123.45).toFixed(2),
        r % 7 === 0 ? 'late' : 'ok',
      ]);
  }
  return Buffer.from(await doc.save());
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MiB`;
const rate = (pages: number, ms: number) => pages / (ms / 1000);

/** `pdftotext version …` (it prints its version on stderr), or null when it is not installed. */
function popplerVersion(): string | null {
  const run = spawnSync('pdftotext', ['-v'], { encoding: 'utf8' });
  if (run.error) return null;
  return `${run.stdout}${run.stderr}`.split('\n')[0]!.trim() || 'pdftotext';
}

/** Poppler's page texts with its alignment taken out: gaps of two spaces or more cut to three, lines trimmed, blank lines dropped. */
const popplerComparable = (page: string) =>
  page
    .split('\n')
    .map((line) => line.trim().replace(/ {2,}/g, '   '))
    .filter(Boolean)
    .join('\n');
const oursComparable = (page: string) =>
  page
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .join('\n');

async function benchAttachments(out: Log = log): Promise<void> {
  const runs = Number(process.env.BENCH_ATTACHMENT_RUNS ?? 5);
  const dir = mkdtempSync(join(tmpdir(), 'bench-attachments-'));
  const poppler = popplerVersion();
  const extractor = createDocumentExtractor(defaultChatAttachmentLimits, { concurrency: 1, filesPerWorker: 1000 });
  const coldExtractor = createDocumentExtractor(defaultChatAttachmentLimits, { concurrency: 1, filesPerWorker: 1 });
  try {
    out('## Assistant: attachment pages');
    out(
      poppler
        ? `poppler: ${poppler}`
        : 'poppler: pdftotext is not installed (apt-get install -y poppler-utils); its column is left empty.',
    );
    const rows: string[] = [];
    const ratios: number[] = [];
    const heaps: Record<number, number> = {};
    for (const pages of [50, 200, 800]) {
      const pdf = await reportPdf(pages);
      const file = join(dir, `report-${pages}.pdf`);
      writeFileSync(file, pdf);
      // A fresh reader per file (its start included), then warm readers, as a worker that keeps reading files has.
      const coldTimes: number[] = [];
      for (let i = 0; i < Math.min(3, runs); i += 1) {
        const started = performance.now();
        await coldExtractor.extract('pdf', pdf);
        coldTimes.push(performance.now() - started);
      }
      await extractor.extract('pdf', pdf); // warm-up
      // Ours and poppler's in turn, so both see the same load on a shared machine.
      const warmTimes: number[] = [];
      const popplerTimes: number[] = [];
      let peakHeap = 0;
      let rssGrowth = 0;
      let texts: string[] = [];
      for (let i = 0; i < runs; i += 1) {
        const started = performance.now();
        const result = await extractor.extract('pdf', pdf);
        warmTimes.push(performance.now() - started);
        peakHeap = Math.max(peakHeap, result.peakHeapBytes);
        rssGrowth = Math.max(rssGrowth, result.rssGrowthBytes);
        texts = result.pages;
        if (poppler) {
          const popplerStarted = performance.now();
          execFileSync('pdftotext', ['-layout', file, join(dir, 'out.txt')]);
          popplerTimes.push(performance.now() - popplerStarted);
        }
      }
      heaps[pages] = peakHeap;
      const ours = rate(pages, median(warmTimes));
      const oursCold = rate(pages, median(coldTimes));
      let popplerRate = NaN;
      let matching = '';
      if (poppler) {
        popplerRate = rate(pages, median(popplerTimes));
        ratios.push(ours / popplerRate);
        const popplerPages = execFileSync('pdftotext', ['-layout', file, '-'], {
          encoding: 'utf8',
          maxBuffer: 64 * 1024 * 1024,
        })
          .split('\f')
          .slice(0, pages);
        const same = texts.filter(
          (text, i) => oursComparable(text) === popplerComparable(popplerPages[i] ?? ''),
        ).length;
        matching = `${same}/${pages}`;
      }
      rows.push(
        `| ${pages} | ${ours.toFixed(0)} | ${oursCold.toFixed(0)} | ${poppler ? popplerRate.toFixed(0) : 'absent'} | ${poppler ? `${(ours / popplerRate).toFixed(2)}×` : ''} | ${mb(peakHeap)} | ${mb(rssGrowth)} | ${matching} |`,
      );
    }
    out('');
    out(
      '| pages | ours, warm reader (pages/s) | ours, fresh reader per file (pages/s) | pdftotext -layout (pages/s) | ratio, warm (target ≥ 0.5×) | peak reader heap | reader RSS growth while reading | pages matching poppler line for line |',
    );
    out('|---|---|---|---|---|---|---|---|');
    for (const row of rows) out(row);
    out('');
    out(
      `Peak reader heap by pages read: ${Object.entries(heaps)
        .map(([pages, heap]) => `${pages}: ${mb(heap)}`)
        .join(', ')} (flat: garbage not yet collected, not pages kept).`,
    );
    if (ratios.length)
      out(
        `Target ≥ 0.5× poppler's pages per second: ${ratios.every((r) => r >= 0.5) ? 'met' : 'not met'} (${ratios.map((r) => `${r.toFixed(2)}×`).join(', ')}).`,
      );
  } finally {
    await Promise.all([extractor.close(), coldExtractor.close()]);
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---- turns ----

async function benchTurns(out: Log = log): Promise<void> {
  const { runTurnBenchmarks } = await import('./assistant-turns.js');
  await runTurnBenchmarks(out);
}

// ---- main ----

const sections: Record<string, (out: Log) => Promise<void>> = { attachments: benchAttachments, turns: benchTurns };
const chosen = (process.env.BENCH_SECTIONS ?? Object.keys(sections).join(','))
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
for (const name of chosen) {
  const section = sections[name];
  if (!section) throw new Error(`Unknown section "${name}"; choose from ${Object.keys(sections).join(', ')}.`);
  await section(log);
  log('');
}
