import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { commitWith, transaction, type Sql } from '../../db/sql.js';
import type { BrowserStep, StepErrorCode, StoredStepStatus } from '../../domain/pnet/steps.js';
import { decideLapse, decideLease, terminalStatuses } from '../../domain/pnet/settle.js';
import type { StepTransitionResult } from '../../domain/pnet/agent.js';
import { signalStepWorkflow } from '../../services/pnet/browser-step-client.js';
import {
  approveWaiting,
  cancelWaiting,
  conflict,
  failMissedWindow,
  findStep,
  holdEnd,
  holdStepCredits,
  iso,
  lockClaim,
  markSignalsResent,
  recordLapse,
  refusal,
  rejectWaiting,
  requeueFailed,
  resumeEnabledOf,
  returnUsageUnit,
  stepHoldEnd,
  stepsWithSignalDue,
  takeStepChange,
  toBrowserStep,
  transition,
} from '../../store/pnet/steps.js';

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
  return {
    /**
     * What the step's workflow learns after the API committed a browser's claim, result or release
     * (issue 24): the row's status and current claim, its `signal_due_at` cleared in the same
     * statement. A settled step carries its record, for the wakes of whatever waits on it.
     */
    async readStepChange({ stepId }: { stepId: string }) {
      const row = await takeStepChange(sql, stepId);
      if (!row) throw ApplicationFailure.nonRetryable('Step not found.', 'not_found');
      const settled = terminalStatuses.has(row.status);
      return {
        status: row.status,
        claimedAt: row.status === 'claimed' ? iso(row.claimed_at) : null,
        errorCode: row.error_code,
        ...(settled ? { step: toBrowserStep(row) } : {}),
        wakes: settled,
      };
    },

    /**
     * The sweeper's turn (workflows/pnet/step-signals.ts): signals again, starting it if it is not
     * running, every step's workflow that has not read a change for `graceSeconds`, because its
     * signal was lost with its API process or Temporal was unreachable. Each is marked anew, so a
     * workflow slow to read (its worker down) is signalled once per grace, not on every turn.
     */
    async resendStepSignals({ graceSeconds, limit }: { graceSeconds: number; limit: number }): Promise<number> {
      const rows = await stepsWithSignalDue(sql, graceSeconds, limit);
      if (rows.length === 0) return 0;
      const { client, info } = Context.current();
      await Promise.all(rows.map((row) => signalStepWorkflow(client, info.taskQueue, row)));
      await markSignalsResent(sql, rows.map((r) => r.id));
      return rows.length;
    },

    /**
     * Puts a failed step back in line. One that may have acted (it said so late, or it was cut
     * off mid-run) comes back `resuming`, handed only to a browser that looks before acting, so
     * a retry never sends twice; a read, or a failure known to have done nothing, is queued.
     */
    async retryStep({ stepId }: { stepId: string }): Promise<StepTransitionResult> {
      return sql.begin(async (tx) => {
        const row = await requeueFailed(tx, stepId);
        if (!row) throw conflict(`The step is ${(await findStep(tx, stepId))?.status ?? 'gone'}; only a failed step can be retried.`);
        row.credit_hold_id = await holdStepCredits(tx, row);
        return { step: toBrowserStep(row) };
      });
    },

    /**
     * A claim whose browser went silent. A housekeeping read goes back in line (it acted on
     * nothing). Anything else may have acted: with resume on it comes back `resuming` (handed only
     * to a browser that looks first), else it fails with claim_expired for a person to retry; the
     * third cut-off ends it as interrupted_repeatedly. A failure returns the credit hold.
     *
     * The lease timer fired. A claim its running browser renewed since (`lease_renewed_at`, written
     * by check-ins) lives on: the answer is `claimed` with the lease's new end, and the workflow
     * sleeps to it. `now` is the workflow's clock.
     */
    async expireClaim({
      stepId,
      claimedAt,
      now,
    }: {
      stepId: string;
      claimedAt: string;
      now?: string;
    }): Promise<{ status: StoredStepStatus; errorCode?: StepErrorCode | null; leaseUntil?: string }> {
      return transaction(sql, async (tx) => {
        // Guarded by the claim: a claim settled, released or claimed again since answers where the step is.
        const step = await lockClaim(tx, stepId, claimedAt);
        if (!step) return { status: ((await findStep(tx, stepId))?.status ?? 'failed') as StoredStepStatus };
        const lease = decideLease({ claimed_at: step.claimed_at!, lease_renewed_at: step.lease_renewed_at }, now ? new Date(now) : new Date());
        if (lease.kind === 'lives') return { status: 'claimed' as const, leaseUntil: lease.leaseUntil.toISOString() };
        // Read only once the lease has lapsed: a renewed claim costs the timer one statement.
        const lapse = decideLapse(step, await resumeEnabledOf(tx, step.account_id));
        await recordLapse(tx, stepId, lapse);
        // A read requeued acted on nothing; a step that may have acted keeps its unit spent.
        if (lapse.returnUsageUnit) await returnUsageUnit(tx, step);
        const answer = { status: lapse.status, errorCode: lapse.errorCode };
        return lapse.credits === 'release' ? commitWith(holdEnd(tx, step.credit_hold_id!, 'release'), () => answer) : answer;
      });
    },

    /**
     * The step's deadline passed while it still waited: it fails missed_window, its credits returned.
     * This and the person-side transitions below are one compare-and-set on status each: no lock
     * is taken first, so the status check must be the statement's own (a claim or a settle racing
     * it wins or loses in SQL, never both).
     */
    async missWindow({ stepId }: { stepId: string }): Promise<{ status: StoredStepStatus; errorCode?: StepErrorCode | null }> {
      return transaction(sql, async (tx) => {
        const row = await failMissedWindow(tx, stepId);
        if (!row) return { status: (await findStep(tx, stepId))?.status as StoredStepStatus };
        const answer = { status: row.status, errorCode: row.error_code };
        const end = stepHoldEnd(tx, row, false);
        return end ? commitWith(end, () => answer) : answer;
      });
    },

    async approveStep({ stepId }: { stepId: string }) {
      return sql.begin((tx) =>
        transition(tx, stepId, 'approved', async (db) => {
          const rows = await approveWaiting(db, stepId);
          if (rows[0]) rows[0].credit_hold_id = await holdStepCredits(db, rows[0]);
          return rows;
        }),
      );
    },
    async rejectStep({ stepId, reason }: { stepId: string; reason: string | null }) {
      return transition(sql, stepId, 'rejected', (db) => rejectWaiting(db, stepId, reason));
    },
    /** A running step is the browser's until it reports: only a waiting step can be cancelled. */
    async cancelStep({ stepId, errorCode = 'cancelled' }: { stepId: string; errorCode?: 'cancelled' | 'sender_changed' }): Promise<StepTransitionResult> {
      return transaction(sql, async (tx) => {
        const row = await cancelWaiting(tx, stepId, errorCode);
        if (!row) throw refusal(await findStep(tx, stepId), 'cancelled');
        const answer: StepTransitionResult = { step: toBrowserStep(row) };
        const end = stepHoldEnd(tx, row, false);
        return end ? commitWith(end, () => answer) : answer;
      });
    },
  };
}
export type PnetStepActivities = ReturnType<typeof createPnetStepActivities>;
