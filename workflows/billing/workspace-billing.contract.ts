/** The workspace billing workflow's contract (workflows/billing/workspace-billing.ts): its id, input, signal and query. */
import { defineQuery, defineSignal } from '@temporalio/workflow';

export const workspaceBillingWorkflowId = (workspaceId: string) => `workspace-billing/${workspaceId}`;

export interface WorkspaceBillingInput {
  workspaceId: string;
}

/** What the last settlement did, for operators (the Temporal UI's query). */
export interface WorkspaceBillingView {
  workspaceId: string;
  plan: 'free' | 'paid' | null;
  periodStart: string | null;
  nextWakeAt: string | null;
  grantedThisRun: number;
  downgrades: number;
}

/** What one settlement answers: when to look again, or that the workspace is gone. */
export interface BillingSettlement {
  closed: boolean;
  plan: 'free' | 'paid' | null;
  periodStart: string | null;
  nextWakeAt: string | null;
  granted: number;
  downgraded: boolean;
}

/** The billing account changed (an event, a downgrade asked for, a design partner accepted): settle now. */
export const billingChangedSignal = defineSignal('billingChanged');
export const workspaceBillingStateQuery = defineQuery<WorkspaceBillingView>('workspaceBillingState');
