import { transaction, type Sql } from '../../db/sql.js';
import type { BrowserStep, StepErrorCode, StoredStepStatus } from '../../domain/pnet/steps.js';
import { housekeepingKinds } from '../../domain/pnet/limits.js';
import { decideLapse, decideLease, decideSettle } from '../../domain/pnet/settle.js';
import { recordCheck } from '../../store/pnet/checks.js';
import { recordPnetRead } from '../../store/inbox/messages.js';
import { holdAtCheckpoint } from '../../store/pnet/sender-account.js';
import type { SettleReport, StepTransitionResult } from '../../domain/pnet/agent.js';
import {
  ClaimInput,
  claim,
  StepRow,
  toBrowserStep,
  conflict,
  countUsageAgain,
  endStepHold,
  failureOf,
  lockClaim,
  lockStep,
  recordLapse,
  recordResult,
  resumeEnabledOf,
  returnUsageUnit,
  settleStepCreditsAndCommit,
  mayHaveActedCodes,
  findStep,
  holdStepCredits,
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
      await after(input.stepId, (result as { step?: BrowserStep } | undefined)?.step);
      return result;
    };
  }
  return wrapped;
}

export function createPnetStepActivities({ sql, random = Math.random }: { sql: Sql; random?: () => number }) {
  return {
    claimStep: (input: ClaimInput) => claim(sql, input, random),

    /**
     * Settles the current claim with the browser's result (3.1): decided by decideSettle
     * (domain/pnet/settle.ts) from the step locked here, applied in this one transaction.
     */
    async settleStep({ stepId, report }: { stepId: string; report: SettleReport }): Promise<StepTransitionResult> {
      return transaction(sql, async (tx, commitWith) => {
        const locked = await lockStep(tx, stepId);
        const decision = decideSettle(locked, report);
        if (decision.kind === 'refuse') throw failureOf(decision);
        const step = locked!;
        // The same result again (an attempt retried after the first one committed): the record as it stands.
        if (decision.kind === 'same_result') return { step: toBrowserStep(step), checkpoint: false };
        // One statement after another, in this order, under the step's row lock; the hold's
        // statement last, sent with the COMMIT (endStepHold).
        const settled = await recordResult(tx, stepId, report, decision.acted);
        if (decision.returnUsageUnit) await returnUsageUnit(tx, step);
        if (decision.recordCheck) await recordCheck(tx, step, report);
        // A read that found conversations records them in the unified inbox.
        if (decision.recordRead) await recordPnetRead(tx, step, report.outcome);
        if (decision.holdAtCheckpoint) await holdAtCheckpoint(tx, step.account_id);
        // A lapsed read gave its unit back when it was requeued; it ran after all, so it counts.
        if (decision.countUsageAgain) await countUsageAgain(tx, stepId);
        if (decision.credits !== 'none') await endStepHold(tx, commitWith, step.credit_hold_id!, decision.credits);
        return { step: toBrowserStep(settled), checkpoint: decision.checkpoint };
      });
    },

    /**
     * The browser gives its claim back (it verified the action is absent, or the page to reopen is
     * paused): the step goes back in line and the usage unit is returned; it counts for nothing.
     */
    async releaseClaim({ stepId, claimedAt }: { stepId: string; claimedAt: string }): Promise<{ step: BrowserStep }> {
      return sql.begin(async (tx) => {
        const [step] = await tx<StepRow[]>`
          select * from browser_steps where id = ${stepId} and status = 'claimed' and claimed_at = ${claimedAt} for update`;
        if (!step) throw conflict('The step is not claimed under that claim any more.');
        await returnUsageUnit(tx, step);
        const [released] = await tx<StepRow[]>`
          update browser_steps set status = 'queued', queued_at = now(), usage_date = null, usage_kind = null, updated_at = now()
          where id = ${stepId} returning *`;
        return { step: toBrowserStep(released!) };
      });
    },

    /**
     * Puts a failed step back in line. One that may have acted (it said so late, or it was cut
     * off mid-run) comes back `resuming`, handed only to a browser that looks before acting, so
     * a retry never sends twice; a read, or a failure known to have done nothing, is queued.
     */
    async retryStep({ stepId }: { stepId: string }): Promise<StepTransitionResult> {
      return sql.begin(async (tx) => {
        // Decided inside the one statement that writes, on purpose: nothing locks the row first,
        // and a late "it acted after all" (the API's acted_at write) may land at any moment. The
        // UPDATE reads acted_at under its own row lock (re-read after waiting for a concurrent
        // writer), so a step that acted always comes back resuming; a read-then-write would race.
        const [row] = await tx<StepRow[]>`
          update browser_steps set
            status = case when kind in ${tx([...housekeepingKinds])} then 'queued'
                          when acted_at is not null or error_code is null or error_code in ${tx([...mayHaveActedCodes])} then 'resuming'
                          else 'queued' end,
            error_code = null, error_message = null, outcome = null, finished_at = null, duration_ms = null,
            cut_offs = 0, credit_round = credit_round + 1, credit_hold_id = null,
            held = pnet_step_held(workspace_id, contact_key, sequence_id),
            queued_at = now(), updated_at = now()
          where id = ${stepId} and status = 'failed' returning *`;
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
     */
    /**
     * The lease timer fired. A claim its running browser renewed since (`lease_renewed_at`, written
     * by check-ins) lives on: the answer is `claimed` with the lease's new end, and the workflow
     * sleeps to it. `now` is the workflow's clock (histories before it passed none).
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
      return transaction(sql, async (tx, commitWith) => {
        // Guarded by the claim: a claim settled, released or claimed again since answers where the step is.
        const step = await lockClaim(tx, stepId, claimedAt);
        if (!step) return { status: ((await findStep(tx, stepId))?.status ?? 'failed') as StoredStepStatus };
        const lease = decideLease({ claimed_at: step.claimed_at!, lease_renewed_at: step.lease_renewed_at }, now ? new Date(now) : new Date());
        if (lease.kind === 'lives') return { status: 'claimed', leaseUntil: lease.leaseUntil.toISOString() };
        // Read only once the lease has lapsed: a renewed claim costs the timer one statement.
        const lapse = decideLapse(step, await resumeEnabledOf(tx, step.account_id));
        await recordLapse(tx, stepId, lapse);
        // A read requeued acted on nothing; a step that may have acted keeps its unit spent.
        if (lapse.returnUsageUnit) await returnUsageUnit(tx, step);
        if (lapse.credits === 'release') await endStepHold(tx, commitWith, step.credit_hold_id!, 'release');
        return { status: lapse.status, errorCode: lapse.errorCode };
      });
    },

    /**
     * The step's deadline passed while it still waited: it fails missed_window, its credits returned.
     * This and the person-side transitions below are one compare-and-set on status each: no lock
     * is taken first, so the status check must be the statement's own (a claim or a settle racing
     * it wins or loses in SQL, never both).
     */
    async missWindow({ stepId }: { stepId: string }): Promise<{ status: StoredStepStatus; errorCode?: StepErrorCode | null }> {
      return transaction(sql, async (tx, commitWith) => {
        const [row] = await tx<StepRow[]>`
          update browser_steps set status = 'failed', error_code = 'missed_window', finished_at = now(), updated_at = now()
          where id = ${stepId} and status in ('awaiting_approval', 'queued', 'resuming') returning *`;
        if (row) await settleStepCreditsAndCommit(tx, commitWith, row, false);
        if (row) return { status: row.status, errorCode: row.error_code };
        return { status: (await findStep(tx, stepId))?.status as StoredStepStatus };
      });
    },

    async approveStep({ stepId }: { stepId: string }) {
      return sql.begin((tx) =>
        transition(tx, stepId, 'approved', async (db) => {
          const rows = await db<StepRow[]>`
            update browser_steps set status = 'queued', queued_at = now(), updated_at = now()
            where id = ${stepId} and status = 'awaiting_approval' returning *`;
          if (rows[0]) rows[0].credit_hold_id = await holdStepCredits(db, rows[0]);
          return rows;
        }),
      );
    },
    async rejectStep({ stepId, reason }: { stepId: string; reason: string | null }) {
      return transition(sql, stepId, 'rejected', (db) => db<StepRow[]>`
        update browser_steps set status = 'rejected', reject_reason = ${reason}, error_message = ${reason},
          finished_at = now(), updated_at = now()
        where id = ${stepId} and status = 'awaiting_approval' returning *`);
    },
    /** A running step is the browser's until it reports: only a waiting step can be cancelled. */
    async cancelStep({ stepId, errorCode = 'cancelled' }: { stepId: string; errorCode?: 'cancelled' | 'sender_changed' }) {
      return transaction(sql, (tx, commitWith) =>
        transition(tx, stepId, 'cancelled', async (db) => {
          const rows = await db<StepRow[]>`
            update browser_steps set status = 'cancelled', error_code = ${errorCode}, finished_at = now(), updated_at = now()
            where id = ${stepId} and status in ('awaiting_approval', 'queued', 'resuming') returning *`;
          if (rows[0]) await settleStepCreditsAndCommit(db, commitWith, rows[0], false);
          return rows;
        }),
      );
    },
  };
}
export type PnetStepActivities = ReturnType<typeof createPnetStepActivities>;
