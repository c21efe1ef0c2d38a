/** A time-skipping Temporal server and a worker on it, for days-long waits in seconds. */
import { Connection, type ConnectionOptions } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import { InternalConnectionOptionsSymbol } from '@temporalio/client/lib/connection.js';
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

/**
 * Skips `ms` of workflow time, like `env.sleep`, but on its own connection that pings at most
 * every 10 minutes and never retries the call. The environment's connection pings every 30 s; the
 * test server allows one ping per 5 min, so a sleep that takes long in real time (a killed worker's
 * tasks locking time skipping until they time out) ends in GOAWAY "excess pings", the client's retry
 * sends a second unlock-with-sleep, and the server's skipping lock count no longer balances: the
 * sleep then waits for real days. One call per connection keeps the count balanced.
 */
export async function skipTime(env: TestWorkflowEnvironment, ms: number): Promise<void> {
  const connection = await testServiceConnection(env);
  try {
    await connection.testService!.unlockTimeSkippingWithSleep({ duration: msToTs(ms) });
  } finally {
    await connection.close();
  }
}

/** A connection to the test server's own service that pings at most every 10 minutes (see skipTime). */
async function testServiceConnection(env: TestWorkflowEnvironment): Promise<Connection> {
  // The test service is reached only with the SDK's internal option, as TestWorkflowEnvironment does.
  const options = {
    address: env.address,
    channelArgs: { 'grpc.keepalive_time_ms': 600_000, 'grpc.keepalive_permit_without_calls': 0 },
    interceptors: [],
    [InternalConnectionOptionsSymbol]: { supportsTestService: true },
  } as ConnectionOptions;
  return Connection.connect(options);
}

/**
 * Releases the test server's leaked time-skipping locks and answers how many there were. The
 * server sometimes keeps a lock for good when a worker is SIGKILLed with tasks in hand (the billing
 * fault test found up to three), and a leaked lock turns every later skip into real time. Each probe
 * skips one second: with the count at its base that returns at once (the probe's own timer is the
 * next one), with a lock held it takes the second in real time. A workflow task still in flight
 * holds a lock too, briefly: releasing that one would put the count below its base and let the
 * clock run ahead for good. So a lock counts as leaked only when three probes, three seconds apart,
 * all take the whole second. Call it at a quiet moment, with no task waiting for a worker.
 */
export async function releaseLeakedTimeLocks(env: TestWorkflowEnvironment): Promise<number> {
  const connection = await testServiceConnection(env);
  const probeIsSlow = async () => {
    const started = Date.now();
    await connection.testService!.unlockTimeSkippingWithSleep({ duration: msToTs(1000) });
    return Date.now() - started >= 900;
  };
  const lockHeld = async () => {
    for (let probe = 0; probe < 3; probe += 1) {
      if (probe > 0) await new Promise((r) => setTimeout(r, 3000));
      if (!(await probeIsSlow())) return false;
    }
    return true;
  };
  try {
    for (let released = 0; released < 20; released += 1) {
      if (!(await lockHeld())) return released;
      await connection.testService!.unlockTimeSkipping({});
    }
    throw new Error('the test server still runs at real speed after 20 unlocks');
  } finally {
    await connection.close();
  }
}
