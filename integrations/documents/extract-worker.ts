/**
 * The extractor's worker thread: it loads pdfjs once, says `ready`, then reads one file per
 * message and answers its pages, or why the file cannot be read. It holds no state between files
 * but the loaded modules. The parent (extractor.ts) limits its heap, its time and the process's
 * memory growth, and ends it when a file passes a limit.
 */
import { parentPort } from 'node:worker_threads';
import type { AttachmentKind } from '../../domain/assistant/attachments.js';
import { extractPdf, warmUpPdf } from './pdf.js';
import type { ExtractJob, WorkerMessage } from './protocol.js';
import { ExtractionRefused } from './refusal.js';
import { extractCsv, extractXlsx } from './spreadsheet.js';

const port = parentPort!;
const post = (message: WorkerMessage) => port.postMessage(message);

/** The largest heap this isolate used while reading the current file, sampled after each page or row. */
let peakHeap = 0;
let sampled = 0;
const sampleHeap = () => {
  sampled += 1;
  if (sampled % 16 !== 0) return;
  peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
};

async function extract(kind: AttachmentKind, bytes: Buffer): Promise<string[]> {
  switch (kind) {
    case 'pdf':
      return extractPdf(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), { onPage: sampleHeap });
    case 'xlsx':
      return extractXlsx(bytes, { onRow: sampleHeap });
    case 'csv':
      return extractCsv(bytes, { onRow: sampleHeap });
  }
}

await warmUpPdf();
port.on('message', (job: ExtractJob) => {
  peakHeap = process.memoryUsage().heapUsed;
  sampled = 0;
  extract(job.kind, Buffer.from(job.bytes)).then(
    (pages) => {
      peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
      post({ type: 'done', id: job.id, pages, peakHeapBytes: peakHeap });
    },
    (error: unknown) => {
      const reason = error instanceof ExtractionRefused ? error.message : `The file cannot be read (${String((error as Error)?.message ?? error)}).`;
      post({ type: 'refused', id: job.id, reason });
    },
  );
});
post({ type: 'ready' });
