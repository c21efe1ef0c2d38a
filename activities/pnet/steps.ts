import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { commitWith, transaction, type Sql } from '../../db/sql.js';
import type { BrowserStep, StepErrorCode, StoredStepStatus } from '../../domain/pnet/steps.js';
import { terminalStatuses } from '../../domain/pnet/settle.js';
import type { StepTransitionResult } from '../../domain/pnet/agent.js';
import { signalStepWorkflow } from '../../services/pnet/browser-step-client.js';
import { expireClaimAt, type ClaimLook } from '../../services/pnet/step-transitions.js';
import {
  approveWaiting,
  cancelWaiting,
  conflict,
  failMissedWindow,
  findStep,
  holdStepCredits,
  iso,
  markSignalsResent,
  overdueClaims,
  refusal,
  rejectWaiting,
  requeueFailed,
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
     * (decision 046): the row's status and current claim, its `signal_due_at` cleared in the same
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
     * The sweeper's turn (workflows/pnet/step-signals.ts), at the sweeper's `now`:
     * - claims whose lease ended more than `graceSeconds` ago are lapsed here, as their own lease
     *   timer would (expireClaimAt), because that timer is late (its worker was down and is
     *   catching up) or was never set (the claim's signal was lost);
     * - then every step's workflow that has not read a change for `graceSeconds` (its signal lost
     *   with its API process, or Temporal unreachable), and every one lapsed here, is signalled,
     *   started if it is not running. Each is marked anew, so a workflow slow to read is signalled
     *   once per grace, not on every turn.
     * Answers how many steps it lapsed or signalled.
     */
    async resendStepSignals({
      graceSeconds,
      limit,
      now,
      taskQueue,
    }: {
      graceSeconds: number;
      limit: number;
      now?: string;
      taskQueue?: string;
    }): Promise<number> {
      const at = now ? new Date(now) : new Date();
      const lapsed: string[] = [];
      for (const claim of await overdueClaims(sql, at, graceSeconds, limit)) {
        const look = await expireClaimAt(sql, {
          stepId: claim.id,
          claimedAt: claim.claimed_at.toISOString(),
          now: at,
          tell: true,
        });
        if (look.status !== 'claimed') lapsed.push(claim.id);
      }
      const due = await stepsWithSignalDue(sql, graceSeconds, limit);
      const told = new Set(due.map((row) => row.id));
      const rows = [
        ...due,
        ...(await Promise.all(lapsed.filter((id) => !told.has(id)).map((id) => findStep(sql, id)))).filter(
          (row) => row !== undefined,
        ),
      ];
      if (rows.length === 0) return 0;
      const { client, info } = Context.current();
      await Promise.all(rows.map((row) => signalStepWorkflow(client, taskQueue ?? info.taskQueue, row)));
      await markSignalsResent(
        sql,
        rows.map((r) => r.id),
      );
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
        if (!row)
          throw conflict(
            `The step is ${(await findStep(tx, stepId))?.status ?? 'gone'}; only a failed step can be retried.`,
          );
        row.credit_hold_id = await holdStepCredits(tx, row);
        return { step: toBrowserStep(row) };
      });
    },

    /** The lease timer fired (services/pnet/step-transitions.ts expireClaimAt); `now` is the workflow's clock. */
    async expireClaim({
      stepId,
      claimedAt,
      now,
    }: {
      stepId: string;
      claimedAt: string;
      now?: string;
    }): Promise<ClaimLook> {
      return expireClaimAt(sql, { stepId, claimedAt, now: now ? new Date(now) : new Date() });
    },

    /**
     * The step's deadline passed while it still waited: it fails missed_window, its credits returned.
     * This and the person-side transitions below are one compare-and-set on status each: no lock
     * is taken first, so the status check must be the statement's own (a claim or a settle racing
     * it wins or loses in SQL, never both).
     */
    async missWindow({
      stepId,
    }: {
      stepId: string;
    }): Promise<{ status: StoredStepStatus; errorCode?: StepErrorCode | null }> {
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
    async cancelStep({
      stepId,
      errorCode = 'cancelled',
    }: {
      stepId: string;
      errorCode?: 'cancelled' | 'sender_changed';
    }): Promise<StepTransitionResult> {
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
