/** The credit-hold watchdog's contract (workflows/platform/credit-hold.ts): its id, input, view, signal and query. */
import { defineQuery, defineSignal } from '@temporalio/workflow';

export const creditHoldWorkflowId = (holdId: string) => `credit-hold/${holdId}`;

export interface CreditHoldInput {
  holdId: string;
  workspaceId: string;
  /** ISO timestamp of the hold's expiry. */
  expiresAt: string;
}

/** How whoever held the credits settled the hold. */
export type CreditHoldOutcome = 'charged' | 'released';

export interface CreditHoldView {
  holdId: string;
  status: 'held' | CreditHoldOutcome | 'missing';
  expiresAt: string;
  releasedByWatchdog: boolean;
}

/** The holder settled the hold in SQL: the watchdog ends. */
export const creditHoldSettledSignal = defineSignal<[{ outcome: CreditHoldOutcome }]>('creditHoldSettled');
export const creditHoldStateQuery = defineQuery<CreditHoldView>('creditHoldState');
