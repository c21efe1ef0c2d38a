/**
 * A browser's own transitions of its step (docs/decisions/046-browser-transitions-in-postgres.md):
 * the claim, the result and the release are guarded SQL transactions the API commits and answers
 * itself. No browser waits on a workflow task: the step's workflow, which owns the lease timer, is
 * told afterwards (a signal sent after the answer, or the sweeper's when that signal was lost;
 * `signal_due_at` marks the change until the workflow has read it). Person-side transitions stay
 * Updates of the workflow; their handlers run their transactions from here too, through the step's
 * local activities (activities/pnet/steps.ts): retryFailedStep, approveWaitingStep,
 * rejectWaitingStep, cancelWaitingStep, and missStepWindow at the window's deadline. This file holds
 * the transactions; the use cases that call the browser's and tell the workflow after their commit
 * are claimNextStep, reportStepResult and releaseStepClaim (services/pnet/claim-next-step.ts,
 * report-step-result.ts, release-step-claim.ts).
 */
import { commitWith, commitWithAll, transaction, type FinalStatement, type Sql } from '../../db/sql.js';
import { ApiError, notFound, unauthenticated } from '../../domain/shared/errors.js';
import type { BrowserStep, StepErrorCode, StoredStepStatus } from '../../domain/pnet/steps.js';
import { decideAtRest, decideLapse, decideLease, decideSettle, type SettleRecord } from '../../domain/pnet/settle.js';
import type { SettleReport, StepTransitionResult } from '../../domain/pnet/agent.js';
import { recordPnetRead, recordsPnetRead } from '../../store/inbox/messages.js';
import { recordCheck } from '../../store/pnet/checks.js';
import { pickClaimCandidate, type ClaimCandidate } from '../../store/pnet/check-ins.js';
import { holdAtCheckpoint } from '../../store/pnet/sender-account.js';
import {
  approveWaiting,
  cancelWaiting,
  claim,
  conflict,
  countUsageAgain,
  failMissedWindow,
  failureOf,
  findStep,
  holdEnd,
  holdStepCredits,
  lockBrowserStep,
  lockClaimedStep,
  lockStep,
  markStepActed,
  recordLapse,
  recordResult,
  recordResultStatement,
  refusal,
  rejectWaiting,
  requeueFailed,
  requeueReleased,
  resumeEnabledOf,
  returnUsageUnit,
  returnUsageUnitStatement,
  stepHoldEnd,
  toBrowserStep,
  transition,
  type ClaimInput,
  type ReportingBrowser,
  type StepRow,
} from '../../store/pnet/steps.js';

/** Hands the step to the browser's session (the claim route's transaction, operationId `agentClaim`): account locked, one running step, cap and gap, credit hold and budget unit. */
export function claimStep(
  sql: Sql,
  input: ClaimInput,
  random: () => number = Math.random,
): Promise<StepTransitionResult> {
  return claim(sql, input, random);
}

/**
 * The step a browser's claim would take (pickClaimCandidate), after lapsing a running claim of the
 * account whose lease timer is overdue: the same guarded lapse the timer runs, so whichever comes
 * first wins and the other changes nothing. A browser that goes silent while its worker is down, or
 * whose claim's workflow was never told, then blocks its account only until the next claim asks,
 * not until a worker catches up. `lapsed` is the step to tell its workflow about (claimNextStep does).
 */
export async function pickClaim(
  sql: Sql,
  accountId: string,
  request: { browser_id: string; verify_first: boolean; unmetered_only: boolean },
): Promise<ClaimCandidate & { lapsed?: StepRow }> {
  const pick = await pickClaimCandidate(sql, accountId, request);
  if (!pick.overdue) return pick;
  const look = await expireClaimAt(sql, {
    stepId: pick.overdue.id,
    claimedAt: pick.overdue.claimed_at!.toISOString(),
    now: new Date(),
    tell: true,
  });
  const again = await pickClaimCandidate(sql, accountId, request);
  return look.status === 'claimed' ? again : { ...again, lapsed: pick.overdue };
}

/** A settle's answer, with the step's row as it was locked (reportStepResult tells its workflow and wakes what waits on it). */
export type SettleAnswer = StepTransitionResult & { locked: StepRow };

/**
 * Settles the current claim with the browser's result: decided by decideSettle
 * (domain/pnet/settle.ts) from the step locked here, applied in this one transaction. With
 * `browser` (reportStepResult, services/pnet/report-step-result.ts) the lock is also the route's
 * check: a step of another account is 404, a replaced connection token 401, and a step already at
 * rest answers as the result route (operationId `reportStepResult`) documents: the same result
 * again is 200, a success for a step that failed marks that it acted (a retry checks first) and is
 * 409 like any other.
 */
export async function settleStep(
  sql: Sql,
  { stepId, report, browser }: { stepId: string; report: SettleReport; browser?: ReportingBrowser },
): Promise<SettleAnswer> {
  const answer = await transaction(
    sql,
    async (tx): Promise<SettleAnswer | { refused: string } | FinalStatement<SettleAnswer>> => {
      let locked: StepRow | undefined;
      if (browser) {
        const mine = await lockBrowserStep(tx, stepId, browser);
        if (!mine) throw notFound('Step');
        if (!mine.token_current) throw unauthenticated();
        const atRest = decideAtRest(mine, report);
        if (atRest) {
          // Nothing written, unless it acted after all: that mark commits, and the refusal follows it.
          if (atRest.markActed) await markStepActed(tx, stepId);
          return { refused: atRest.message };
        }
        locked = mine;
      } else {
        locked = await lockStep(tx, stepId);
      }
      const decision = decideSettle(locked, report);
      if (decision.kind === 'refuse') throw failureOf(decision);
      const step = locked!;
      // The same result again (a request retried after the first one committed): the record as it stands.
      if (decision.kind === 'same_result') return { step: toBrowserStep(step), checkpoint: false, locked: step };
      const answer = (settled: StepRow): SettleAnswer => ({
        step: toBrowserStep(settled),
        checkpoint: decision.checkpoint,
        locked: step,
      });
      // In this order, under the step's row lock; the hold's statement last, with the COMMIT.
      const unit = decision.returnUsageUnit ? returnUsageUnitStatement(tx, step) : null;
      const hold = decision.credits === 'none' ? null : holdEnd(tx, step.credit_hold_id!, decision.credits);
      if (!writesMore(decision, step, report)) {
        // Most results: the record, the unit and the hold go out with the COMMIT, one round trip.
        const writes = [
          recordResultStatement(tx, stepId, report, decision.acted),
          ...(unit ? [unit] : []),
          ...(hold ? [hold] : []),
        ];
        return commitWithAll(writes, ([recorded]) => answer(recorded![0] as StepRow));
      }
      // The rest write what they read first (a failure's event, a check, a read's conversations, a
      // checkpoint's hold, a recount), one statement after another.
      const settled = await recordResult(tx, stepId, report, decision.acted);
      if (unit) await unit;
      if (decision.recordCheck) await recordCheck(tx, step, report);
      // A read that found conversations records them in the unified inbox.
      if (decision.recordRead) await recordPnetRead(tx, step, report.outcome);
      if (decision.holdAtCheckpoint) await holdAtCheckpoint(tx, step.account_id);
      // A lapsed read gave its unit back when it was requeued; it ran after all, so it counts.
      if (decision.countUsageAgain) await countUsageAgain(tx, stepId);
      return hold ? commitWith(hold, () => answer(settled)) : answer(settled);
    },
  );
  if ('refused' in answer) throw new ApiError('conflict', answer.refused);
  return answer;
}

/** Whether a settle writes more than its record, its unit and its hold (see settleStep). */
function writesMore(decision: SettleRecord, step: StepRow, report: SettleReport): boolean {
  return (
    report.status === 'failed' ||
    decision.recordCheck ||
    (decision.recordRead && recordsPnetRead(step.kind)) ||
    decision.holdAtCheckpoint ||
    decision.countUsageAgain
  );
}

/**
 * A step of the calling browser's own account, read for the routes that act on the running step
 * (commit, attempts, running wait) and for releaseStepClaim; a step of any other account, or one
 * still awaiting approval (never a browser's), answers 404.
 */
export async function accountStep(
  sql: Sql,
  browser: { workspaceId: string; accountId: string | null },
  stepId: string,
): Promise<StepRow & { status: Exclude<StoredStepStatus, 'awaiting_approval'> }> {
  const step = await findStep(sql, stepId, browser.workspaceId);
  if (!step || step.account_id !== browser.accountId || step.status === 'awaiting_approval') throw notFound('Step');
  return step as StepRow & { status: Exclude<StoredStepStatus, 'awaiting_approval'> };
}

/**
 * The browser gives its claim back (it verified the action is absent, or the page to reopen is
 * paused): the step goes back in line and the usage unit is returned; it counts for nothing.
 */
export function releaseClaim(
  sql: Sql,
  { stepId, claimedAt }: { stepId: string; claimedAt: string },
): Promise<{ step: BrowserStep }> {
  return sql.begin(async (tx) => {
    const step = await lockClaimedStep(tx, stepId, claimedAt);
    if (!step) throw conflict('The step is not claimed under that claim any more.');
    await returnUsageUnit(tx, step);
    return { step: toBrowserStep(await requeueReleased(tx, stepId)) };
  });
}

export interface ClaimLook {
  status: StoredStepStatus;
  errorCode?: StepErrorCode | null;
  /** The claim lives on (its running browser renewed it): when its lease now ends. */
  leaseUntil?: string;
}

/**
 * A claim whose lease may have ended, looked at `now`. A claim its running browser renewed since
 * (`lease_renewed_at`, written by check-ins) lives on: the answer is `claimed` with the lease's new
 * end. Else it lapses: a housekeeping read goes back in line (it acted on nothing); anything else
 * may have acted: with resume on it comes back `resuming` (handed only to a browser that looks
 * first), else it fails with claim_expired for a person to retry; the third cut-off ends it as
 * interrupted_repeatedly. A failure returns the credit hold. Guarded by the claim: a claim settled,
 * released or claimed again since answers where the step is. The step's lease timer calls it, and
 * the sweeper for a claim whose timer is late (`tell` then marks the change for the workflow).
 */
export function expireClaimAt(
  sql: Sql,
  { stepId, claimedAt, now, tell = false }: { stepId: string; claimedAt: string; now: Date; tell?: boolean },
): Promise<ClaimLook> {
  return transaction(sql, async (tx) => {
    const step = await lockClaimedStep(tx, stepId, claimedAt);
    if (!step) return { status: (await findStep(tx, stepId))?.status ?? 'failed' };
    const lease = decideLease({ claimed_at: step.claimed_at!, lease_renewed_at: step.lease_renewed_at }, now);
    if (lease.kind === 'lives') return { status: 'claimed' as const, leaseUntil: lease.leaseUntil.toISOString() };
    // Read only once the lease has lapsed: a renewed claim costs the timer one statement.
    const lapse = decideLapse(step, await resumeEnabledOf(tx, step.account_id));
    await recordLapse(tx, stepId, lapse, tell);
    // A read requeued acted on nothing; a step that may have acted keeps its unit spent.
    if (lapse.returnUsageUnit) await returnUsageUnit(tx, step);
    const answer: ClaimLook = { status: lapse.status, errorCode: lapse.errorCode };
    return lapse.credits === 'release'
      ? commitWith(holdEnd(tx, step.credit_hold_id!, 'release'), () => answer)
      : answer;
  });
}

// ---------------------------------------------------------------------------------------------
// Person-side transitions: the transactions of the step workflow's Updates and of its window's
// deadline (workflows/pnet/browser-step.ts runs them as local activities, one at a time).

/**
 * Puts a failed step back in line. One that may have acted (it said so late, or it was cut
 * off mid-run) comes back `resuming`, handed only to a browser that looks before acting, so
 * a retry never sends twice; a read, or a failure known to have done nothing, is queued.
 */
export async function retryFailedStep(sql: Sql, { stepId }: { stepId: string }): Promise<StepTransitionResult> {
  return sql.begin(async (tx) => {
    const row = await requeueFailed(tx, stepId);
    if (!row)
      throw conflict(
        `The step is ${(await findStep(tx, stepId))?.status ?? 'gone'}; only a failed step can be retried.`,
      );
    row.credit_hold_id = await holdStepCredits(tx, row);
    return { step: toBrowserStep(row) };
  });
}

/**
 * The step's deadline passed while it still waited: it fails missed_window, its credits returned.
 * This and the person-side transitions below are one compare-and-set on status each: no lock
 * is taken first, so the status check must be the statement's own (a claim or a settle racing
 * it wins or loses in SQL, never both).
 */
export async function missStepWindow(
  sql: Sql,
  { stepId }: { stepId: string },
): Promise<{ status: StoredStepStatus; errorCode?: StepErrorCode | null }> {
  return transaction(sql, async (tx) => {
    const row = await failMissedWindow(tx, stepId);
    if (!row) return { status: (await findStep(tx, stepId))?.status as StoredStepStatus };
    const answer = { status: row.status, errorCode: row.error_code };
    const end = stepHoldEnd(tx, row, false);
    return end ? commitWith(end, () => answer) : answer;
  });
}

/** A person approves a step awaiting approval: it goes in line with its credits held. */
export async function approveWaitingStep(sql: Sql, { stepId }: { stepId: string }) {
  return sql.begin((tx) =>
    transition(tx, stepId, 'approved', async (db) => {
      const rows = await approveWaiting(db, stepId);
      if (rows[0]) rows[0].credit_hold_id = await holdStepCredits(db, rows[0]);
      return rows;
    }),
  );
}

/** A person rejects a step awaiting approval, with their reason. */
export async function rejectWaitingStep(sql: Sql, { stepId, reason }: { stepId: string; reason: string | null }) {
  return transition(sql, stepId, 'rejected', (db) => rejectWaiting(db, stepId, reason));
}

/** A running step is the browser's until it reports: only a waiting step can be cancelled. */
export async function cancelWaitingStep(
  sql: Sql,
  { stepId, errorCode = 'cancelled' }: { stepId: string; errorCode?: 'cancelled' | 'sender_changed' },
): Promise<StepTransitionResult> {
  return transaction(sql, async (tx) => {
    const row = await cancelWaiting(tx, stepId, errorCode);
    if (!row) throw refusal(await findStep(tx, stepId), 'cancelled');
    const answer: StepTransitionResult = { step: toBrowserStep(row) };
    const end = stepHoldEnd(tx, row, false);
    return end ? commitWith(end, () => answer) : answer;
  });
}
