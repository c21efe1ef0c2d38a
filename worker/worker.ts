/** The Temporal worker: every workflow (bundled) and every activity, bound to real dependencies. */
import {
  NativeConnection,
  Worker,
  bundleWorkflowCode,
  type State,
  type WorkflowBundleOption,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { createActivities } from '../activities/index.js';
import type { StepRow } from '../store/pnet/steps.js';
import { startStepWorkflow } from '../services/pnet/browser-step-client.js';
import type { Sql } from '../db/sql.js';
import type { Integrations } from '../integrations/config.js';
import { stepSignalSweeperQueue } from '../workflows/pnet/step-signals.contract.js';

/** Runtime options for the worker's process: the SDK's metrics served for Prometheus when asked. */
export function runtimeTelemetry(metricsAddress: string | undefined) {
  return metricsAddress ? { telemetryOptions: { metrics: { prometheus: { bindAddress: metricsAddress } } } } : {};
}

export const workflowsPath = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

export function bundleWorkflows(): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({
    workflowsPath,
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} },
  });
}

/**
 * The process's workers: one on the service's task queue, and one on the step-signal sweeper's
 * own queue (stepSignalSweeperQueue), so the sweeper's turns never wait behind the steps' backlog.
 * Run and shut down together.
 */
export interface ServiceWorker {
  run(): Promise<void>;
  shutdown(): void;
  getState(): State;
}

function together(main: Worker, others: Worker[]): ServiceWorker {
  const all = [main, ...others];
  const shutdown = () => {
    for (const w of all) if (w.getState() === 'RUNNING') w.shutdown();
  };
  return {
    async run() {
      const runs = all.map((w) => w.run());
      // One that stops (a fatal error, a shutdown signal) stops the others.
      await Promise.race(runs).catch(() => undefined);
      shutdown();
      const ended = await Promise.allSettled(runs);
      const failed = ended.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
    },
    shutdown,
    getState: () => main.getState(),
  };
}

export async function createServiceWorker(options: {
  sql: Sql;
  address: string;
  namespace: string;
  taskQueue: string;
  /** The outside services, built once by the bootstrap (shared with the API). */
  integrations: Integrations;
  /** A prebuilt workflow bundle (`npm run build`, WORKFLOW_BUNDLE); built from the source at start when omitted. */
  bundle?: WorkflowBundleOption;
  /** Workflows kept in memory between tasks; 0 turns sticky queues off (every task from the shared queue). */
  maxCachedWorkflows?: number;
}): Promise<{ worker: ServiceWorker; connection: NativeConnection; clientConnection: Connection }> {
  const connection = await NativeConnection.connect({ address: options.address });
  // Activities that start workflows (the account's housekeeping reads) use a client of their own.
  const clientConnection = await Connection.connect({ address: options.address });
  const client = new Client({ connection: clientConnection, namespace: options.namespace });
  const startStep = (row: StepRow) =>
    startStepWorkflow({ client, taskQueue: options.taskQueue, sql: options.sql }, row);
  const workflowBundle = options.bundle ?? (await bundleWorkflows());
  const activities = createActivities({
    sql: options.sql,
    startStep,
    integrations: options.integrations,
  });
  const cached = options.maxCachedWorkflows === undefined ? {} : { maxCachedWorkflows: options.maxCachedWorkflows };
  const worker = await Worker.create({
    connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    workflowBundle,
    activities,
    // Let running activities finish on shutdown before they are cancelled.
    shutdownGraceTime: '20 seconds',
    ...cached,
  });
  // The sweeper's queue holds one workflow whose turns are local activities: a small worker.
  const sweeper = await Worker.create({
    connection,
    namespace: options.namespace,
    taskQueue: stepSignalSweeperQueue(options.taskQueue),
    workflowBundle,
    activities,
    maxConcurrentWorkflowTaskExecutions: 2,
    maxConcurrentActivityTaskExecutions: 1,
    maxConcurrentLocalActivityExecutions: 2,
    shutdownGraceTime: '20 seconds',
    ...cached,
  });
  return { worker: together(worker, [sweeper]), connection, clientConnection };
}
