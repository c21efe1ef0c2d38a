import { ApplicationFailure } from '@temporalio/common';
import { transaction, type Sql } from '../../db/sql.js';
import type { BrowserStep, StepErrorCode, StoredStepStatus } from '../../domain/pnet/steps.js';
import { housekeepingKinds, maxCutOffs } from '../../domain/pnet/limits.js';
import { recordCheck } from '../../store/pnet/checks.js';
import { recordPnetRead } from '../../store/inbox/messages.js';
import { holdAtCheckpoint } from '../../store/pnet/sender-account.js';
import { claimLeaseSeconds } from '../../domain/pnet/timing.js';
import { ClaimInput, claim, SettleReport, StepTransitionResult, StepRow, sameResultAgain, toBrowserStep, conflict, returnUsageUnit, settleStepCreditsAndCommit, mayHaveActedCodes, findStep, holdStepCredits, transition } from '../../store/pnet/steps.js';

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
     * Settles the current claim with the browser's result (3.1). A result naming an earlier
     * claim is refused, unless it is a success for a step not settled since (it did run).
     */
    async settleStep({ stepId, report }: { stepId: string; report: SettleReport }): Promise<StepTransitionResult> {
      return transaction(sql, async (tx, commitWith) => {
        const [step] = await tx<StepRow[]>`select * from browser_steps where id = ${stepId} for update`;
        if (!step) throw ApplicationFailure.nonRetryable('Step not found.', 'not_found');
        // The same result again (an attempt retried after the first one committed): the record as it stands.
        if (sameResultAgain(step, report)) return { step: toBrowserStep(step), checkpoint: false };
        const namesCurrentClaim = step.status === 'claimed' && (report.claimed_at === null || Date.parse(report.claimed_at) === step.claimed_at?.getTime());
        const lateSuccess = report.status === 'succeeded' && (step.status === 'queued' || step.status === 'resuming') && step.claimed_at !== null;
        if (!namesCurrentClaim && !lateSuccess) throw conflict(`The step is ${step.status === 'claimed' ? 'claimed again since' : step.status}; this result is no longer current.`);
        const [settled] = await tx<StepRow[]>`
          update browser_steps set status = ${report.status}, finished_at = now(), duration_ms = ${report.duration_ms},
            error_code = ${report.error_code}, error_message = ${report.error_message},
            outcome = ${report.outcome ? tx.json(report.outcome as never) : null},
            acted_at = ${report.status === 'succeeded' ? tx`now()` : tx`acted_at`}, updated_at = now()
          where id = ${stepId} returning *`;
        if (report.status !== 'succeeded' && namesCurrentClaim) await returnUsageUnit(tx, step);
        if (housekeepingKinds.has(step.kind)) await recordCheck(tx, step, report);
        // A read that found conversations records them in the unified inbox.
        if (report.status === 'succeeded') await recordPnetRead(tx, step, report.outcome);
        if (report.error_code === 'blocked_checkpoint' && namesCurrentClaim) await holdAtCheckpoint(tx, step.account_id);
        // A lapsed read gave its unit back when it was requeued; it ran after all, so it counts.
        // A resuming step kept its unit when its claim lapsed (it may have acted): counted once.
        if (lateSuccess && step.status === 'queued' && step.usage_kind) {
          await tx`
            update pnet_usage u set used = u.used + 1 from browser_steps s
            where s.id = ${step.id} and u.account_id = s.account_id and u.local_date = s.usage_date and u.limit_kind = s.usage_kind`;
        }
        await settleStepCreditsAndCommit(tx, commitWith, step, report.status === 'succeeded');
        return { step: toBrowserStep(settled!), checkpoint: report.error_code === 'blocked_checkpoint' };
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
        const [step] = await tx<(StepRow & { lease_renewed_at: Date | null })[]>`
          select * from browser_steps where id = ${stepId} and status = 'claimed' and claimed_at = ${claimedAt} for update`;
        if (!step) return { status: ((await findStep(tx, stepId))?.status ?? 'failed') as StoredStepStatus };
        const renewedAt = Math.max(step.claimed_at!.getTime(), step.lease_renewed_at?.getTime() ?? 0);
        const leaseUntil = renewedAt + claimLeaseSeconds * 1000;
        if (leaseUntil > (now ? Date.parse(now) : Date.now())) return { status: 'claimed', leaseUntil: new Date(leaseUntil).toISOString() };
        const [account] = await tx<{ resume_enabled: boolean }[]>`select resume_enabled from pnet_accounts where id = ${step.account_id}`;
        const cutOffs = step.cut_offs + 1;
        const [status, errorCode]: [StoredStepStatus, StepErrorCode | null] = housekeepingKinds.has(step.kind)
          ? ['queued', null]
          : cutOffs >= maxCutOffs
            ? ['failed', 'interrupted_repeatedly']
            : account?.resume_enabled
              ? ['resuming', null]
              : ['failed', 'claim_expired'];
        const back = status !== 'failed';
        await tx`
          update browser_steps set status = ${status}, error_code = ${errorCode}, cut_offs = ${cutOffs},
            finished_at = ${back ? null : tx`now()`},
            queued_at = ${back ? tx`now()` : tx`queued_at`}, updated_at = now()
          where id = ${stepId}`;
        // A read requeued acted on nothing; a step that may have acted keeps its unit spent.
        if (status === 'queued') await returnUsageUnit(tx, step);
        if (!back) await settleStepCreditsAndCommit(tx, commitWith, step, false);
        return { status, errorCode };
      });
    },

    /** The step's deadline passed while it still waited: it fails missed_window, its credits returned. */
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
