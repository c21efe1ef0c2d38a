/**
 * Browser steps in Postgres: every transition is one guarded UPDATE (compare-and-set on status),
 * so a retried activity or a second writer changes nothing. Refusals are non-retryable
 * ApplicationFailures typed from the error table, which the API maps to 409.
 */
import { ApplicationFailure } from '@temporalio/common';
import { transaction, type CommitWith, type Db, type Sql } from '../../db/sql.js';
import { ApiError } from '../../domain/shared/errors.js';
import type { ActionKind, AgentVerification, BrowserStep, StepErrorCode, StoredStepStatus } from '../../domain/pnet/pnet.js';
import { housekeepingKinds, limitKindOf, maxCutOffs, messageKinds, recordStatus, stepPrices } from '../../domain/pnet/pnet.js';
import { chargeHoldStatement, holdCredits, releaseHoldStatement, type HoldInput } from '../platform/credits.js';
import { recordCheck } from './checks.js';
import { recordPnetRead } from '../../services/inbox/messages.js';
import { holdAtCheckpoint } from './sender-account.js';
import { workingWindow } from '../../domain/pnet/pacing.js';
import { claimLeaseSeconds } from '../../domain/pnet/timing.js';
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

const iso = (d: Date | null) => (d ? d.toISOString() : null);

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

function refusal(row: StepRow | undefined, wanted: string): ApplicationFailure {
  if (!row) return ApplicationFailure.nonRetryable('Step not found.', 'not_found');
  const shown = row.status === 'awaiting_approval' ? 'awaiting approval' : row.status;
  return ApplicationFailure.nonRetryable(`The step is ${shown}; it can be ${wanted} only ${wantedFrom[wanted]}.`, 'conflict');
}

const wantedFrom: Record<string, string> = {
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
async function settleStepCreditsAndCommit(tx: Db, commitWith: CommitWith, step: StepRow, charge: boolean) {
  if (!step.credit_hold_id) return;
  await commitWith(charge ? chargeHoldStatement(tx, step.credit_hold_id) : releaseHoldStatement(tx, step.credit_hold_id));
}

async function transition(
  sql: Db,
  stepId: string,
  wanted: keyof typeof wantedFrom,
  run: (tx: Db) => Promise<StepRow[]>,
): Promise<StepTransitionResult> {
  const [row] = await run(sql);
  if (row) return { step: toBrowserStep(row) };
  throw refusal(await findStep(sql, stepId), wanted);
}

const conflict = (message: string) => ApplicationFailure.nonRetryable(message, 'conflict');

/**
 * The guarded claim, in one transaction with the account row locked: one running step per
 * account, only a waiting and unheld step, only a resuming one to a browser that verifies first,
 * and for metered work the working hours, the gap and the day's and week's ceilings, the usage
 * unit consumed by a conditional upsert. Any refusal writes nothing.
 */
async function claim(sql: Sql, input: ClaimInput, random: () => number): Promise<StepTransitionResult> {
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
async function returnUsageUnit(tx: Db, step: StepRow) {
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
