/** A time-skipping Temporal server and a worker on it, for days-long waits in seconds. */
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, inject } from 'vitest';
import { resolveTool, temporalTestServer } from '../../worker/tools.js';

/**
 * Registers the environment and a worker with the shared workflow bundle; `activities` is read
 * in beforeAll (after the file's stack exists). Read `env` inside tests.
 */
export function useTimeSkippingWorker(taskQueue: string, activities: (env: TestWorkflowEnvironment) => object) {
  const ctx = {} as { env: TestWorkflowEnvironment };
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  beforeAll(async () => {
    ctx.env = await TestWorkflowEnvironment.createTimeSkipping({
      server: { executable: { type: 'existing-path', path: resolveTool(temporalTestServer) } },
    });
    worker = await Worker.create({
      connection: ctx.env.nativeConnection,
      taskQueue,
      workflowBundle: { codePath: inject('workflowBundlePath') },
      activities: activities(ctx.env),
    });
    running = worker.run();
  });
  afterAll(async () => {
    worker?.shutdown();
    await running;
    await ctx.env?.teardown();
  });
  return ctx;
}
