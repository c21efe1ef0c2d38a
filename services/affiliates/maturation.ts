/**
 * Maturing an affiliate's due commissions at the workflow's time, and waking affiliates'
 * maturation workflows (decision 047: one `affiliate-maturation/<affiliateId>` per affiliate).
 */
import type { Client } from '@temporalio/client';
import type { Sql } from '../../db/sql.js';
import { affiliatesToWake, affiliatesWithLostWake, lockAffiliateForMaturation, matureDueCommissionsOf, recordMaturationWake } from '../../store/affiliates/commissions.js';
import { releaseHeldEntriesOf } from '../../store/affiliates/ledger.js';
import { affiliateMaturationWorkflow } from '../../workflows/affiliates/affiliate-maturation.js';
import {
  affiliateMaturationWorkflowId,
  maturationWakeSignal,
  type AffiliateMaturationInput,
  type MaturationLook,
} from '../../workflows/affiliates/affiliate-maturation.contract.js';

type WakeReason = 'created' | 'refund' | 'dispute' | 'sweeper';

/**
 * One look of the affiliate's maturation, in one transaction: the affiliate's lock, every held
 * commission due at `now` marked available (compare-and-set), their held ledger rows released, and
 * the next held commission's available_at recorded as the affiliate's wake and answered.
 */
export async function matureDueCommissions(sql: Sql, affiliateId: string, now: Date): Promise<MaturationLook> {
  return sql.begin(async (tx) => {
    if (!(await lockAffiliateForMaturation(tx, affiliateId))) return { matured: 0, nextAt: null, gone: true };
    const matured = await matureDueCommissionsOf(tx, affiliateId, now);
    // A statement of its own: it sees a clawback a refund committed while the update waited on its commission.
    await releaseHeldEntriesOf(tx, matured);
    const next = await recordMaturationWake(tx, affiliateId);
    return { matured: matured.length, nextAt: next?.toISOString() ?? null, gone: false };
  }) as Promise<MaturationLook>;
}

/** Signal-with-start these affiliates' maturation workflows (a new run starts when none is running). */
export async function wakeAffiliateMaturations(client: Client, taskQueue: string, affiliateIds: readonly string[], reason: WakeReason): Promise<void> {
  await Promise.all(
    affiliateIds.map((affiliateId) =>
      client.workflow.signalWithStart(affiliateMaturationWorkflow, {
        taskQueue,
        workflowId: affiliateMaturationWorkflowId(affiliateId),
        args: [{ affiliateId }] as [AffiliateMaturationInput],
        signal: maturationWakeSignal,
        signalArgs: [{ reason }],
      }),
    ),
  );
}

/**
 * After a billing event's commit, for the commissions it made or moved: wakes only the affiliates
 * whose maturation would not look in time by itself (no wake recorded, or one later than a held
 * commission's available_at). With a fixed holding period a new commission matures after the held
 * ones, so a busy affiliate needs no signal. Answers how many affiliates it signalled.
 */
export async function wakeCommissions(client: Client, taskQueue: string, sql: Sql, commissionIds: readonly string[], reason: WakeReason = 'created'): Promise<number> {
  const affiliateIds = await affiliatesToWake(sql, commissionIds);
  await wakeAffiliateMaturations(client, taskQueue, affiliateIds, reason);
  return affiliateIds.length;
}

/** Signals every affiliate whose wake was lost (affiliatesWithLostWake). Answers how many. */
export async function sweepLostMaturationWakes(client: Client, taskQueue: string, sql: Sql, options: { now?: Date; graceMs?: number; batch?: number } = {}): Promise<number> {
  const batch = options.batch ?? 500;
  const ids = await affiliatesWithLostWake(sql, options.now ?? new Date(), options.graceMs ?? 30_000, batch);
  await wakeAffiliateMaturations(client, taskQueue, ids, 'sweeper');
  return ids.length;
}

/** Runs sweepLostMaturationWakes now and every `everyMs` (10 s); answers the function that stops it. */
export function keepAffiliateMaturationsWoken(input: { client: Client; taskQueue: string; sql: Sql; onError: (error: unknown) => void; everyMs?: number }): () => Promise<void> {
  let running: Promise<unknown> = Promise.resolve();
  const sweep = () => {
    running = sweepLostMaturationWakes(input.client, input.taskQueue, input.sql).catch(input.onError);
  };
  sweep();
  const timer = setInterval(sweep, input.everyMs ?? 10_000);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}
