/**
 * The browser-step workflow's contract (workflows/pnet/browser-step.ts): its id, its input, its
 * view, and the Updates and query the API, the activities and the tests address it with.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { SettleReport, StepTransitionResult } from '../../domain/pnet/agent.js';
import type { ActionKind } from '../../domain/pnet/limits.js';
import type { StepErrorCode, StoredStepStatus } from '../../domain/pnet/steps.js';

export type { SettleReport, StepTransitionResult };

export const browserStepWorkflowId = (stepId: string) => `browser-step/${stepId}`;

export interface BrowserStepInput {
  stepId: string;
  workspaceId: string;
  accountId: string;
  kind: ActionKind;
  /** The status the row had when the workflow started (a retried start reads it again). */
  status: StoredStepStatus;
  /** A step still waiting at this time fails with missed_window. */
  runBefore?: string;
}

export interface BrowserStepView {
  stepId: string;
  status: StoredStepStatus;
  /** The current claim, and how many claims the step has had. */
  claimedAt: string | null;
  claims: number;
}

export interface RejectRequest {
  reason: string | null;
}

/** A person cancels (`cancelled`); the backend cancels with `sender_changed` when the account is disconnected. */
export interface CancelRequest {
  errorCode: Extract<StepErrorCode, 'cancelled' | 'sender_changed'>;
}

/**
 * The API committed a browser's claim, result or release of the step (decision 046): the workflow
 * reads the row (clearing its `signal_due_at`) and sets or ends its lease timer. Carries nothing:
 * signals may arrive late or out of order, the row is the truth.
 */
export const stepChangedSignal = defineSignal('stepChanged');
export const approveStepUpdate = defineUpdate<StepTransitionResult>('approveStep');
/** A person retries a failed step: one that may have acted comes back `resuming` (verify first). */
export const retryStepUpdate = defineUpdate<StepTransitionResult>('retryStep');
export const rejectStepUpdate = defineUpdate<StepTransitionResult, [RejectRequest]>('rejectStep');
export const cancelStepUpdate = defineUpdate<StepTransitionResult, [CancelRequest]>('cancelStep');
export const browserStepStateQuery = defineQuery<BrowserStepView>('browserStepState');
