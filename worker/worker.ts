/** The Temporal worker: every workflow (bundled) and every activity, bound to real dependencies. */
import { NativeConnection, Worker, bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { createActivities } from '../activities/index.js';
import type { StepRow } from '../store/pnet/steps.js';
import { startStepWorkflow } from '../services/pnet/browser-step-client.js';
import type { Sql } from '../db/sql.js';
import type { Integrations } from '../integrations/config.js';

/** Runtime options for the worker's process: the SDK's metrics served for Prometheus when asked. */
export function runtimeTelemetry(metricsAddress: string | undefined) {
  return metricsAddress ? { telemetryOptions: { metrics: { prometheus: { bindAddress: metricsAddress } } } } : {};
}

export const workflowsPath = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

export function bundleWorkflows(): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({ workflowsPath, logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } as never });
}

export async function createServiceWorker(options: {
  sql: Sql;
  address: string;
  namespace: string;
  taskQueue: string;
  /** The outside services, built once by the bootstrap (shared with the API); from the environment when omitted. */
  integrations?: Integrations;
  bundle?: WorkflowBundleWithSourceMap;
  /** Workflows kept in memory between tasks; 0 turns sticky queues off (every task from the shared queue). */
  maxCachedWorkflows?: number;
}): Promise<{ worker: Worker; connection: NativeConnection; clientConnection: Connection }> {
  const connection = await NativeConnection.connect({ address: options.address });
  // Activities that start workflows (the account's housekeeping reads) use a client of their own.
  const clientConnection = await Connection.connect({ address: options.address });
  const client = new Client({ connection: clientConnection, namespace: options.namespace });
  const startStep = (row: StepRow) => startStepWorkflow({ client, taskQueue: options.taskQueue, sql: options.sql }, row);
  const worker = await Worker.create({
    connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    workflowBundle: options.bundle ?? (await bundleWorkflows()),
    activities: createActivities({ sql: options.sql, startStep, ...(options.integrations ? { integrations: options.integrations } : {}) }),
    // Let running activities finish on shutdown before they are cancelled.
    shutdownGraceTime: '20 seconds',
    ...(options.maxCachedWorkflows === undefined ? {} : { maxCachedWorkflows: options.maxCachedWorkflows }),
  });
  return { worker, connection, clientConnection };
}
