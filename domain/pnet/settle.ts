/**
 * A browser step's decisions (interface spec 3.1 Browser action step status), pure: what a result report, a claim or a lapsed lease does to
 * a step, read from the snapshot its transaction locked. store/pnet/steps.ts applies each decision
 * with small named statements, in the order the transaction needs (see the comments there);
 * nothing here does I/O, so every branch is a unit test (test/unit/step-settle.test.ts).
 *
 * decideSettle(step, report), a browser's result for a step:
 *
 * | Step                                   | Report                                  | Decision |
 * |----------------------------------------|-----------------------------------------|----------|
 * | none                                   | any                                     | refuse not_found |
 * | terminal (not cancelled), same status, claim and error code | the same result again | same_result: answer the record as it stands |
 * | claimed, the claim the report names (or it names none) | succeeded                | record succeeded, acted now; charge the hold |
 * | claimed, that claim                    | failed / skipped                        | record it; give the usage unit back; release the hold |
 * | claimed, that claim                    | failed blocked_checkpoint               | as failed, and hold the account at a checkpoint |
 * | queued or resuming after a claim (it lapsed) | succeeded (late)                  | record succeeded (it ran); charge the hold; a requeued `queued` read counts its unit again (it gave it back), a `resuming` step kept its unit |
 * | claimed under another claim            | any                                     | refuse conflict "claimed again since" |
 * | anything else (queued/resuming and not succeeded, never claimed, terminal with another result, cancelled, awaiting approval) | any | refuse conflict |
 *
 * Every `record` also: a housekeeping read records its check (store/pnet/checks.ts); a success's
 * outcome goes to the inbox (a read that found conversations); `checkpoint` on the answer is set
 * whenever the report says blocked_checkpoint (the API then wakes the account's workflow).
 *
 * decideClaim(snapshot, request) then, for metered work, decideMeteredGate(snapshot, now),
 * decideUsageUnit(ceiling, …, now), dailyCeilingRefusal and nextMeteredAt: the guarded claim.
 * decideLease(claim, now) and decideLapse(step, resumeEnabled): the lease timer.
 */
import type { Usage } from './accounts.js';
import type { AgentVerification } from './agent.js';
import { housekeepingKinds, limitKindOf, maxCutOffs, messageKinds, type ActionKind, type LimitKind } from './limits.js';
import { workingWindow } from './pacing.js';
import type { WorkingHours } from './sender-profiles.js';
import { recordStatus, type StepErrorCode, type StoredStepStatus } from './steps.js';
import { claimLeaseSeconds } from './timing.js';
import { formatLocalDate, localDate } from '../shared/zoned-time.js';

/** Failures that may have come after the step acted: a retry of one checks before acting. */
export const mayHaveActedCodes: ReadonlySet<StepErrorCode> = new Set([
  'timed_out',
  'tab_lost',
  'agent_restarted',
  'navigation_failed',
  'linkedin_error',
  'claim_expired',
  'interrupted_repeatedly',
]);

export const terminalStatuses: ReadonlySet<StoredStepStatus> = new Set([
  'succeeded',
  'failed',
  'rejected',
  'skipped',
  'cancelled',
]);

/** A refusal: nothing is written, and the caller answers `code` (the API maps conflict to 409). */
export interface StepRefusal {
  kind: 'refuse';
  code: 'not_found' | 'conflict';
  message: string;
}

const refuse = (message: string, code: StepRefusal['code'] = 'conflict'): StepRefusal => ({
  kind: 'refuse',
  code,
  message,
});

// ---------------------------------------------------------------------------------------------
// Settle: a browser's result report

/** The step as the settle reads it, under its row lock. */
export interface SettleSnapshot {
  status: StoredStepStatus;
  kind: ActionKind;
  claimed_at: Date | null;
  error_code: StepErrorCode | null;
  /** The ceiling the claim consumed a unit of; null for unmetered work or after a release. */
  usage_kind: string | null;
  credit_hold_id: string | null;
}

/** What of a result report decides (the rest is recorded as it came). */
export interface SettleFacts {
  status: 'succeeded' | 'failed' | 'skipped';
  claimed_at: string | null;
  error_code: StepErrorCode | null;
}

export interface SettleRecord {
  kind: 'record';
  /** The status to record, with the report's duration, code, message and outcome. */
  status: SettleFacts['status'];
  /** The claim the result settles: the current one, or one that lapsed (a late success). */
  claim: 'current' | 'lapsed';
  /** acted_at becomes now (a success); otherwise it stays as it was. */
  acted: boolean;
  /** A failure or skip of the current claim acted on nothing: its usage unit goes back. */
  returnUsageUnit: boolean;
  /** A read requeued when its claim lapsed gave its unit back; it ran after all, so it counts again. */
  countUsageAgain: boolean;
  /** A housekeeping read records the account's check (inbox read, connections read). */
  recordCheck: boolean;
  /** A success's outcome goes to the unified inbox (reads that found conversations). */
  recordRead: boolean;
  holdAtCheckpoint: boolean;
  /** The round's credit hold: charged once for a success, returned for anything else. */
  credits: 'charge' | 'release' | 'none';
  /** Answered to the caller: the account is (reported) at a checkpoint. */
  checkpoint: boolean;
}

export type SettleDecision = StepRefusal | { kind: 'same_result' } | SettleRecord;

const namesClaim = (step: Pick<SettleSnapshot, 'claimed_at'>, report: Pick<SettleFacts, 'claimed_at'>) =>
  report.claimed_at === null || Date.parse(report.claimed_at) === step.claimed_at?.getTime();

/**
 * The same result again for a settled step (a duplicate post, or an attempt retried after the
 * first one committed): answered with the record as it stands. Same status, claim and failure
 * code: a step the service gave up on (claim_expired) is `failed` too, and a browser's late
 * failure for it is another result, refused.
 */
export function sameResultAgain(
  step: Pick<SettleSnapshot, 'status' | 'claimed_at' | 'error_code'>,
  report: Pick<SettleFacts, 'status' | 'claimed_at' | 'error_code'>,
): boolean {
  return (
    step.status !== 'cancelled' &&
    terminalStatuses.has(step.status) &&
    recordStatus(step.status as Exclude<StoredStepStatus, 'awaiting_approval'>) === report.status &&
    namesClaim(step, report) &&
    (report.error_code ?? null) === (step.error_code ?? null)
  );
}

/**
 * A browser's result for a step already at rest (operationId reportStepResult): null when it is not at rest or it is
 * the same result again (decideSettle answers those); otherwise refused with nothing changed,
 * except that a success for a step that failed marks that it acted after all (a retry checks first).
 */
export function decideAtRest(
  step: Pick<SettleSnapshot, 'status' | 'claimed_at' | 'error_code'>,
  report: Pick<SettleFacts, 'status' | 'claimed_at' | 'error_code'>,
): { message: string; markActed: boolean } | null {
  if (!terminalStatuses.has(step.status) || sameResultAgain(step, report)) return null;
  const shown =
    step.status === 'cancelled'
      ? 'cancelled'
      : recordStatus(step.status as Exclude<StoredStepStatus, 'awaiting_approval'>);
  return {
    message: `The step is already ${shown}; nothing changed.`,
    markActed: step.status === 'failed' && report.status === 'succeeded',
  };
}

/**
 * Settles the current claim with the browser's result. A result naming an earlier claim is
 * refused, unless it is a success for a step not settled since (it did run). Reads no clock: the
 * times recorded are the database's.
 */
export function decideSettle(step: SettleSnapshot | undefined, report: SettleFacts): SettleDecision {
  if (!step) return refuse('Step not found.', 'not_found');
  if (sameResultAgain(step, report)) return { kind: 'same_result' };
  const current = step.status === 'claimed' && namesClaim(step, report);
  const late =
    report.status === 'succeeded' &&
    (step.status === 'queued' || step.status === 'resuming') &&
    step.claimed_at !== null;
  if (!current && !late)
    return refuse(
      `The step is ${step.status === 'claimed' ? 'claimed again since' : step.status}; this result is no longer current.`,
    );
  const succeeded = report.status === 'succeeded';
  const checkpoint = report.error_code === 'blocked_checkpoint';
  return {
    kind: 'record',
    status: report.status,
    claim: current ? 'current' : 'lapsed',
    acted: succeeded,
    returnUsageUnit: !succeeded && current && step.usage_kind !== null,
    // A resuming step kept its unit when its claim lapsed (it may have acted): counted once.
    countUsageAgain: !current && step.status === 'queued' && step.usage_kind !== null,
    recordCheck: housekeepingKinds.has(step.kind),
    recordRead: succeeded,
    holdAtCheckpoint: checkpoint && current,
    credits: step.credit_hold_id === null ? 'none' : succeeded ? 'charge' : 'release',
    checkpoint,
  };
}

// ---------------------------------------------------------------------------------------------
// Claim: a browser asks for a step

export interface ClaimSnapshot {
  /** The account, read under its row lock. */
  account: { status: string; checkpoint_status: string; replies_failing: boolean } | undefined;
  /** The step, read under its row lock. */
  step:
    | {
        status: StoredStepStatus;
        kind: ActionKind;
        held: boolean;
        metered: boolean;
        claim_session_id: string | null;
        acted_at: Date | null;
        cut_offs: number;
        credit_round: number;
        commit_granted_at: Date | null;
      }
    | undefined;
  /** Whether a step of the account is claimed now (this one included). */
  running: boolean;
}

export interface ClaimRequest {
  sessionId: string;
  verifyFirst: boolean;
}

export type ClaimDecision =
  | StepRefusal
  /** The session's own running claim asked again (an attempt retried after it committed). */
  | { kind: 'answer_again'; verification: AgentVerification | null }
  | { kind: 'claim'; metered: boolean; usageKind: LimitKind | null; verification: AgentVerification | null };

/**
 * Whether this browser session may claim the step: one running step per account, only a waiting
 * and unheld step, only a resuming one to a browser that verifies first, no message while the
 * inbox read fails. Metered work is gated further (decideMeteredGate, decideUsageUnit).
 */
export function decideClaim({ account, step, running }: ClaimSnapshot, request: ClaimRequest): ClaimDecision {
  if (!account) return refuse('Account not found.', 'not_found');
  if (account.status !== 'connected') return refuse('The account is not connected.');
  if (account.checkpoint_status !== 'ok') return refuse('The account is held at a checkpoint.');
  // Temporal retries an attempt whose worker died after it committed: a claim of this step by this
  // very session is that attempt's (a second claim from one session shares the update id and is
  // deduplicated before it gets here). Answer it instead of refusing the account's own running step.
  // Whether it was resuming is no longer known, so a step that may have acted is handed out to look only.
  if (step?.status === 'claimed' && step.claim_session_id === request.sessionId) {
    const mayHaveActed = step.acted_at !== null || step.cut_offs > 0 || step.credit_round > 0;
    return {
      kind: 'answer_again',
      verification: mayHaveActed ? { mode: 'verify_only', commit_granted_at: null } : null,
    };
  }
  if (running) return refuse('Another step of this account is running.');
  if (!step || step.held || !(step.status === 'queued' || (step.status === 'resuming' && request.verifyFirst))) {
    return refuse('The step is not waiting for this browser.');
  }
  if (account.replies_failing && messageKinds.has(step.kind))
    return refuse('The inbox read is failing; a reply may have come in unseen.');
  // The earlier run was let past the point of no return: it likely acted, so only look.
  const verification: AgentVerification | null =
    step.status === 'resuming'
      ? {
          mode: step.commit_granted_at ? 'verify_only' : 'verify_then_act',
          commit_granted_at: step.commit_granted_at?.toISOString() ?? null,
        }
      : null;
  return {
    kind: 'claim',
    metered: step.metered,
    usageKind: step.metered ? limitKindOf[step.kind] : null,
    verification,
  };
}

export interface MeteredSnapshot {
  /** The workspace's unattended sending is paused (or sending is paused everywhere). */
  sendingStopped: boolean;
  working_hours: WorkingHours;
  timezone: string;
  next_metered_at: Date | null;
}

/** Metered work waits while sending is paused, outside working hours, and for the gap since the last metered step. */
export function decideMeteredGate(account: MeteredSnapshot, now: Date): StepRefusal | { kind: 'open' } {
  if (account.sendingStopped) return refuse('Unattended sending is paused.');
  if (!workingWindow(now, account.working_hours, account.timezone).open) return refuse('Outside working hours.');
  if (account.next_metered_at && account.next_metered_at > now)
    return refuse('The gap since the last step has not passed.');
  return { kind: 'open' };
}

/**
 * The week's ceiling refuses here; the day's is left to the conditional upsert that consumes the
 * unit (dailyCeilingRefusal reads its answer). The unit is counted on the sender's local date.
 */
export function decideUsageUnit(
  ceiling: Pick<Usage, 'used_this_week' | 'weekly_limit' | 'daily_limit'>,
  usageKind: LimitKind,
  timezone: string,
  now: Date,
): StepRefusal | { kind: 'consume'; usageDate: string; dailyLimit: number } {
  if (ceiling.used_this_week >= ceiling.weekly_limit) return refuse(`The weekly ceiling of ${usageKind} is reached.`);
  return { kind: 'consume', usageDate: formatLocalDate(localDate(now, timezone)), dailyLimit: ceiling.daily_limit };
}

/**
 * The day's ceiling, from the upsert's answer: no unit consumed, or a ceiling of 0 (a first unit
 * of the day is inserted whatever the ceiling, and this refusal rolls it back).
 */
export function dailyCeilingRefusal(consumed: boolean, dailyLimit: number, usageKind: LimitKind): StepRefusal | null {
  return !consumed || dailyLimit === 0 ? refuse(`The daily ceiling of ${usageKind} is reached.`) : null;
}

/** The next metered step waits the account's gap and up to half of it again, by `draw` in [0, 1). */
export function nextMeteredAt(now: Date, minActionIntervalSeconds: number, draw: number): Date {
  return new Date(now.getTime() + minActionIntervalSeconds * 1000 * (1 + draw * 0.5));
}

// ---------------------------------------------------------------------------------------------
// The lease: a claim whose browser went silent

/**
 * The lease ends a lease's length after the claim or the latest renewal (check-ins write
 * `lease_renewed_at`). Until then the claim lives on, and the timer sleeps to that end.
 */
export function decideLease(
  claim: { claimed_at: Date; lease_renewed_at: Date | null },
  now: Date,
): { kind: 'lives'; leaseUntil: Date } | { kind: 'lapsed' } {
  const renewedAt = Math.max(claim.claimed_at.getTime(), claim.lease_renewed_at?.getTime() ?? 0);
  const leaseUntil = renewedAt + claimLeaseSeconds * 1000;
  return leaseUntil > now.getTime() ? { kind: 'lives', leaseUntil: new Date(leaseUntil) } : { kind: 'lapsed' };
}

/**
 * A claim whose lease ended more than `graceSeconds` ago and is still claimed: its lease timer is
 * late (its worker is down) or was never set (the API died before telling its workflow).
 */
export function claimOverdue(
  claim: { claimed_at: Date; lease_renewed_at: Date | null },
  now: Date,
  graceSeconds: number,
): boolean {
  return decideLease(claim, new Date(now.getTime() - graceSeconds * 1000)).kind === 'lapsed';
}

export interface LapseDecision {
  status: 'queued' | 'resuming' | 'failed';
  errorCode: 'interrupted_repeatedly' | 'claim_expired' | null;
  cutOffs: number;
  /** Back in line (queued or resuming), or failed for good (finished now). */
  backInLine: boolean;
  returnUsageUnit: boolean;
  credits: 'release' | 'none';
}

/**
 * A lapsed claim. A housekeeping read goes back in line and gives its unit back (it acted on
 * nothing). Anything else may have acted and keeps its unit: with resume on it comes back
 * `resuming` (handed only to a browser that looks first), else it fails claim_expired for a
 * person to retry; the third cut-off ends it interrupted_repeatedly. A failure returns the hold.
 */
export function decideLapse(
  step: { kind: ActionKind; cut_offs: number; usage_kind: string | null; credit_hold_id: string | null },
  resumeEnabled: boolean,
): LapseDecision {
  const cutOffs = step.cut_offs + 1;
  const [status, errorCode]: [LapseDecision['status'], LapseDecision['errorCode']] = housekeepingKinds.has(step.kind)
    ? ['queued', null]
    : cutOffs >= maxCutOffs
      ? ['failed', 'interrupted_repeatedly']
      : resumeEnabled
        ? ['resuming', null]
        : ['failed', 'claim_expired'];
  const backInLine = status !== 'failed';
  return {
    status,
    errorCode,
    cutOffs,
    backInLine,
    returnUsageUnit: status === 'queued' && step.usage_kind !== null,
    credits: !backInLine && step.credit_hold_id !== null ? 'release' : 'none',
  };
}
