/** The commission maturation workflow's contract (workflows/affiliates/commission-maturation.ts): its id, input, signal and query. */
import { defineQuery, defineSignal } from '@temporalio/workflow';

/**
 * A commission's shard is its affiliate's: migration 038's `hashtext(affiliate_id::text) & 7` (8 shards).
 * The id carries the task queue: a lane sharing the namespace (staging, another test file) has a
 * database of its own, and its shard workflow must never take this lane's wakes.
 */
export const commissionMaturationWorkflowId = (taskQueue: string, shard: number) =>
  `commission-maturation/${taskQueue}/${shard}`;

export interface CommissionMaturationInput {
  shard: number;
  /** Looks of this run before it continues as new (default 50: a run's history stays under 300 events). */
  loopsPerRun?: number;
  /** Commissions matured by the runs before this one (carried through continue-as-new, for the query). */
  maturedBefore?: number;
}

/** What one look answers: how many commissions it matured, and the shard's next held commission's available_at (null: nothing held). */
export interface MaturationLook {
  matured: number;
  nextAt: string | null;
}

export interface CommissionMaturationState {
  /** Commissions this workflow matured (this run and the ones it continued from). */
  matured: number;
  /** When it looks next; null while it looks or once it has ended. */
  nextAt: string | null;
}

/** Something may be due before the workflow's recorded wake (a new commission, the sweeper): look now. */
export const maturationWakeSignal =
  defineSignal<[{ reason: 'created' | 'refund' | 'dispute' | 'sweeper' }]>('maturationWake');
export const commissionMaturationStateQuery = defineQuery<CommissionMaturationState>('commissionMaturationState');
