/**
 * The document extractor: reads a PDF, XLSX or CSV into pages of text in a reader process of its
 * own, within limits. The reader's JavaScript heap is capped (`--max-old-space-size`), the file
 * must be read before a deadline, and the reader's resident memory may grow only so much while it
 * is (a PDF's decoded streams live outside the heap); past any limit the reader is killed and the
 * file refused, so a hostile or broken file costs at most the limits and never the worker process.
 * A process, not a worker thread: V8 can abort the whole process when a thread reaches its heap
 * limit inside a collection (decision 051).
 *
 * Readers are kept warm between files (loading pdfjs is most of a small file's time), at most
 * `concurrency` at once, each replaced after `filesPerWorker` files or a failure, and ended after
 * `idleSeconds` with nothing to do. A file the extractor refuses raises `ExtractionRefused`; any
 * other error (a reader that cannot start) is the service's own and worth a retry.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Semaphore } from 'async-mutex';
import type { AttachmentKind, ChatAttachmentLimits } from '../../domain/assistant/attachments.js';
import { childEnvironment } from '../config.js';
import type { ExtractJob, ReaderMessage } from './protocol.js';
import { ExtractionRefused } from './refusal.js';

export { ExtractionRefused } from './refusal.js';

export type ExtractorLimits = Pick<ChatAttachmentLimits, 'extractSeconds' | 'extractHeapMb' | 'extractRssGrowthMb'>;

export interface ExtractorOptions {
  /** Files read at once, each by its own reader (2). */
  concurrency?: number;
  /** A warm reader with nothing to do ends after this long (120 s). */
  idleSeconds?: number;
  /** A reader is replaced after this many files (25), so nothing one file leaves behind outlives many more. */
  filesPerWorker?: number;
}

export interface Extraction {
  pages: string[];
  /** The reader's largest JavaScript heap while it read the file. */
  peakHeapBytes: number;
  /** How far the reader's resident memory grew over its size before the file (0 where /proc is absent). */
  rssGrowthBytes: number;
  /** Time to start a reader for this file (0 when a warm one took it). */
  startupMs: number;
  /** Time the reader took to read the file. */
  elapsedMs: number;
}

export interface DocumentExtractor {
  extract(kind: AttachmentKind, bytes: Uint8Array): Promise<Extraction>;
  /** Ends the idle readers; files under way finish. */
  close(): Promise<void>;
}

const entry = fileURLToPath(new URL('./extract-worker-entry.mjs', import.meta.url));
const startupSeconds = 30;
const watchIntervalMs = 50;
/** What V8 prints when it aborts a process at its heap limit. */
const outOfMemoryText = /heap limit|heap out of memory/i;

/**
 * A process's resident memory from /proc (Linux, where the service runs). Elsewhere undefined:
 * the growth limit is then not watched, while the heap limit and the deadline still hold.
 */
function residentBytes(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

/** One reader process and its state. */
class ReaderProcess {
  readonly child: ChildProcess;
  readonly ready: Promise<void>;
  readonly closed: Promise<void>;
  files = 0;
  exited = false;
  idleTimer: NodeJS.Timeout | undefined;
  /** The end of what the reader wrote to stderr: how an abort at the heap limit is told apart. */
  private stderrTail = '';

  constructor(limits: ExtractorLimits) {
    // Its own flags and nothing of the parent's (a test runner's or tsx's loader): the entry
    // registers what it needs.
    this.child = fork(entry, [], {
      execArgv: [`--max-old-space-size=${limits.extractHeapMb}`, '--max-semi-space-size=16'],
      env: childEnvironment({ NODE_OPTIONS: '' }),
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    this.child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-4096);
    });
    this.child.on('exit', () => (this.exited = true));
    // A failure to spawn or to send is judged where it matters (ready, run); never an unhandled one.
    this.child.on('error', () => undefined);
    this.closed = new Promise((resolve) => this.child.once('close', () => resolve()));
    this.ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => fail(`it did not start within ${startupSeconds} s`), startupSeconds * 1000);
      const onMessage = (message: ReaderMessage) => {
        if (message.type !== 'ready') return;
        done();
        resolve();
      };
      const fail = (reason: string) => {
        done();
        void this.end();
        reject(new Error(`The document reader could not start: ${reason}`));
      };
      const onError = (error: Error) => fail(error.message);
      const onClose = (code: number | null, signal: string | null) =>
        fail(`it stopped (${signal ?? `exit code ${code}`}) ${this.stderrTail.trim()}`.trim());
      const done = () => {
        clearTimeout(timer);
        this.child.off('message', onMessage).off('error', onError).off('close', onClose);
      };
      this.child.on('message', onMessage).on('error', onError).on('close', onClose);
    });
  }

  /** Whether the process keeps the parent's event loop alive: not while it waits idle. */
  hold(held: boolean) {
    const handles: Array<{ ref(): unknown; unref(): unknown } | null | undefined> = [
      this.child,
      this.child.channel,
      this.child.stderr as Socket | null,
    ];
    for (const handle of handles) {
      if (held) handle?.ref();
      else handle?.unref();
    }
  }

  end(): Promise<void> {
    clearTimeout(this.idleTimer);
    if (!this.exited) this.child.kill('SIGKILL');
    return this.closed;
  }

  /** Reads one file; refuses it (and ends the reader) past a limit. */
  run(
    job: ExtractJob,
    limits: ExtractorLimits,
  ): Promise<{ pages: string[]; peakHeapBytes: number; rssGrowthBytes: number; healthy: boolean }> {
    return new Promise((resolve, reject) => {
      const baseline = residentBytes(this.child.pid);
      let peakRss = baseline ?? 0;
      const sampleRss = () => {
        const rss = residentBytes(this.child.pid);
        if (rss !== undefined) peakRss = Math.max(peakRss, rss);
        return rss;
      };
      const growth = () => (baseline === undefined ? 0 : Math.max(0, peakRss - baseline));
      const finish = (outcome: () => void, healthy: boolean) => {
        clearTimeout(deadline);
        clearInterval(watch);
        this.child.off('message', onMessage).off('error', onError).off('close', onClose);
        if (!healthy) void this.end();
        outcome();
      };
      const refuse = (reason: string, healthy = false) =>
        finish(() => reject(Object.assign(new ExtractionRefused(reason), { healthy })), healthy);
      const deadline = setTimeout(
        () => refuse(`Reading the file took longer than ${limits.extractSeconds} s, the most allowed; it was stopped.`),
        limits.extractSeconds * 1000,
      );
      const watch = setInterval(() => {
        const rss = sampleRss();
        if (baseline !== undefined && rss !== undefined && rss - baseline > limits.extractRssGrowthMb * 1024 * 1024) {
          refuse(
            `Reading the file needed more than ${limits.extractRssGrowthMb} MB of memory, the most allowed; it was stopped.`,
          );
        }
      }, watchIntervalMs);
      const onMessage = (message: ReaderMessage) => {
        if (message.type === 'done' && message.id === job.id) {
          sampleRss();
          finish(
            () =>
              resolve({
                pages: message.pages,
                peakHeapBytes: message.peakHeapBytes,
                rssGrowthBytes: growth(),
                healthy: true,
              }),
            true,
          );
        } else if (message.type === 'refused' && message.id === job.id) {
          refuse(message.reason, true);
        }
      };
      const onError = (error: Error) => refuse(`The file cannot be read (${error.message}).`);
      // 'close', not 'exit': by then stderr is read to its end, and with it V8's last words.
      const onClose = (code: number | null, signal: string | null) => {
        if (outOfMemoryText.test(this.stderrTail)) {
          refuse(`Reading the file needed more than the ${limits.extractHeapMb} MB of memory allowed; it was stopped.`);
        } else {
          refuse(`The file cannot be read: its reader stopped (${signal ?? `exit code ${code}`}).`);
        }
      };
      this.child.on('message', onMessage).on('error', onError).on('close', onClose);
      this.child.send(job, (error) => {
        if (error) onError(error);
      });
    });
  }
}

export function createDocumentExtractor(limits: ExtractorLimits, options: ExtractorOptions = {}): DocumentExtractor {
  const concurrency = options.concurrency ?? 2;
  const idleMs = (options.idleSeconds ?? 120) * 1000;
  const filesPerWorker = options.filesPerWorker ?? 25;
  const slots = new Semaphore(concurrency);
  const idle: ReaderProcess[] = [];
  let nextJob = 1;
  let closed = false;

  async function take(): Promise<{ reader: ReaderProcess; startupMs: number }> {
    while (idle.length > 0) {
      const reader = idle.pop()!;
      clearTimeout(reader.idleTimer);
      if (reader.exited) continue;
      reader.hold(true);
      return { reader, startupMs: 0 };
    }
    const started = performance.now();
    const reader = new ReaderProcess(limits);
    await reader.ready;
    return { reader, startupMs: performance.now() - started };
  }

  function giveBack(reader: ReaderProcess) {
    if (closed || reader.exited || reader.files >= filesPerWorker) {
      void reader.end();
      return;
    }
    // Idle, the reader keeps nothing alive: a process with nothing else to do may exit (and its
    // reader with it, when the IPC channel closes).
    reader.hold(false);
    reader.idleTimer = setTimeout(() => {
      idle.splice(idle.indexOf(reader), 1);
      void reader.end();
    }, idleMs);
    reader.idleTimer.unref();
    idle.push(reader);
  }

  return {
    extract(kind, bytes) {
      return slots.runExclusive(async () => {
        const { reader, startupMs } = await take();
        const started = performance.now();
        try {
          const result = await reader.run({ id: nextJob++, kind, bytes }, limits);
          reader.files += 1;
          giveBack(reader);
          return {
            pages: result.pages,
            peakHeapBytes: result.peakHeapBytes,
            rssGrowthBytes: result.rssGrowthBytes,
            startupMs,
            elapsedMs: performance.now() - started,
          };
        } catch (error) {
          reader.files += 1;
          if ((error as { healthy?: boolean }).healthy) giveBack(reader);
          else void reader.end();
          throw error;
        }
      });
    },
    async close() {
      closed = true;
      await Promise.all(idle.splice(0).map((reader) => reader.end()));
    },
  };
}
