/**
 * The stack under test, in a process of its own so the load generator never shares the API's
 * event loop. Started by bench/pnet.ts over IPC: it answers with where everything listens, and
 * stops the stack (API, worker, Temporal, Postgres) when told to.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { checkInTimings } from '../store/pnet/check-ins.js';
import { readConfig } from '../worker/config.js';
import { startStack } from '../worker/stack.js';

export interface ServeReady {
  type: 'ready';
  apiUrl: string;
  databaseUrl: string;
  temporalAddress: string;
  temporalMetricsUrl: string | null;
  /** The worker's own process (BENCH_WORKER_APART=1), else null. */
  workerPid: number | null;
}

/**
 * The API process's view of a window: how long its main thread (API and the worker's activities)
 * kept callbacks waiting, and where its check-ins' time went before and inside their statements.
 */
export interface ApiWindow {
  type: 'api-window';
  eventLoop: { p50Ms: number; p99Ms: number; maxMs: number };
  checkIns: {
    waitedP50Ms: number;
    waitedP99Ms: number;
    statementP50Ms: number;
    statementP99Ms: number;
    statements: number;
    requestP50Ms: number;
    requestP99Ms: number;
  };
}

// Sampled every 10 ms: a check-in waits at least as long as the loop is busy with something else.
const loopDelay = monitorEventLoopDelay({ resolution: 10 });
loopDelay.enable();

// BENCH_WORKER_APART=1: the worker runs in a process of its own (SERVICE_ROLE=worker, as
// temporal-docker deploys it), started from this one so its CPU still counts as the API process's.
const apart = process.env.BENCH_WORKER_APART === '1';
const workerEnv = { ...process.env };
if (apart) {
  process.env.SERVICE_ROLE = 'api';
  delete process.env.TEMPORAL_WORKER_METRICS;
}
const stack = await startStack(readConfig());
let worker: ChildProcess | null = null;
if (apart) {
  worker = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('../worker/start.ts', import.meta.url))], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...workerEnv,
      SERVICE_ROLE: 'worker',
      DATABASE_URL: stack.databaseUrl,
      TEMPORAL_ADDRESS: stack.temporalAddress,
      DATA_DIR: join(process.env.DATA_DIR!, 'worker'),
    },
  });
  const started = worker;
  await new Promise<void>((resolve, reject) => {
    let seen = '';
    started.stdout!.on('data', (chunk: Buffer) => {
      process.stdout.write(chunk);
      seen += chunk.toString();
      if (seen.includes('The service is running.')) resolve();
    });
    started.once('exit', (code) => reject(new Error(`the worker process exited (code ${code})`)));
  });
}
process.send!({
  type: 'ready',
  apiUrl: stack.apiUrl!,
  databaseUrl: stack.databaseUrl,
  temporalAddress: stack.temporalAddress,
  temporalMetricsUrl: stack.temporalMetricsUrl,
  workerPid: worker?.pid ?? null,
} satisfies ServeReady);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  if (worker && worker.exitCode === null) {
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.kill('SIGTERM');
    await exited;
  }
  await stack.stop();
  process.exit(0);
};
process.on('message', (message) => {
  if (message === 'stop') void stop();
  // bench:pnet's outage: the worker process frozen (SIGSTOP) and thawed, as a worker that hangs or
  // restarts for that long; only with BENCH_WORKER_APART=1 (in-process, the API would stop too).
  if (message === 'worker-pause' || message === 'worker-resume') {
    if (!worker) throw new Error('a worker outage needs BENCH_WORKER_APART=1');
    worker.kill(message === 'worker-pause' ? 'SIGSTOP' : 'SIGCONT');
  }
  if (message === 'window-reset') {
    loopDelay.reset();
    for (const histogram of Object.values(checkInTimings)) histogram.reset();
  }
  if (message === 'window-read') {
    const ms = (ns: number) => ns / 1e6;
    const { waited, statement, request } = checkInTimings;
    process.send!({
      type: 'api-window',
      eventLoop: { p50Ms: ms(loopDelay.percentile(50)), p99Ms: ms(loopDelay.percentile(99)), maxMs: ms(loopDelay.max) },
      // Recorded in microseconds.
      checkIns: {
        waitedP50Ms: waited.percentile(50) / 1000,
        waitedP99Ms: waited.percentile(99) / 1000,
        statementP50Ms: statement.percentile(50) / 1000,
        statementP99Ms: statement.percentile(99) / 1000,
        statements: statement.count,
        requestP50Ms: request.percentile(50) / 1000,
        requestP99Ms: request.percentile(99) / 1000,
      },
    } satisfies ApiWindow);
  }
});
// The bench died without saying so: do not leave Temporal and Postgres running.
process.on('disconnect', () => void stop());
