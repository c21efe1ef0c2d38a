/**
 * The stack under benchmark, in a process of its own (bench/serve.ts) on a temporary DATA_DIR, so
 * the load generator never shares the API's event loop; and its sure stop, which also stops a
 * Postgres or Temporal left behind by a stack that died on its way down.
 */
import { fork } from 'node:child_process';
import { existsSync, openSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { freePort } from '../worker/ports.js';
import type { ApiWindow, ServeReady } from './serve.js';

/** `heapMiB` caps the stack process's V8 heap (`--max-old-space-size`): a run that completes under it used no more. */
export async function startServe(dataDir: string, logFile: string, options: { heapMiB?: number } = {}) {
  const port = await freePort(3300);
  const workerMetricsPort = await freePort(9464, [port]);
  const out = openSync(logFile, 'a');
  const child = fork(fileURLToPath(new URL('./serve.ts', import.meta.url)), [], {
    execArgv: [
      '--import',
      'tsx',
      ...(options.heapMiB ? [`--max-old-space-size=${options.heapMiB}`] : []),
      // BENCH_CPU_PROFILE=<dir>: a V8 CPU profile of the stack process, written when it stops.
      ...(process.env.BENCH_CPU_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROFILE}`] : []),
    ],
    stdio: ['ignore', out, out, 'ipc'],
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      PORT: String(port),
      DATABASE_URL: '',
      TEMPORAL_ADDRESS: '',
      SERVICE_ROLE: 'all',
      // Request logging at info is two lines a request; both routes are measured without it.
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
      // Kept on (the bucket is part of every request) but above what the bench sends per key.
      RATE_LIMIT_PER_MINUTE: '1000000',
      // The worker's SDK metrics: the bench reads workflow task and local activity latencies there.
      TEMPORAL_WORKER_METRICS: `127.0.0.1:${workerMetricsPort}`,
    },
  });
  const ready = await new Promise<ServeReady>((resolve, reject) => {
    child.once('message', (m) => resolve(m as ServeReady));
    child.once('exit', (code) => reject(new Error(`the stack exited (code ${code}); see ${logFile}`)));
  });
  const stopped = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    ...ready,
    workerMetricsUrl: `http://127.0.0.1:${workerMetricsPort}/metrics`,
    pid: child.pid!,
    /** The API process's view (event-loop delay, check-in timings) since the last reset (a window's start). */
    apiWindow: {
      reset: () => child.send('window-reset'),
      read: () =>
        new Promise<ApiWindow>((resolve) => {
          const onMessage = (m: unknown) => {
            if ((m as ApiWindow).type !== 'api-window') return;
            child.off('message', onMessage);
            resolve(m as ApiWindow);
          };
          child.on('message', onMessage);
          child.send('window-read');
        }),
    },
    /** Freezes or thaws the worker process (BENCH_WORKER_APART=1 only): a worker outage. */
    worker: (state: 'pause' | 'resume') => child.send(`worker-${state}`),
    stop: async () => {
      if (child.exitCode === null) child.send('stop');
      await Promise.race([stopped, sleep(60_000)]);
      if (child.exitCode === null) child.kill('SIGKILL');
      // A stack that died on its way down leaves Postgres and Temporal behind: stop them here.
      for (const [file, signal] of [
        [join(dataDir, 'postgres', 'postmaster.pid'), 'SIGINT'],
        [join(dataDir, 'temporal.pid'), 'SIGTERM'],
      ] as const) {
        const pid = pidFromFile(file);
        // Only a process of this run (its command line names this DATA_DIR), never a reused pid.
        if (!pid || !commandLine(pid).includes(dataDir)) continue;
        try {
          process.kill(pid, signal);
        } catch {
          continue; // already gone
        }
        for (let i = 0; i < 100 && isAlive(pid); i += 1) await sleep(100);
      }
    },
  };
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function pidFromFile(file: string): number | undefined {
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, 'utf8').split('\n')[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/**
 * A benchmark's stack: started (or the run ends here with the tail of its log), stopped on Ctrl-C
 * with its data folder removed, and the pids whose CPU and memory a benchmark reads.
 */
export async function startBenchStack(
  dataDir: string,
  logFile: string,
  log: (line: string) => void,
  options: { heapMiB?: number; onFailure?: () => Promise<void> } = {},
) {
  const serve = await startServe(dataDir, logFile, options).catch(async (error: unknown) => {
    await options.onFailure?.();
    rmSync(dataDir, { recursive: true, force: true });
    process.stderr.write(`${(error as Error).message}\n${readFileSync(logFile, 'utf8').slice(-3000)}\n`);
    process.exit(1);
  });
  // Ctrl-C still stops the stack (Postgres and Temporal included) before exiting.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`${signal}: stopping the stack`);
      void serve.stop().finally(() => {
        rmSync(dataDir, { recursive: true, force: true });
        process.exit(130);
      });
    });
  }
  const pids = {
    api: serve.pid,
    postgres: pidFromFile(join(dataDir, 'postgres', 'postmaster.pid')),
    temporal: pidFromFile(join(dataDir, 'temporal.pid')),
    bench: process.pid,
  };
  return { serve, pids };
}
