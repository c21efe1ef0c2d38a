/**
 * Workers a fault test can kill and replace. The stack's own worker cannot be stopped, so the
 * test gets an app of its own on a task queue of its own (the stack's worker never takes its
 * tasks), and starts workers on that queue built as the stack builds its own (createActivities
 * on the stack's database and integrations), one after the other.
 *
 * `kill()` stands for a SIGKILL: the worker stops polling, the activities it was running are
 * cancelled where they are (a model call or a provider fetch stops at once; a worker that died
 * writes nothing more), and each attempt it had in flight ends as a retryable failure, which is
 * what Temporal records for a dead worker's attempt once its heartbeat or start-to-close timeout
 * passes, without the minute those take. What the attempt already wrote to Postgres stays.
 * `drain()` is the SDK's own graceful shutdown, as a deploy's SIGTERM runs it: in-flight
 * activities are cancelled after the grace time and report whatever they throw.
 *
 * `crashAfter(activity)` arms a crash right after an activity's work is done and before its
 * completion reaches Temporal: the effect is in Postgres, the attempt hangs until the worker is
 * killed, and Temporal retries the activity on the next worker.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { FastifyInstance } from 'fastify';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, inject } from 'vitest';
import { createActivities } from '../../activities/index.js';
import { buildApp } from '../../api/app.js';
import { startStepWorkflow } from '../../services/pnet/browser-step-client.js';
import { createTokenVerifier } from '../../services/platform/tokens.js';
import { resolveTokenConfig } from '../../worker/auth-config.js';
import type { TestStack } from './test-stack.js';

type AnyActivity = (...args: unknown[]) => Promise<unknown>;

export interface FaultWorker {
  readonly name: string;
  /** Activity names in the order their attempts started on this worker. */
  readonly started: string[];
  kill(): Promise<void>;
  drain(): Promise<void>;
}

export interface FaultWorkers {
  /** The test's own app, whose turns and runs go to `taskQueue`. */
  app: FastifyInstance;
  taskQueue: string;
  /** The worker polling now, if any. */
  readonly current: FaultWorker | undefined;
  /** Every worker started, in order. */
  readonly workers: FaultWorker[];
  start(options?: { shutdownGraceMs?: number }): Promise<FaultWorker>;
  /** Kills the current worker (see the file's comment) and starts the next. */
  replace(): Promise<FaultWorker>;
  /**
   * Arms one crash: the next attempt of `activity` whose input and result `when` accepts does its
   * work, then hangs until its worker is killed. Resolves once that attempt has crashed.
   */
  crashAfter(activity: string, when?: (input: unknown, result: unknown) => boolean): Promise<void>;
}

const killedFailure = () =>
  ApplicationFailure.retryable('The worker running this attempt was killed.', 'worker_killed');

/** The file's fault workers over its stack and its integrations; the app and the first worker exist once beforeAll has run. */
export function useFaultWorkers(stack: TestStack): FaultWorkers {
  const taskQueue = `faults-${randomBytes(4).toString('hex')}`;
  const crashes = new Map<string, { when: (input: unknown, result: unknown) => boolean; crashed: () => void }>();
  const workers: FaultWorker[] = [];
  let connection: NativeConnection | undefined;
  let current: FaultWorker | undefined;

  async function start({ shutdownGraceMs = 0 }: { shutdownGraceMs?: number } = {}): Promise<FaultWorker> {
    const state = { killed: false };
    const started: string[] = [];
    const real = createActivities({
      sql: stack.sql,
      integrations: stack.integrations,
      startStep: (row) => startStepWorkflow({ client: stack.client, taskQueue, sql: stack.sql }, row),
      housekeeping: {},
    }) as unknown as Record<string, AnyActivity>;
    const wrap =
      (name: string, fn: AnyActivity): AnyActivity =>
      async (...args) => {
        started.push(name);
        let result: unknown;
        try {
          result = await fn(...args);
        } catch (error) {
          if (state.killed) throw killedFailure();
          throw error;
        }
        const armed = crashes.get(name);
        if (armed && !state.killed && armed.when(args[0], result)) {
          crashes.delete(name);
          armed.crashed();
          // Dead from here on: nothing is reported until the kill ends the attempt.
          await Context.current().cancelled.catch(() => undefined);
          throw killedFailure();
        }
        if (state.killed) throw killedFailure();
        return result;
      };
    const worker = await Worker.create({
      connection: connection!,
      taskQueue,
      workflowBundle: { codePath: inject('workflowBundlePath') },
      activities: Object.fromEntries(Object.entries(real).map(([name, fn]) => [name, wrap(name, fn)])),
      shutdownGraceTime: shutdownGraceMs,
      // A kill never waits long for an attempt that does not stop when cancelled (a statement
      // behind a lock, a call without an abort signal): abandoned, it times out at Temporal as a
      // SIGKILLed worker's would, and the next worker polls. Unbounded, one such attempt left the
      // replacement waiting and a payout cycle with no worker (seen in CI).
      shutdownForceTime: Math.max(shutdownGraceMs, 0) + 5_000,
    });
    const running = worker.run();
    const stop = async (kill: boolean) => {
      if (kill) state.killed = true;
      if (worker.getState() === 'RUNNING') worker.shutdown();
      // A killed worker's end is not the test's concern: one forced down by shutdownForceTime rejects.
      await (kill ? running.catch(() => undefined) : running);
      if (current === handle) current = undefined;
    };
    const handle: FaultWorker = {
      name: `worker ${workers.length + 1}`,
      started,
      kill: () => stop(true),
      drain: () => stop(false),
    };
    workers.push(handle);
    current = handle;
    return handle;
  }

  const faults: FaultWorkers = {
    app: undefined as unknown as FastifyInstance,
    taskQueue,
    get current() {
      return current;
    },
    workers,
    start,
    async replace() {
      await current?.kill();
      return start();
    },
    crashAfter(activity, when = () => true) {
      return new Promise<void>((crashed) => crashes.set(activity, { when, crashed }));
    },
  };

  beforeAll(async () => {
    connection = await NativeConnection.connect({ address: inject('temporalAddress') });
    faults.app = await buildApp({
      integrations: stack.integrations,
      sql: stack.sql,
      temporal: { client: stack.client, taskQueue },
      verifyToken: createTokenVerifier(await resolveTokenConfig(stack.sql, {})),
      rateLimit: { limit: 0, windowSeconds: 60 },
    });
    await faults.app.ready();
    await start();
  });
  afterAll(async () => {
    await faults.app?.close();
    await current?.drain();
    await connection?.close();
  });
  return faults;
}
