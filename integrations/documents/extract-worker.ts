/**
 * The extractor's reader process: it loads pdfjs once, says `ready`, then reads one file per
 * message and answers its pages, or why the file cannot be read. It holds no state between files
 * but the loaded modules. The parent (extractor.ts) limits its heap, its time and its memory
 * growth, and kills it when a file passes a limit; it ends itself when the parent goes.
 */
import type { AttachmentKind } from '../../domain/assistant/attachments.js';
import { extractPdf, warmUpPdf } from './pdf.js';
import type { ExtractJob, ReaderMessage } from './protocol.js';
import { ExtractionRefused } from './refusal.js';
import { extractCsv, extractXlsx } from './spreadsheet.js';

const post = (message: ReaderMessage) => process.send!(message);

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
process.on('disconnect', () => process.exit(0));
process.on('message', (job: ExtractJob) => {
  peakHeap = process.memoryUsage().heapUsed;
  sampled = 0;
  extract(job.kind, Buffer.from(job.bytes.buffer, job.bytes.byteOffset, job.bytes.byteLength)).then(
    (pages) => {
      peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
      post({ type: 'done', id: job.id, pages, peakHeapBytes: peakHeap });
    },
    (error: unknown) => {
      const reason =
        error instanceof ExtractionRefused
          ? error.message
          : `The file cannot be read (${String((error as Error)?.message ?? error)}).`;
      post({ type: 'refused', id: job.id, reason });
    },
  );
});
post({ type: 'ready' });
