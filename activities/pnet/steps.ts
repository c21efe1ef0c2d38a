/**
 * The step workflows' local activities (workflows/pnet/browser-step.ts, step-signals.ts): thin doors
 * to the person-side transactions of services/pnet/step-transitions.ts and the change reads and
 * resends of services/pnet/step-signals.ts. `now`, where given, is the workflow's clock.
 */
import { Context } from '@temporalio/activity';
import type { Sql } from '../../db/sql.js';
import type { BrowserStep } from '../../domain/pnet/steps.js';
import type { TemporalHandle } from '../../services/deps.js';
import { readStepChange, resendStepSignals } from '../../services/pnet/step-signals.js';
import {
  approveWaitingStep,
  cancelWaitingStep,
  expireClaimAt,
  missStepWindow,
  rejectWaitingStep,
  retryFailedStep,
} from '../../services/pnet/step-transitions.js';
import { withActivityFailures } from '../shared/failures.js';

/** The step-signal sweeper's turn (workflows/pnet/step-signals.ts); `taskQueue` is the steps' queue. */
interface SweepTurn {
  graceSeconds: number;
  limit: number;
  now?: string;
  taskQueue?: string;
}

const clock = (now?: string) => (now ? new Date(now) : new Date());

/** The sweeper signals with this activity's client, on the steps' task queue it names (else its own). */
function activityTemporal(taskQueue?: string): TemporalHandle {
  const { client, info } = Context.current();
  return { client, taskQueue: taskQueue ?? info.taskQueue };
}

/**
 * Wraps the named step transitions so `after` runs once each has committed, with the step's id and
 * the record it answered (undefined for a transition that answers only a status). For the wakes of
 * whatever waits on a step; `after` must not throw.
 */
export function afterStepTransitions<T extends object>(
  activities: T,
  names: string[],
  after: (stepId: string, step: BrowserStep | undefined) => Promise<void>,
): T {
  const wrapped = { ...activities };
  for (const name of names) {
    const inner = (activities as Record<string, (input: { stepId: string }) => Promise<unknown>>)[name];
    if (!inner) continue;
    (wrapped as Record<string, unknown>)[name] = async (input: { stepId: string }) => {
      const result = await inner(input);
      // A read of a change that did not settle the step (a claim, a release) wakes nothing.
      if ((result as { wakes?: boolean } | undefined)?.wakes === false) return result;
      await after(input.stepId, (result as { step?: BrowserStep } | undefined)?.step);
      return result;
    };
  }
  return wrapped;
}

export function createPnetStepActivities({ sql }: { sql: Sql }) {
  return withActivityFailures({
    readStepChange: (input: { stepId: string }) => readStepChange({ sql }, input),
    resendStepSignals: ({ now, taskQueue, ...turn }: SweepTurn) =>
      resendStepSignals({ sql, temporal: activityTemporal(taskQueue) }, { ...turn, at: clock(now) }),
    retryStep: (input: { stepId: string }) => retryFailedStep(sql, input),
    /** The lease timer fired (expireClaimAt). */
    expireClaim: ({ now, ...claim }: { stepId: string; claimedAt: string; now?: string }) =>
      expireClaimAt(sql, { ...claim, now: clock(now) }),
    missWindow: (input: { stepId: string }) => missStepWindow(sql, input),
    approveStep: (input: { stepId: string }) => approveWaitingStep(sql, input),
    rejectStep: (input: { stepId: string; reason: string | null }) => rejectWaitingStep(sql, input),
    cancelStep: (input: { stepId: string; errorCode?: 'cancelled' | 'sender_changed' }) =>
      cancelWaitingStep(sql, input),
  });
}
export type PnetStepActivities = ReturnType<typeof createPnetStepActivities>;
