/** The Temporal worker: every workflow (bundled) and every activity, bound to real dependencies. */
import { NativeConnection, Worker, bundleWorkflowCode, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { fileURLToPath } from 'node:url';
import { createActivities } from '../activities/index.js';
import type { Sql } from '../db/sql.js';

export const workflowsPath = fileURLToPath(new URL('../workflows/index.ts', import.meta.url));

export function bundleWorkflows(): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({ workflowsPath, logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} } as never });
}

export async function createServiceWorker(options: {
  sql: Sql;
  address: string;
  namespace: string;
  taskQueue: string;
  bundle?: WorkflowBundleWithSourceMap;
}): Promise<{ worker: Worker; connection: NativeConnection }> {
  const connection = await NativeConnection.connect({ address: options.address });
  const worker = await Worker.create({
    connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    workflowBundle: options.bundle ?? (await bundleWorkflows()),
    activities: createActivities({ sql: options.sql }),
    // Let running activities finish on shutdown before they are cancelled.
    shutdownGraceTime: '20 seconds',
  });
  return { worker, connection };
}
