/** The affiliate maturation workflow's contract (workflows/affiliates/affiliate-maturation.ts): its id, input, signal and query. */
import { defineQuery, defineSignal } from '@temporalio/workflow';

export const affiliateMaturationWorkflowId = (affiliateId: string) => `affiliate-maturation/${affiliateId}`;

export interface AffiliateMaturationInput {
  affiliateId: string;
  /** Loops of this run before it continues as new (default 50: a run's history stays a few hundred events). */
  loopsPerRun?: number;
  /** Commissions matured by the runs before this one (carried through continue-as-new, for the query). */
  maturedBefore?: number;
}

/** What one look answers: how many commissions it matured, and the next held commission's available_at (null: nothing held). */
export interface MaturationLook {
  matured: number;
  nextAt: string | null;
  /** The affiliate no longer exists (its workspace was deleted). */
  gone: boolean;
}

export interface AffiliateMaturationState {
  /** Commissions this workflow matured (this run and the ones it continued from). */
  matured: number;
  /** When it looks next; null while it looks or when it has ended. */
  nextAt: string | null;
}

/** Something may be due before the workflow's recorded wake (a new commission, the sweeper): look now. */
export const maturationWakeSignal = defineSignal<[{ reason: 'created' | 'refund' | 'dispute' | 'sweeper' }]>('maturationWake');
export const affiliateMaturationStateQuery = defineQuery<AffiliateMaturationState>('affiliateMaturationState');
