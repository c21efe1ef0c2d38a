/** The commission maturation workflow's contract (workflows/affiliates/commission.ts): its id, input, signal and query. */
import { defineQuery, defineSignal } from '@temporalio/workflow';

export const commissionWorkflowId = (commissionId: string) => `commission/${commissionId}`;

export interface CommissionInput {
  commissionId: string;
}

/** What one look at the commission answers (after maturing it when due at the workflow's `now`). */
export interface CommissionState {
  /** held, available, clawed_back; `gone` when the row no longer exists (its workspace was deleted). */
  status: 'held' | 'available' | 'clawed_back' | 'gone';
  availableAt: string | null;
}

/** A refund or dispute moved the commission (its ledger rows are written already, in the billing event's transaction): look again. */
export const commissionChangedSignal = defineSignal<[{ reason: 'refund' | 'dispute' | 'created' }]>('commissionChanged');
export const commissionStateQuery = defineQuery<CommissionState | null>('commissionState');
