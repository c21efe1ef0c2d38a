/**
 * The stack under test, in a process of its own so the load generator never shares the API's
 * event loop. Started by bench/pnet.ts over IPC: it answers with where everything listens, and
 * stops the stack (API, worker, Temporal, Postgres) when told to.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { readConfig } from '../worker/config.js';
import { startStack } from '../worker/stack.js';

export interface ServeReady {
  type: 'ready';
  apiUrl: string;
  databaseUrl: string;
  temporalAddress: string;
  temporalMetricsUrl: string | null;
}

/** How long the API process's main thread (API and the worker's activities) kept callbacks waiting. */
export interface EventLoopDelay {
  type: 'event-loop';
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

// Sampled every 10 ms: a check-in waits at least as long as the loop is busy with something else.
const loopDelay = monitorEventLoopDelay({ resolution: 10 });
loopDelay.enable();

const stack = await startStack(readConfig());
process.send!({ type: 'ready', apiUrl: stack.apiUrl!, databaseUrl: stack.databaseUrl, temporalAddress: stack.temporalAddress, temporalMetricsUrl: stack.temporalMetricsUrl } satisfies ServeReady);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await stack.stop();
  process.exit(0);
};
process.on('message', (message) => {
  if (message === 'stop') void stop();
  if (message === 'event-loop-reset') loopDelay.reset();
  if (message === 'event-loop-read') {
    const ms = (ns: number) => ns / 1e6;
    process.send!({ type: 'event-loop', p50Ms: ms(loopDelay.percentile(50)), p99Ms: ms(loopDelay.percentile(99)), maxMs: ms(loopDelay.max) } satisfies EventLoopDelay);
  }
});
// The bench died without saying so: do not leave Temporal and Postgres running.
process.on('disconnect', () => void stop());
