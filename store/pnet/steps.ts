/**
 * Browser steps in Postgres: every transition is one guarded UPDATE (compare-and-set on status),
 * so a retried activity or a second writer changes nothing. Refusals are non-retryable
 * ApplicationFailures typed from the error table, which the API maps to 409.
 */
import { ApplicationFailure } from '@temporalio/common';
import { commitWith, transaction, type Db, type Sql } from '../../db/sql.js';
import { ApiError } from '../../domain/shared/errors.js';
import type { ActionKind } from '../../domain/pnet/limits.js';
import type { SettleReport, StepTransitionResult } from '../../domain/pnet/agent.js';
import type { BrowserStep, StepErrorCode, StoredStepStatus } from '../../domain/pnet/steps.js';
import { housekeepingKinds, stepPrices } from '../../domain/pnet/limits.js';
import { recordStatus } from '../../domain/pnet/steps.js';
import { recordWorkspaceEvent } from '../notifications/outbox.js';
import { chargeHoldStatement, holdCredits, releaseHoldStatement, type HoldInput } from '../platform/credits.js';
import {
  dailyCeilingRefusal,
  decideClaim,
  decideMeteredGate,
  decideUsageUnit,
  mayHaveActedCodes,
  nextMeteredAt,
  type LapseDecision,
  type StepRefusal,
} from '../../domain/pnet/settle.js';
import { sendingStopped } from './agent-sending.js';
import { loadAccount, usageOf } from './account-rows.js';
import { claimLapsesAtSql } from './line.js';

export interface StepRow {
  id: string;
  workspace_id: string;
  account_id: string;
  kind: ActionKind;
  params: Record<string, unknown>;
  contact_key: string | null;
  sequence_id: string | null;
  status: StoredStepStatus;
  metered: boolean;
  held: boolean;
  reject_reason: string | null;
  created_at: Date;
  queued_at: Date | null;
  claimed_at: Date | null;
  finished_at: Date | null;
  duration_ms: number | null;
  error_code: StepErrorCode | null;
  error_message: string | null;
  outcome: Record<string, unknown> | null;
  acted_at: Date | null;
  claim_session_id: string | null;
  usage_date: Date | null;
  usage_kind: string | null;
  cut_offs: number;
  commit_granted_at: Date | null;
  credit_round: number;
  credit_hold_id: string | null;
  running_wait: Record<string, unknown> | null;
  run_before: Date | null;
  /** The run of the step's workflow its start recorded (migration 022); null until then. */
  workflow_run_id: string | null;
  /** A browser's transition the step's workflow has not read yet (migration 037). */
  signal_due_at: Date | null;
}

// The pure rules of a step's transitions live in domain/pnet/settle.ts; these are re-exported for
// the callers that read them from here.

export const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** The record of a step (interface spec: Browser action step) that has left the Tasks page. */
export function toBrowserStep(row: StepRow): BrowserStep {
  if (row.status === 'awaiting_approval')
    throw new Error(`step ${row.id} is a task awaiting approval, not a step record`);
  return {
    id: row.id,
    account_id: row.account_id,
    kind: row.kind,
    params: row.params,
    status: recordStatus(row.status),
    contact_key: row.contact_key,
    sequence_id: row.sequence_id,
    queued_at: iso(row.queued_at),
    claimed_at: iso(row.claimed_at),
    finished_at: iso(row.finished_at),
    duration_ms: row.duration_ms,
    error_code: row.error_code,
    error_message: row.error_message,
    outcome: row.outcome,
    acted_at: iso(row.acted_at),
    approved_at: iso(row.queued_at),
    held: row.held,
    hold: null,
    metered: row.metered,
    requires_approval: false,
  };
}

export function toTask(row: StepRow) {
  return {
    id: row.id,
    account_id: row.account_id,
    kind: row.kind,
    params: row.params,
    contact_key: row.contact_key,
    created_at: row.created_at.toISOString(),
    held: row.held,
  };
}

export async function findStep(db: Db, id: string, workspaceId?: string): Promise<StepRow | undefined> {
  const [row] = await db<StepRow[]>`
    select * from browser_steps where id = ${id} ${workspaceId ? db`and workspace_id = ${workspaceId}` : db``}`;
  return row;
}

export function refusal(row: StepRow | undefined, wanted: string): ApplicationFailure {
  if (!row) return ApplicationFailure.nonRetryable('Step not found.', 'not_found');
  const shown = row.status === 'awaiting_approval' ? 'awaiting approval' : row.status;
  return ApplicationFailure.nonRetryable(
    `The step is ${shown}; it can be ${wanted} only ${wantedFrom[wanted]}.`,
    'conflict',
  );
}

export const wantedFrom: Record<string, string> = {
  approved: 'while it awaits approval',
  rejected: 'while it awaits approval',
  cancelled: 'before a browser claims it',
};

/** What a step's current queue round sets aside (a retry is a new round, so a new hold); null for a free kind. */
export function stepHold(
  step: Pick<StepRow, 'id' | 'workspace_id' | 'kind' | 'credit_round'>,
  id?: string,
): HoldInput | null {
  const price = stepPrices[step.kind];
  if (price === 0) return null;
  // The step's workflow settles the hold, so it never lapses on its own while the step waits.
  return {
    workspaceId: step.workspace_id,
    amount: price,
    causeKey: `pnet-step:${step.id}:${step.credit_round}`,
    ttlSeconds: 365 * 86_400,
    id,
  };
}

/**
 * Sets the step's price aside for its current queue round. Too few credits refuses the queueing
 * with nothing written.
 */
export async function holdStepCredits(
  tx: Db,
  step: Pick<StepRow, 'id' | 'workspace_id' | 'kind' | 'credit_round'>,
): Promise<string | null> {
  const input = stepHold(step);
  if (!input) return null;
  try {
    const hold = await holdCredits(tx, input);
    await tx`update browser_steps set credit_hold_id = ${hold.id} where id = ${step.id}`;
    return hold.id;
  } catch (error) {
    if (error instanceof ApiError) throw ApplicationFailure.nonRetryable(error.message, error.code);
    throw error;
  }
}

/**
 * Ends the round's hold (charged once for a success, returned for anything else) and commits: the
 * hold's statement is the transaction's last and goes out with its COMMIT, so the workspace's
 * balance row, which every queue and settle of the workspace locks, is held for the server's time
 * alone. A step without a hold commits as any transaction does.
 */
export function stepHoldEnd(tx: Db, step: StepRow, charge: boolean) {
  return step.credit_hold_id ? holdEnd(tx, step.credit_hold_id, charge ? 'charge' : 'release') : null;
}

export async function transition(
  sql: Db,
  stepId: string,
  wanted: keyof typeof wantedFrom,
  run: (tx: Db) => Promise<StepRow[]>,
): Promise<StepTransitionResult> {
  const [row] = await run(sql);
  if (row) return { step: toBrowserStep(row) };
  throw refusal(await findStep(sql, stepId), wanted);
}

export const conflict = (message: string) => ApplicationFailure.nonRetryable(message, 'conflict');

/** A refusal decided in domain/pnet/settle.ts, as the non-retryable failure the API maps to 404 or 409. */
export const failureOf = (refusal: StepRefusal) => ApplicationFailure.nonRetryable(refusal.message, refusal.code);

/**
 * The guarded claim, in one transaction with the account row locked: one running step per
 * account, only a waiting and unheld step, only a resuming one to a browser that verifies first,
 * and for metered work the working hours, the gap and the day's and week's ceilings, the usage
 * unit consumed by a conditional upsert. Any refusal writes nothing. The rules are decided in
 * domain/pnet/settle.ts from what the locked reads found; the statements here apply them.
 */
export async function claim(sql: Sql, input: ClaimInput, random: () => number): Promise<StepTransitionResult> {
  return transaction(sql, async (tx) => {
    // The three reads go out together, in the order every writer takes its locks (the account,
    // then the step): the account's row is locked until commit, and every round trip under it is
    // a wait for this account's check-ins and next claim.
    const [account, [step], [running]] = await Promise.all([
      loadAccount(tx, input.accountId, true),
      tx<StepRow[]>`select * from browser_steps where id = ${input.stepId} for update`,
      tx`select id from browser_steps where account_id = ${input.accountId} and status = 'claimed'`,
    ]);
    const decision = decideClaim({ account, step, running: running !== undefined }, input);
    if (decision.kind === 'refuse') throw failureOf(decision);
    if (decision.kind === 'answer_again') return { step: toBrowserStep(step!), verification: decision.verification };
    // The workflow's clock: the same as the database's in service; a time-skipping test moves it.
    const now = input.now ? new Date(input.now) : new Date();
    let usageDate: string | null = null;
    if (decision.metered) {
      // Read one at a time, as each is needed: a refusal skips the reads after it.
      const gate = decideMeteredGate(
        { ...account!, sendingStopped: await sendingStopped(tx, account!.workspace_id) },
        now,
      );
      if (gate.kind === 'refuse') throw failureOf(gate);
      const usageKind = decision.usageKind!;
      const ceiling = (await usageOf(tx, account!, now)).find((u) => u.kind === usageKind)!;
      const unit = decideUsageUnit(ceiling, usageKind, account!.timezone, now);
      if (unit.kind === 'refuse') throw failureOf(unit);
      usageDate = unit.usageDate;
      const full = dailyCeilingRefusal(
        await consumeUsageUnit(tx, account!.id, usageDate, usageKind, unit.dailyLimit),
        unit.dailyLimit,
        usageKind,
      );
      if (full) throw failureOf(full);
      await recordCapReached(
        tx,
        account!,
        usageKind,
        ceiling.used_today + 1,
        unit.dailyLimit,
        ceiling.used_this_week + 1,
        ceiling.weekly_limit,
      );
      await setNextMeteredAt(tx, account!.id, nextMeteredAt(now, account!.min_action_interval_seconds, random()));
    }
    const claimed = tx<StepRow[]>`
      update browser_steps set status = 'claimed', claimed_at = date_trunc('milliseconds', coalesce(${input.now ?? null}::timestamptz, now())), claim_session_id = ${input.sessionId},
        usage_date = ${usageDate}, usage_kind = ${decision.usageKind}, commit_granted_at = null, running_wait = null,
        updated_at = now(), signal_due_at = now()
      where id = ${step!.id} returning *`;
    return commitWith(claimed, ([row]): StepTransitionResult => ({
      step: toBrowserStep(row!),
      verification: decision.verification,
    }));
  });
}

/** The unit that fills a day's (or a week's) ceiling is a workspace event, committed with the claim that takes it. */
async function recordCapReached(
  tx: Db,
  account: { id: string; workspace_id: string; sender_profile_id: string | null },
  action: string,
  usedToday: number,
  dailyLimit: number,
  usedThisWeek: number,
  weeklyLimit: number,
): Promise<void> {
  const base = { account_id: account.id, sender_profile_id: account.sender_profile_id, action };
  if (usedToday === dailyLimit) {
    await recordWorkspaceEvent(tx, {
      workspaceId: account.workspace_id,
      type: 'account.daily_cap_reached',
      payload: { ...base, limit: dailyLimit },
    });
  } else if (usedThisWeek === weeklyLimit) {
    await recordWorkspaceEvent(tx, {
      workspaceId: account.workspace_id,
      type: 'account.weekly_cap_reached',
      payload: { ...base, limit: weeklyLimit },
    });
  }
}

export async function setNextMeteredAt(tx: Db, accountId: string, at: Date): Promise<void> {
  await tx`update pnet_accounts set next_metered_at = ${at} where id = ${accountId}`;
}

/**
 * Consumes a unit of the day's ceiling; false when the day's units are spent. The ceiling is
 * checked by the upsert that counts, in one statement: the settles that give a unit back or count
 * it again hold the step's lock, not the account's, so a check read apart from the count could be
 * overtaken in between.
 */
export async function consumeUsageUnit(
  tx: Db,
  accountId: string,
  usageDate: string,
  usageKind: string,
  dailyLimit: number,
): Promise<boolean> {
  const consumed = await tx`
    insert into pnet_usage (account_id, local_date, limit_kind, used) values (${accountId}, ${usageDate}, ${usageKind}, 1)
    on conflict (account_id, local_date, limit_kind) do update set used = pnet_usage.used + 1
      where pnet_usage.used < ${dailyLimit}
    returning used`;
  return consumed.length > 0;
}

/** The step locked for the rest of the transaction: a settle decides from it and writes under the lock. */
export async function lockStep(tx: Db, stepId: string): Promise<StepRow | undefined> {
  const [step] = await tx<StepRow[]>`select * from browser_steps where id = ${stepId} for update`;
  return step;
}

/** The browser a result comes from: its account's workspace, the account, and the connection token's hash it sent. */
export interface ReportingBrowser {
  workspaceId: string;
  accountId: string;
  connectionTokenHash: Buffer;
}

/**
 * A step of the reporting browser's own account, locked, with whether the token it sent is still
 * the account's (a disconnect replaces it): the result route's only read, so its answer takes the
 * principal from memory and still refuses a replaced token. A step awaiting approval is not the
 * browser's to see.
 */
export async function lockBrowserStep(
  tx: Db,
  stepId: string,
  browser: ReportingBrowser,
): Promise<(StepRow & { token_current: boolean }) | undefined> {
  const [step] = await tx<(StepRow & { token_current: boolean })[]>`
    select s.*, a.connection_token_hash = ${browser.connectionTokenHash} as token_current
      from browser_steps s join pnet_accounts a on a.id = s.account_id
     where s.id = ${stepId} and s.workspace_id = ${browser.workspaceId} and s.account_id = ${browser.accountId}
       and s.status <> 'awaiting_approval'
       for update of s`;
  return step;
}

/**
 * Records a browser's result. Under lockStep's row lock: the status it was decided from holds
 * until commit, so the statement needs no status guard of its own.
 */
export async function recordResult(tx: Db, stepId: string, report: SettleReport, acted: boolean): Promise<StepRow> {
  const [settled] = await recordResultStatement(tx, stepId, report, acted);
  if (settled!.status === 'failed') await recordStepFailed(tx, settled!);
  return settled!;
}

/** recordResult's one statement, not sent yet: a result that is not a failure records nothing else. */
export function recordResultStatement(tx: Db, stepId: string, report: SettleReport, acted: boolean) {
  return tx<StepRow[]>`
    update browser_steps set status = ${report.status}, finished_at = now(), duration_ms = ${report.duration_ms},
      error_code = ${report.error_code}, error_message = ${report.error_message},
      outcome = ${report.outcome ? tx.json(report.outcome as never) : null},
      acted_at = ${acted ? tx`now()` : tx`acted_at`}, updated_at = now(), signal_due_at = now()
    where id = ${stepId} returning *`;
}

/** A step that failed is a workspace event, in the transaction that fails it. */
async function recordStepFailed(tx: Db, step: StepRow): Promise<void> {
  const [account] = await tx<
    { sender_profile_id: string | null }[]
  >`select sender_profile_id from pnet_accounts where id = ${step.account_id}`;
  await recordWorkspaceEvent(tx, {
    workspaceId: step.workspace_id,
    type: 'step.failed',
    payload: {
      step_id: step.id,
      account_id: step.account_id,
      sender_profile_id: account?.sender_profile_id ?? null,
      kind: step.kind,
      error_code: step.error_code,
    },
  });
}

/** Counts the unit of the step's claim again (a requeued read that ran after all). */
export async function countUsageAgain(tx: Db, stepId: string) {
  // The date is read in SQL, not round-tripped through a JS Date and a time zone.
  await tx`
    update pnet_usage u set used = u.used + 1 from browser_steps s
    where s.id = ${stepId} and u.account_id = s.account_id and u.local_date = s.usage_date and u.limit_kind = s.usage_kind`;
}

/** The statement that ends a step's credit hold: a transaction's last, sent with its COMMIT (see stepHoldEnd). */
export function holdEnd(tx: Db, holdId: string, end: 'charge' | 'release') {
  return end === 'charge' ? chargeHoldStatement(tx, holdId) : releaseHoldStatement(tx, holdId);
}

/**
 * The step locked if it is still claimed under `claimedAt`, with the lease's renewal (which
 * check-ins write): for a claim given back, and for a lease's end.
 */
export async function lockClaimedStep(
  tx: Db,
  stepId: string,
  claimedAt: string,
): Promise<(StepRow & { lease_renewed_at: Date | null }) | undefined> {
  const [step] = await tx<(StepRow & { lease_renewed_at: Date | null })[]>`
    select * from browser_steps where id = ${stepId} and status = 'claimed' and claimed_at = ${claimedAt} for update`;
  return step;
}

export async function requeueReleased(tx: Db, stepId: string): Promise<StepRow> {
  const [released] = await tx<StepRow[]>`
    update browser_steps set status = 'queued', queued_at = now(), usage_date = null, usage_kind = null, updated_at = now(), signal_due_at = now()
    where id = ${stepId} returning *`;
  return released!;
}

/**
 * A failed step back in line. Decided inside the one statement that writes, on purpose: nothing
 * locks the row first, and a late "it acted after all" (the API's acted_at write) may land at any
 * moment. The UPDATE reads acted_at under its own row lock (re-read after waiting for a concurrent
 * writer), so a step that acted always comes back resuming; a read-then-write would race.
 */
export async function requeueFailed(tx: Db, stepId: string): Promise<StepRow | undefined> {
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
  return row;
}

/** A waiting step past its deadline fails missed_window (compare-and-set on status). */
export async function failMissedWindow(tx: Db, stepId: string): Promise<StepRow | undefined> {
  const [row] = await tx<StepRow[]>`
    update browser_steps set status = 'failed', error_code = 'missed_window', finished_at = now(), updated_at = now()
    where id = ${stepId} and status in ('awaiting_approval', 'queued', 'resuming') returning *`;
  if (row) await recordStepFailed(tx, row);
  return row;
}

export function approveWaiting(tx: Db, stepId: string) {
  return tx<StepRow[]>`
    update browser_steps set status = 'queued', queued_at = now(), updated_at = now()
    where id = ${stepId} and status = 'awaiting_approval' returning *`;
}

export function rejectWaiting(db: Db, stepId: string, reason: string | null) {
  return db<StepRow[]>`
    update browser_steps set status = 'rejected', reject_reason = ${reason}, error_message = ${reason},
      finished_at = now(), updated_at = now()
    where id = ${stepId} and status = 'awaiting_approval' returning *`;
}

/** A running step is the browser's until it reports: only a waiting one is cancelled. */
export async function cancelWaiting(
  tx: Db,
  stepId: string,
  errorCode: 'cancelled' | 'sender_changed',
): Promise<StepRow | undefined> {
  const [row] = await tx<StepRow[]>`
    update browser_steps set status = 'cancelled', error_code = ${errorCode}, finished_at = now(), updated_at = now()
    where id = ${stepId} and status in ('awaiting_approval', 'queued', 'resuming') returning *`;
  return row;
}

/** Whether the account lets a cut-off step resume (false for an account that is gone). */
export async function resumeEnabledOf(tx: Db, accountId: string): Promise<boolean> {
  const [account] = await tx<
    { resume_enabled: boolean }[]
  >`select resume_enabled from pnet_accounts where id = ${accountId}`;
  return account?.resume_enabled ?? false;
}

/**
 * Records a lapsed claim, under lockClaimedStep's row lock: back in line now, or finished now. `tell`
 * marks the change for the step's workflow (`signal_due_at`) when someone else than the workflow
 * lapsed it (the sweeper).
 */
export async function recordLapse(tx: Db, stepId: string, lapse: LapseDecision, tell = false) {
  await tx`
    update browser_steps set status = ${lapse.status}, error_code = ${lapse.errorCode}, cut_offs = ${lapse.cutOffs},
      finished_at = ${lapse.backInLine ? null : tx`now()`},
      queued_at = ${lapse.backInLine ? tx`now()` : tx`queued_at`}, updated_at = now(),
      signal_due_at = ${tell ? tx`now()` : tx`signal_due_at`}
    where id = ${stepId}`;
}

/**
 * Claims whose lease ended more than `graceSeconds` before `now` and are still claimed: their
 * workflow's lease timer is late (its worker was down) or was never set. Read through the
 * one-running-step index, so it costs at most one row per account.
 */
export async function overdueClaims(
  db: Db,
  now: Date,
  graceSeconds: number,
  limit: number,
): Promise<{ id: string; claimed_at: Date }[]> {
  return db<{ id: string; claimed_at: Date }[]>`
    select id, claimed_at from browser_steps
    where status = 'claimed' and ${claimLapsesAtSql(db, graceSeconds)} < ${now}
    order by claimed_at limit ${limit}`;
}

/** Gives back the usage unit a claim consumed (a failure, a skip or a lapse acted on nothing). */
export async function returnUsageUnit(tx: Db, step: Pick<StepRow, 'id' | 'usage_kind'>) {
  const statement = returnUsageUnitStatement(tx, step);
  if (statement) await statement;
}

/** returnUsageUnit's statement, not sent yet; null for a step that took no unit. */
export function returnUsageUnitStatement(tx: Db, step: Pick<StepRow, 'id' | 'usage_kind'>) {
  if (!step.usage_kind) return null;
  // The date is read in SQL, not round-tripped through a JS Date and a time zone. The floor
  // (`used > 0`) is checked by the statement that counts down, so the count never goes below 0.
  return tx`
    update pnet_usage u set used = u.used - 1
    from browser_steps s
    where s.id = ${step.id} and u.account_id = s.account_id and u.local_date = s.usage_date
      and u.limit_kind = s.usage_kind and u.used > 0`;
}

export interface ClaimInput {
  stepId: string;
  accountId: string;
  sessionId: string;
  verifyFirst: boolean;
  /**
   * When the claim is made, for working hours, the gap, the day's and week's ceilings and the
   * lease's start; the database's clock when absent (the API). A time-skipping test passes its
   * server's clock, which the step's lease timer runs on.
   */
  now?: string;
}

/** The browser acted after all (a late success of a failed step): a retry checks first. */
export async function markStepActed(sql: Db, stepId: string): Promise<void> {
  await sql`update browser_steps set acted_at = coalesce(acted_at, now()), updated_at = now() where id = ${stepId}`;
}

/**
 * The step as its workflow learns it after a browser's transition the API committed (decision 046):
 * one statement reads the row and clears `signal_due_at`, so a change committed after this read
 * marks the row again and is signalled again.
 */
export async function takeStepChange(db: Db, stepId: string): Promise<StepRow | undefined> {
  // Clears only a mark that is there: a row read without one is not written again.
  const [row] = await db<StepRow[]>`
    with taken as (update browser_steps set signal_due_at = null where id = ${stepId} and signal_due_at is not null returning *)
    select * from taken union all select * from browser_steps where id = ${stepId} and not exists (select 1 from taken)`;
  return row;
}

/** Steps whose workflow has not read a change for `graceSeconds` (its signal was lost): oldest first. */
export async function stepsWithSignalDue(db: Db, graceSeconds: number, limit: number): Promise<StepRow[]> {
  return db<StepRow[]>`
    select * from browser_steps where signal_due_at is not null and signal_due_at < now() - make_interval(secs => ${graceSeconds})
    order by signal_due_at limit ${limit}`;
}

/** The sweeper signalled these steps again: their marks start a new grace. */
export async function markSignalsResent(db: Db, stepIds: string[]): Promise<void> {
  await db`update browser_steps set signal_due_at = now() where id = any(${stepIds}::uuid[]) and signal_due_at is not null`;
}
