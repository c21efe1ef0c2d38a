/**
 * The worker alone, as a child process the chaos test can SIGKILL: the same createServiceWorker
 * the stack runs, configured from the environment (DATABASE_URL, TEMPORAL_ADDRESS,
 * TEMPORAL_TASK_QUEUE). WORKFLOW_BUNDLE names a prebuilt bundle so a restart takes a second,
 * not a webpack build. Prints "worker ready" once it polls.
 */
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { keepStepSignalSweeperStarted } from '../services/pnet/browser-step-client.js';
import { createSql } from '../db/sql.js';
import { createIntegrations, readIntegrationsConfig } from '../integrations/config.js';
import { readConfig } from '../worker/config.js';
import { createServiceWorker, runtimeTelemetry } from '../worker/worker.js';

const config = readConfig();
Runtime.install({ logger: new DefaultLogger('WARN'), ...runtimeTelemetry(config.workerMetricsAddress) });
// Started by the chaos test: leave with it (its end of our stdin closes however it exits).
if (process.env.EXIT_WITH_PARENT === '1') {
  process.stdin.on('end', () => process.exit(0)).resume();
}

if (!config.databaseUrl || !config.temporalAddress)
  throw new Error('run-worker needs DATABASE_URL and TEMPORAL_ADDRESS');
const sql = createSql(config.databaseUrl);
const { worker } = await createServiceWorker({
  sql,
  address: config.temporalAddress,
  namespace: config.temporalNamespace,
  taskQueue: config.taskQueue,
  integrations: createIntegrations(readIntegrationsConfig()),
  ...(config.workflowBundle ? { bundle: { codePath: config.workflowBundle } } : {}),
  // WORKER_MAX_CACHED_WORKFLOWS=0 turns sticky queues off: the time-skipping test server never moves
  // a task off a dead worker's sticky queue, so after a SIGKILL that workflow would wait for good.
  ...(process.env.WORKER_MAX_CACHED_WORKFLOWS
    ? { maxCachedWorkflows: Number(process.env.WORKER_MAX_CACHED_WORKFLOWS) }
    : {}),
});
const running = worker.run();
// As the stack's worker role does: the sweeper of lost step signals runs (decision 046), unless
// STEP_SIGNAL_SWEEPER=0: on a time-skipping server its 5 s loop turns a skipped month into half a
// million workflow tasks, so a test skipping months on this worker turns it off.
const stopSweeper =
  process.env.STEP_SIGNAL_SWEEPER === '0'
    ? async () => undefined
    : keepStepSignalSweeperStarted({
        client: new Client({
          connection: await Connection.connect({ address: config.temporalAddress }),
          namespace: config.temporalNamespace,
        }),
        taskQueue: config.taskQueue,
        onError: (error) => process.stderr.write(`step-signal sweeper not started: ${String(error)}\n`),
      });
process.stdout.write('worker ready\n');
// SIGTERM (the SDK's default shutdown signals) drains it; then leave, whatever handles remain.
await running;
await stopSweeper();
await sql.end({ timeout: 5 });
process.exit(0);
