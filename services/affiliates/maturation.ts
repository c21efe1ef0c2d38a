/** Maturing a commission at the workflow's time, and starting and waking commission workflows. */
import type { Client } from '@temporalio/client';
import type { Sql } from '../../db/sql.js';
import { commissionById, commissionsWithoutWorkflow, markCommissionAvailable, markCommissionWorkflowStarted } from '../../store/affiliates/commissions.js';
import { releaseHeldEntries } from '../../store/affiliates/ledger.js';
import { commissionWorkflow } from '../../workflows/affiliates/commission.js';
import { commissionChangedSignal, commissionWorkflowId, type CommissionInput, type CommissionState } from '../../workflows/affiliates/commission.contract.js';

/**
 * Marks the commission available when it is held and due at `now` (compare-and-set), releasing its
 * held ledger rows in the same transaction; answers the commission's state either way.
 */
export async function matureCommissionAt(sql: Sql, commissionId: string, now: Date): Promise<CommissionState> {
  return sql.begin(async (tx) => {
    const matured = await markCommissionAvailable(tx, commissionId, now);
    if (matured) {
      await releaseHeldEntries(tx, commissionId);
      return { status: matured.status, availableAt: matured.available_at.toISOString() };
    }
    const row = await commissionById(tx, commissionId);
    return row ? { status: row.status, availableAt: row.available_at.toISOString() } : { status: 'gone', availableAt: null };
  }) as Promise<CommissionState>;
}

/** Signal-with-start each commission's workflow (a new one starts; a running one looks again), then records it started. */
export async function wakeCommissions(client: Client, taskQueue: string, sql: Sql, ids: readonly string[], reason: 'refund' | 'dispute' | 'created' = 'created'): Promise<void> {
  await Promise.all(
    ids.map((commissionId) =>
      client.workflow.signalWithStart(commissionWorkflow, {
        taskQueue,
        workflowId: commissionWorkflowId(commissionId),
        args: [{ commissionId }] as [CommissionInput],
        signal: commissionChangedSignal,
        signalArgs: [{ reason }],
      }),
    ),
  );
  await markCommissionWorkflowStarted(sql, ids);
}

/** Starts the workflow of every held commission whose start was lost (a crash between the commit and the wake). Answers how many. */
export async function startMissingCommissionWorkflows(client: Client, taskQueue: string, sql: Sql, batch = 500): Promise<number> {
  let started = 0;
  for (;;) {
    const ids = await commissionsWithoutWorkflow(sql, batch);
    await wakeCommissions(client, taskQueue, sql, ids);
    started += ids.length;
    if (ids.length < batch) return started;
  }
}

/** Runs startMissingCommissionWorkflows now and every `everyMs` (10 s); answers the function that stops it. */
export function keepCommissionWorkflowsStarted(input: { client: Client; taskQueue: string; sql: Sql; onError: (error: unknown) => void; everyMs?: number }): () => Promise<void> {
  let running: Promise<unknown> = Promise.resolve();
  const sweep = () => {
    running = startMissingCommissionWorkflows(input.client, input.taskQueue, input.sql).catch(input.onError);
  };
  sweep();
  const timer = setInterval(sweep, input.everyMs ?? 10_000);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}
