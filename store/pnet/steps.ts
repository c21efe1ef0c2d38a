/**
 * Browser steps in Postgres: every transition is one guarded UPDATE (compare-and-set on status),
 * so a retried activity or a second writer changes nothing. Refusals are non-retryable
 * ApplicationFailures typed from the error table, which the API maps to 409.
 */
import { ApplicationFailure } from '@temporalio/common';
import { transaction, type CommitWith, type Db, type Sql } from '../../db/sql.js';
import { ApiError } from '../../domain/shared/errors.js';
import type { ActionKind } from '../../domain/pnet/limits.js';
import type { AgentVerification } from '../../domain/pnet/agent.js';
import type { BrowserStep, StepErrorCode, StoredStepStatus } from '../../domain/pnet/steps.js';
import { limitKindOf, messageKinds, stepPrices } from '../../domain/pnet/limits.js';
import { recordStatus } from '../../domain/pnet/steps.js';
import { chargeHoldStatement, holdCredits, releaseHoldStatement, type HoldInput } from '../platform/credits.js';
import { workingWindow } from '../../domain/pnet/pacing.js';
import { formatLocalDate, localDate } from '../../domain/shared/zoned-time.js';
import { sendingStopped } from './agent-sending.js';
import { loadAccount, usageOf } from './account-rows.js';

export interface SettleReport {
  status: 'succeeded' | 'failed' | 'skipped';
  claimed_at: string | null;
  duration_ms: number | null;
  error_code: StepErrorCode | null;
  error_message: string | null;
  outcome: Record<string, unknown> | null;
}

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
}

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

export const terminalStatuses: ReadonlySet<StoredStepStatus> = new Set(['succeeded', 'failed', 'rejected', 'skipped', 'cancelled']);

/**
 * The same result again for a settled step (a duplicate post, or an attempt retried after the
 * first one committed): answered with the record as it stands. Same status, claim and failure
 * code: a step the service gave up on (claim_expired) is `failed` too, and a browser's late
 * failure for it is another result, refused.
 */
export function sameResultAgain(step: StepRow, report: Pick<SettleReport, 'status' | 'claimed_at' | 'error_code'>): boolean {
  return (
    step.status !== 'cancelled' &&
    terminalStatuses.has(step.status) &&
    recordStatus(step.status as Exclude<StoredStepStatus, 'awaiting_approval'>) === report.status &&
    (report.claimed_at === null || Date.parse(report.claimed_at) === step.claimed_at?.getTime()) &&
    (report.error_code ?? null) === (step.error_code ?? null)
  );
}

export const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** The 2.2 record of a step that has left the Tasks page. */
export function toBrowserStep(row: StepRow): BrowserStep {
  if (row.status === 'awaiting_approval') throw new Error(`step ${row.id} is a task awaiting approval, not a step record`);
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
  return ApplicationFailure.nonRetryable(`The step is ${shown}; it can be ${wanted} only ${wantedFrom[wanted]}.`, 'conflict');
}

export const wantedFrom: Record<string, string> = {
  approved: 'while it awaits approval',
  rejected: 'while it awaits approval',
  cancelled: 'before a browser claims it',
};

/** The record after a transition; a claim of a `resuming` step says how to verify it. */
export type StepTransitionResult = { step: BrowserStep; verification?: AgentVerification | null; checkpoint?: boolean };

/** What a step's current queue round sets aside (a retry is a new round, so a new hold); null for a free kind. */
export function stepHold(step: Pick<StepRow, 'id' | 'workspace_id' | 'kind' | 'credit_round'>, id?: string): HoldInput | null {
  const price = stepPrices[step.kind];
  if (price === 0) return null;
  // The step's workflow settles the hold, so it never lapses on its own while the step waits.
  return { workspaceId: step.workspace_id, amount: price, causeKey: `pnet-step:${step.id}:${step.credit_round}`, ttlSeconds: 365 * 86_400, id };
}

/**
 * Sets the step's price aside for its current queue round. Too few credits refuses the queueing
 * with nothing written.
 */
export async function holdStepCredits(tx: Db, step: Pick<StepRow, 'id' | 'workspace_id' | 'kind' | 'credit_round'>): Promise<string | null> {
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
export async function settleStepCreditsAndCommit(tx: Db, commitWith: CommitWith, step: StepRow, charge: boolean) {
  if (!step.credit_hold_id) return;
  await commitWith(charge ? chargeHoldStatement(tx, step.credit_hold_id) : releaseHoldStatement(tx, step.credit_hold_id));
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

/**
 * The guarded claim, in one transaction with the account row locked: one running step per
 * account, only a waiting and unheld step, only a resuming one to a browser that verifies first,
 * and for metered work the working hours, the gap and the day's and week's ceilings, the usage
 * unit consumed by a conditional upsert. Any refusal writes nothing.
 */
export async function claim(sql: Sql, input: ClaimInput, random: () => number): Promise<StepTransitionResult> {
  return transaction(sql, async (tx, commitWith) => {
    // The three reads go out together, in the order every writer takes its locks (the account,
    // then the step): the account's row is locked until commit, and every round trip under it is
    // a wait for this account's check-ins and next claim.
    const [account, [step], [running]] = await Promise.all([
      loadAccount(tx, input.accountId, true),
      tx<StepRow[]>`select * from browser_steps where id = ${input.stepId} for update`,
      tx`select id from browser_steps where account_id = ${input.accountId} and status = 'claimed'`,
    ]);
    if (!account) throw ApplicationFailure.nonRetryable('Account not found.', 'not_found');
    if (account.status !== 'connected') throw conflict('The account is not connected.');
    if (account.checkpoint_status !== 'ok') throw conflict('The account is held at a checkpoint.');
    // Temporal retries an attempt whose worker died after it committed: a claim of this step by this
    // very session is that attempt's (a second claim from one session shares the update id and is
    // deduplicated before it gets here). Answer it instead of refusing the account's own running step.
    // Whether it was resuming is no longer known, so a step that may have acted is handed out to look only.
    if (step?.status === 'claimed' && step.claim_session_id === input.sessionId) {
      const mayHaveActed = step.acted_at !== null || step.cut_offs > 0 || step.credit_round > 0;
      return { step: toBrowserStep(step), verification: mayHaveActed ? { mode: 'verify_only', commit_granted_at: null } : null };
    }
    if (running) throw conflict('Another step of this account is running.');
    if (!step || step.held || !(step.status === 'queued' || (step.status === 'resuming' && input.verifyFirst))) {
      throw conflict('The step is not waiting for this browser.');
    }
    if (account.replies_failing && messageKinds.has(step.kind)) throw conflict('The inbox read is failing; a reply may have come in unseen.');
    // The workflow's clock: the same as the database's in service; a time-skipping test moves it.
    const now = input.now ? new Date(input.now) : new Date();
    let usageDate: string | null = null;
    const usageKind = limitKindOf[step.kind];
    if (step.metered) {
      if (await sendingStopped(tx, account.workspace_id)) throw conflict('Unattended sending is paused.');
      const window = workingWindow(now, account.working_hours, account.timezone);
      if (!window.open) throw conflict('Outside working hours.');
      if (account.next_metered_at && account.next_metered_at > now) throw conflict('The gap since the last step has not passed.');
      const ceiling = (await usageOf(tx, account, now)).find((u) => u.kind === usageKind)!;
      if (ceiling.used_this_week >= ceiling.weekly_limit) throw conflict(`The weekly ceiling of ${usageKind} is reached.`);
      usageDate = formatLocalDate(localDate(now, account.timezone));
      const consumed = await tx`
        insert into pnet_usage (account_id, local_date, limit_kind, used) values (${account.id}, ${usageDate}, ${usageKind}, 1)
        on conflict (account_id, local_date, limit_kind) do update set used = pnet_usage.used + 1
          where pnet_usage.used < ${ceiling.daily_limit}
        returning used`;
      if (consumed.length === 0 || ceiling.daily_limit === 0) throw conflict(`The daily ceiling of ${usageKind} is reached.`);
      const gapMs = account.min_action_interval_seconds * 1000 * (1 + random() * 0.5);
      await tx`update pnet_accounts set next_metered_at = ${new Date(now.getTime() + gapMs)} where id = ${account.id}`;
    }
    const [claimed] = await commitWith(tx<StepRow[]>`
      update browser_steps set status = 'claimed', claimed_at = date_trunc('milliseconds', now()), claim_session_id = ${input.sessionId},
        usage_date = ${usageDate}, usage_kind = ${step.metered ? usageKind : null}, commit_granted_at = null, running_wait = null,
        updated_at = now()
      where id = ${step.id} returning *`);
    // The earlier run was let past the point of no return: it likely acted, so only look.
    const verification: AgentVerification | null =
      step.status === 'resuming'
        ? { mode: step.commit_granted_at ? 'verify_only' : 'verify_then_act', commit_granted_at: iso(step.commit_granted_at) }
        : null;
    return { step: toBrowserStep(claimed!), verification };
  });
}

/** Gives back the usage unit a claim consumed (a failure, a skip or a lapse acted on nothing). */
export async function returnUsageUnit(tx: Db, step: StepRow) {
  if (!step.usage_kind) return;
  // The date is read in SQL, not round-tripped through a JS Date and a time zone.
  await tx`
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
  /** When the claim is made, for working hours, the gap and the day's and week's ceilings. */
  now?: string;
}

