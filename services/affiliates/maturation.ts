/**
 * Maturing a shard's due commissions at the workflow's time, and waking the maturation workflows
 * (decision 047: one `commission-maturation/<task queue>/<shard>` per shard of affiliates).
 */
import type { Client } from '@temporalio/client';
import type { Sql } from '../../db/sql.js';
import {
  lockMaturationShard,
  matureDueCommissionsOfShard,
  recordShardWake,
  shardsToWake,
  shardsWithLostWake,
} from '../../store/affiliates/commissions.js';
import { releaseHeldEntriesOf } from '../../store/affiliates/ledger.js';
import { commissionMaturationWorkflow } from '../../workflows/affiliates/commission-maturation.js';
import {
  commissionMaturationWorkflowId,
  maturationWakeSignal,
  type CommissionMaturationInput,
  type MaturationLook,
} from '../../workflows/affiliates/commission-maturation.contract.js';

type WakeReason = 'created' | 'refund' | 'dispute' | 'sweeper';

/**
 * One look of a shard's maturation, in one transaction: the shard's lock, every held commission
 * due at `now` marked available (compare-and-set), their held ledger rows released, and the next
 * held commission's available_at recorded as the shard's wake and answered.
 */
export async function matureDueCommissions(sql: Sql, shard: number, now: Date): Promise<MaturationLook> {
  return sql.begin(async (tx) => {
    await lockMaturationShard(tx, shard);
    const matured = await matureDueCommissionsOfShard(tx, shard, now);
    // A statement of its own: it sees a clawback a refund committed while the update waited on its commission.
    await releaseHeldEntriesOf(tx, matured);
    const next = await recordShardWake(tx, shard);
    return { matured: matured.length, nextAt: next?.toISOString() ?? null };
  });
}

/** Signal-with-start these shards' maturation workflows (a new run starts when none is running). */
export async function wakeMaturationShards(
  client: Client,
  taskQueue: string,
  shards: readonly number[],
  reason: WakeReason,
): Promise<void> {
  await Promise.all(
    shards.map((shard) =>
      client.workflow.signalWithStart(commissionMaturationWorkflow, {
        taskQueue,
        workflowId: commissionMaturationWorkflowId(taskQueue, shard),
        args: [{ shard }] as [CommissionMaturationInput],
        signal: maturationWakeSignal,
        signalArgs: [{ reason }],
      }),
    ),
  );
}

/**
 * After a billing event's commit, for the commissions it made or moved: wakes only the shards whose
 * maturation would not look in time by itself (no wake recorded, or one later than a held
 * commission's available_at). With a fixed holding period a new commission matures after the held
 * ones, so a busy shard needs no signal. Answers how many shards it signalled.
 */
export async function wakeCommissions(
  client: Client,
  taskQueue: string,
  sql: Sql,
  commissionIds: readonly string[],
  reason: WakeReason = 'created',
): Promise<number> {
  const shards = await shardsToWake(sql, commissionIds);
  await wakeMaturationShards(client, taskQueue, shards, reason);
  return shards.length;
}

/** Signals every shard whose wake was lost (shardsWithLostWake). Answers how many. */
export async function sweepLostMaturationWakes(
  client: Client,
  taskQueue: string,
  sql: Sql,
  options: { now?: Date; graceMs?: number } = {},
): Promise<number> {
  const shards = await shardsWithLostWake(sql, options.now ?? new Date(), options.graceMs ?? 30_000);
  await wakeMaturationShards(client, taskQueue, shards, 'sweeper');
  return shards.length;
}

/** Runs sweepLostMaturationWakes now and every `everyMs` (10 s); answers the function that stops it. */
export function keepCommissionMaturationsWoken(input: {
  client: Client;
  taskQueue: string;
  sql: Sql;
  onError: (error: unknown) => void;
  everyMs?: number;
}): () => Promise<void> {
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
