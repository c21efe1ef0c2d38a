/**
 * The document extractor: reads a PDF, XLSX or CSV into pages of text on a worker thread of its
 * own, within limits. The thread's JavaScript heap is capped (`resourceLimits`), the file must be
 * read before a deadline, and the process's resident memory may grow only so much while it is
 * (a PDF's decoded streams live outside the heap); past any limit the thread is ended and the file
 * refused, so a hostile or broken file costs at most the limits and never the worker process.
 *
 * Threads are kept warm between files (loading pdfjs is most of a small file's time), at most
 * `concurrency` at once, each replaced after `filesPerWorker` files or a failure, and ended after
 * `idleSeconds` with nothing to do. A file the extractor refuses raises `ExtractionRefused`; any
 * other error (a thread that cannot start) is the service's own and worth a retry.
 */
import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { Semaphore } from 'async-mutex';
import type { AttachmentKind, ChatAttachmentLimits } from '../../domain/assistant/attachments.js';
import type { ExtractJob, WorkerMessage } from './protocol.js';
import { ExtractionRefused } from './refusal.js';

export { ExtractionRefused } from './refusal.js';

export type ExtractorLimits = Pick<ChatAttachmentLimits, 'extractSeconds' | 'extractHeapMb' | 'extractRssGrowthMb'>;

export interface ExtractorOptions {
  /** Files read at once, each on its own thread (2). */
  concurrency?: number;
  /** A warm thread with nothing to do ends after this long (120 s). */
  idleSeconds?: number;
  /** A thread is replaced after this many files (25), so nothing one file leaves behind outlives many more. */
  filesPerWorker?: number;
}

export interface Extraction {
  pages: string[];
  /** The thread's largest JavaScript heap while it read the file. */
  peakHeapBytes: number;
  /** The process's largest resident memory while the file was read (all threads). */
  peakRssBytes: number;
  /** Time to start a thread for this file (0 when a warm one took it). */
  startupMs: number;
  /** Time the thread took to read the file. */
  elapsedMs: number;
}

export interface DocumentExtractor {
  extract(kind: AttachmentKind, bytes: Uint8Array): Promise<Extraction>;
  /** Ends the idle threads; files under way finish. */
  close(): Promise<void>;
}

const entry = new URL('./extract-worker-entry.mjs', import.meta.url);
const startupSeconds = 30;
const watchIntervalMs = 50;

/** One worker thread and its state. */
class ExtractorThread {
  readonly worker: Worker;
  readonly ready: Promise<void>;
  files = 0;
  exited = false;
  idleTimer: NodeJS.Timeout | undefined;

  constructor(limits: ExtractorLimits) {
    this.worker = new Worker(entry, {
      resourceLimits: { maxOldGenerationSizeMb: limits.extractHeapMb, maxYoungGenerationSizeMb: 32 },
      stdout: false,
      stderr: false,
    });
    this.worker.on('exit', () => (this.exited = true));
    // An error after the thread is ready is a job's to judge (run below); never an unhandled one.
    this.worker.on('error', () => undefined);
    this.ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => fail(new Error(`the thread did not start within ${startupSeconds} s`)), startupSeconds * 1000);
      const onMessage = (message: WorkerMessage) => {
        if (message.type !== 'ready') return;
        done();
        resolve();
      };
      const fail = (error: Error) => {
        done();
        void this.end();
        reject(new Error(`The document reader could not start: ${error.message}`));
      };
      const onError = (error: Error) => fail(error);
      const onExit = (code: number) => fail(new Error(`the thread exited with code ${code}`));
      const done = () => {
        clearTimeout(timer);
        this.worker.off('message', onMessage).off('error', onError).off('exit', onExit);
      };
      this.worker.on('message', onMessage).on('error', onError).on('exit', onExit);
    });
  }

  end(): Promise<void> {
    clearTimeout(this.idleTimer);
    if (this.exited) return Promise.resolve();
    return this.worker.terminate().then(() => undefined, () => undefined);
  }

  /** Reads one file; refuses it (and ends the thread) past a limit. */
  run(job: ExtractJob, limits: ExtractorLimits): Promise<{ pages: string[]; peakHeapBytes: number; peakRssBytes: number; healthy: boolean }> {
    return new Promise((resolve, reject) => {
      const baseline = process.memoryUsage.rss();
      let peakRss = baseline;
      const finish = (outcome: () => void, healthy: boolean) => {
        clearTimeout(deadline);
        clearInterval(watch);
        this.worker.off('message', onMessage).off('error', onError).off('exit', onExit);
        if (!healthy) void this.end();
        outcome();
      };
      const refuse = (reason: string, healthy = false) => finish(() => reject(Object.assign(new ExtractionRefused(reason), { healthy })), healthy);
      const deadline = setTimeout(
        () => refuse(`Reading the file took longer than ${limits.extractSeconds} s, the most allowed; it was stopped.`),
        limits.extractSeconds * 1000,
      );
      const watch = setInterval(() => {
        const rss = process.memoryUsage.rss();
        peakRss = Math.max(peakRss, rss);
        if (rss - baseline > limits.extractRssGrowthMb * 1024 * 1024) {
          refuse(`Reading the file needed more than ${limits.extractRssGrowthMb} MB of memory, the most allowed; it was stopped.`);
        }
      }, watchIntervalMs);
      const onMessage = (message: WorkerMessage) => {
        if (message.type === 'done' && message.id === job.id) {
          peakRss = Math.max(peakRss, process.memoryUsage.rss());
          finish(() => resolve({ pages: message.pages, peakHeapBytes: message.peakHeapBytes, peakRssBytes: peakRss, healthy: true }), true);
        } else if (message.type === 'refused' && message.id === job.id) {
          refuse(message.reason, true);
        }
      };
      const onError = (error: Error & { code?: string }) => {
        if (error.code === 'ERR_WORKER_OUT_OF_MEMORY') {
          refuse(`Reading the file needed more than the ${limits.extractHeapMb} MB of memory allowed; it was stopped.`);
        } else {
          refuse(`The file cannot be read (${error.message}).`);
        }
      };
      const onExit = (code: number) => refuse(`The file cannot be read: its reader stopped (exit code ${code}).`);
      this.worker.on('message', onMessage).on('error', onError).on('exit', onExit);
      this.worker.postMessage(job, [job.bytes]);
    });
  }
}

export function createDocumentExtractor(limits: ExtractorLimits, options: ExtractorOptions = {}): DocumentExtractor {
  const concurrency = options.concurrency ?? 2;
  const idleMs = (options.idleSeconds ?? 120) * 1000;
  const filesPerWorker = options.filesPerWorker ?? 25;
  const slots = new Semaphore(concurrency);
  const idle: ExtractorThread[] = [];
  let nextJob = 1;
  let closed = false;

  async function take(): Promise<{ thread: ExtractorThread; startupMs: number }> {
    while (idle.length > 0) {
      const thread = idle.pop()!;
      clearTimeout(thread.idleTimer);
      if (thread.exited) continue;
      thread.worker.ref();
      return { thread, startupMs: 0 };
    }
    const started = performance.now();
    const thread = new ExtractorThread(limits);
    await thread.ready;
    return { thread, startupMs: performance.now() - started };
  }

  function giveBack(thread: ExtractorThread) {
    if (closed || thread.exited || thread.files >= filesPerWorker) {
      void thread.end();
      return;
    }
    // Idle, the thread keeps nothing alive: a process with nothing else to do may exit.
    thread.worker.unref();
    thread.idleTimer = setTimeout(() => {
      idle.splice(idle.indexOf(thread), 1);
      void thread.end();
    }, idleMs);
    thread.idleTimer.unref();
    idle.push(thread);
  }

  return {
    extract(kind, bytes) {
      return slots.runExclusive(async () => {
        const { thread, startupMs } = await take();
        // A copy of exactly these bytes is transferred, so the caller's stay whole (a Buffer's
        // slice is a view, often of Node's shared pool).
        const copy = new Uint8Array(bytes.byteLength);
        copy.set(bytes);
        const started = performance.now();
        try {
          const result = await thread.run({ id: nextJob++, kind, bytes: copy.buffer }, limits);
          thread.files += 1;
          giveBack(thread);
          return { pages: result.pages, peakHeapBytes: result.peakHeapBytes, peakRssBytes: result.peakRssBytes, startupMs, elapsedMs: performance.now() - started };
        } catch (error) {
          thread.files += 1;
          if ((error as { healthy?: boolean }).healthy) giveBack(thread);
          else void thread.end();
          throw error;
        }
      });
    },
    async close() {
      closed = true;
      await Promise.all(idle.splice(0).map((thread) => thread.end()));
    },
  };
}
