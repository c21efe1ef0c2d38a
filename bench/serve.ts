/**
 * The stack under test, in a process of its own so the load generator never shares the API's
 * event loop. Started by bench/pnet.ts over IPC: it answers with where everything listens, and
 * stops the stack (API, worker, Temporal, Postgres) when told to.
 */
import { readConfig } from '../worker/config.js';
import { startStack } from '../worker/stack.js';

export interface ServeReady {
  type: 'ready';
  apiUrl: string;
  databaseUrl: string;
  temporalAddress: string;
  temporalMetricsUrl: string | null;
}

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
});
// The bench died without saying so: do not leave Temporal and Postgres running.
process.on('disconnect', () => void stop());
