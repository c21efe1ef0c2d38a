/**
 * One browser step's life, from the Tasks page or the queue to a terminal status. Person-side
 * transitions arrive as Updates: the validator refuses cheaply from the workflow's own view (the
 * API answers 409), the handler runs the guarded SQL activity and returns the record, so the HTTP
 * answer is the workflow's answer. Claims, leases and results join this workflow next.
 */
import {
    ApplicationFailure,
    allHandlersFinished,
    condition,
    defineQuery,
    defineSignal,
    defineUpdate,
    patched,
    proxyActivities,
    proxyLocalActivities,
    setHandler,
    upsertSearchAttributes,
    workflowInfo,
} from '@temporalio/workflow';
import type { SettleReport, StepTransitionResult } from '../../store/pnet/steps.js';
import type { ActionKind } from '../../domain/pnet/limits.js';
import type { StoredStepStatus } from '../../domain/pnet/steps.js';
import { claimLeaseSeconds } from '../../domain/pnet/timing.js';
import { msUntil, workflowNow } from '../shared/clock.js';
import { StepErrorCodeKey, StepStatusKey } from '../shared/search-attributes.js';
import type { PnetStepActivities } from '../../activities/pnet/steps.js';

export interface BrowserStepInput {
  stepId: string;
  workspaceId: string;
  accountId: string;
  kind: ActionKind;
  /** The status the row had when the workflow started (a retried start reads it again). */
  status: StoredStepStatus;
  /** A step still waiting at this time fails with missed_window. */
  runBefore?: string;
  /**
   * Set on every step started since the transitions became local activities and the lease
   * renewal moved to SQL: such a run takes those paths without asking patched(), whose marker
   * cost every step an event and a search-attribute (visibility) write. Histories from before
   * the flag still decide by their markers.
   */
  current?: boolean;
}

export interface BrowserStepView {
  stepId: string;
  status: StoredStepStatus;
  /** The current claim, and how many claims the step has had. */
  claimedAt: string | null;
  claims: number;
}

export interface CancelRequest {
  errorCode: 'cancelled' | 'sender_changed';
}

export interface ClaimRequest {
  sessionId: string;
  verifyFirst: boolean;
}

export const claimStepUpdate = defineUpdate<StepTransitionResult, [ClaimRequest]>('claimStep');
export const reportResultUpdate = defineUpdate<StepTransitionResult, [SettleReport]>('reportResult');
/**
 * How check-ins renewed a claim's lease before they wrote `lease_renewed_at` instead; kept so the
 * runs recorded then replay (the lease path under the `lease-renewed-in-sql` patch ignores it).
 */
export const claimRenewedSignal = defineSignal<[{ claimedAt: string }]>('claimRenewed');
export const approveStepUpdate = defineUpdate<StepTransitionResult>('approveStep');
export const releaseClaimUpdate = defineUpdate<StepTransitionResult, [{ claimedAt: string }]>('releaseClaim');
/** A person retries a failed step: one that may have acted comes back `resuming` (verify first). */
export const retryStepUpdate = defineUpdate<StepTransitionResult>('retryStep');
export const rejectStepUpdate = defineUpdate<StepTransitionResult, [{ reason: string | null }]>('rejectStep');
/** A person cancels; the backend cancels with `sender_changed` when the account is disconnected. */
export const cancelStepUpdate = defineUpdate<StepTransitionResult, [CancelRequest]>('cancelStep');
export const browserStepStateQuery = defineQuery<BrowserStepView>('browserStepState');
export const browserStepWorkflowId = (stepId: string) => `browser-step/${stepId}`;

const terminal: ReadonlySet<StoredStepStatus> = new Set(['succeeded', 'failed', 'rejected', 'skipped', 'cancelled']);

const stepRetry = { initialInterval: '1 second', maximumInterval: '30 seconds', nonRetryableErrorTypes: ['conflict', 'not_found'] };
/** Histories recorded before the patch below scheduled these as ordinary activities. */
const remoteSteps = proxyActivities<PnetStepActivities>({ startToCloseTimeout: '30 seconds', retry: stepRetry });
/**
 * Every step transition is a few guarded SQL statements: run in the worker as local activities,
 * an Update is accepted, done and answered in one workflow task instead of three tasks and an
 * activity task, which halves the Temporal server's work per step. A worker killed mid-call
 * leaves the Update unaccepted; the next worker's task runs it again, and the SQL is guarded.
 */
const localSteps = proxyLocalActivities<PnetStepActivities>({ startToCloseTimeout: '30 seconds', retry: stepRetry });

/**
 * The transitions run one at a time. Two Updates accepted in one task (a settle and a claim racing)
 * would otherwise run their local activities side by side, and which finished first decided where
 * the main loop's next timer fell among their completions; a replay, which has both results at
 * once, ordered them differently and failed as non-deterministic (found by the chaos run). One
 * local activity in flight at a time leaves a replay nothing to order differently.
 */
function oneAtATime<T extends object>(activities: T): T {
  // A queue, not a flag: each call takes the tail synchronously and waits for the call before
  // it. Two handlers started in the same activation both saw a free flag before either resumed,
  // and ran side by side (test/browser-step-updates.test.ts).
  let tail: Promise<unknown> = Promise.resolve();
  return new Proxy(activities, {
    get(target, name) {
      const call = (target as Record<string | symbol, (...args: unknown[]) => Promise<unknown>>)[name]!;
      return (...args: unknown[]) => {
        const run = tail.then(() => call(...args));
        tail = run.catch(() => undefined);
        return run;
      };
    },
  });
}

function refuse(view: BrowserStepView, allowed: StoredStepStatus[], action: string): void {
  if (!allowed.includes(view.status)) {
    const shown = view.status === 'awaiting_approval' ? 'awaiting approval' : view.status;
    throw ApplicationFailure.nonRetryable(`The step is ${shown}; it cannot be ${action}.`, 'conflict');
  }
}

export async function browserStepWorkflow(input: BrowserStepInput): Promise<BrowserStepView> {
  const view: BrowserStepView = { stepId: input.stepId, status: input.status, claimedAt: null, claims: 0 };
  let renewed = false;
  const current = input.current === true;
  const steps = current || patched('local-step-activities') ? oneAtATime(localSteps) : remoteSteps;
  // Check-ins renew the lease in SQL; runs before this read signals instead (`renewed`).
  const leaseInSql = current || patched('lease-renewed-in-sql');
  const tracked = workflowInfo().typedSearchAttributes.get(StepStatusKey) !== undefined;
  const moveTo = (status: StoredStepStatus, errorCode: string | null = null) => {
    view.status = status;
    if (!tracked) return;
    // Operators find every step that ended one way (claim_expired, say) by its error code.
    const withCode = errorCode !== null && (current || patched('step-error-code-attribute'));
    upsertSearchAttributes([{ key: StepStatusKey, value: status }, ...(withCode ? [{ key: StepErrorCodeKey, value: errorCode }] : [])]);
  };
  const settle = (result: StepTransitionResult, status: StoredStepStatus) => {
    moveTo(status, result.step.error_code);
    return result;
  };

  setHandler(browserStepStateQuery, () => view);
  setHandler(
    claimStepUpdate,
    async ({ sessionId, verifyFirst }) => {
      const result = await steps.claimStep({ stepId: input.stepId, accountId: input.accountId, sessionId, verifyFirst, now: workflowNow().toISOString() });
      view.claimedAt = result.step.claimed_at;
      view.claims += 1;
      return settle(result, 'claimed');
    },
    { validator: (_request: ClaimRequest) => refuse(view, ['queued', 'resuming'], 'claimed') },
  );
  setHandler(
    reportResultUpdate,
    async (report) => {
      const result = await steps.settleStep({ stepId: input.stepId, report });
      return settle(result, result.step.status);
    },
    // A late success for a step put back in line is accepted (it ran); the activity decides.
    { validator: (report: SettleReport) => refuse(view, report.status === 'succeeded' ? ['claimed', 'queued', 'resuming'] : ['claimed'], 'settled by this result') },
  );
  setHandler(
    retryStepUpdate,
    async () => {
      const result = await steps.retryStep({ stepId: input.stepId });
      view.claimedAt = null;
      return settle(result, result.step.status);
    },
    { validator: () => refuse(view, ['failed'], 'retried') },
  );
  setHandler(
    releaseClaimUpdate,
    async ({ claimedAt }) => settle(await steps.releaseClaim({ stepId: input.stepId, claimedAt }), 'queued'),
    { validator: (_release: { claimedAt: string }) => refuse(view, ['claimed'], 'released') },
  );
  setHandler(claimRenewedSignal, ({ claimedAt }) => {
    if (view.status === 'claimed' && claimedAt === view.claimedAt) renewed = true;
  });
  setHandler(
    approveStepUpdate,
    async () => settle(await steps.approveStep({ stepId: input.stepId }), 'queued'),
    { validator: () => refuse(view, ['awaiting_approval'], 'approved') },
  );
  setHandler(
    rejectStepUpdate,
    async ({ reason }) => settle(await steps.rejectStep({ stepId: input.stepId, reason }), 'rejected'),
    { validator: (_input: { reason: string | null }) => refuse(view, ['awaiting_approval'], 'rejected') },
  );
  setHandler(
    cancelStepUpdate,
    // Histories recorded before the request existed carry no argument.
    async (request: CancelRequest | undefined) => settle(await steps.cancelStep({ stepId: input.stepId, errorCode: request?.errorCode ?? 'cancelled' }), 'cancelled'),
    { validator: (_request: CancelRequest | undefined) => refuse(view, ['awaiting_approval', 'queued', 'resuming'], 'cancelled') },
  );

  // A retry reopens a settled step, so the run closes only when it is settled and idle.
  do {
    while (!terminal.has(view.status)) {
      const waited = () => terminal.has(view.status) || view.status === 'claimed';
      if (input.runBefore === undefined) await condition(waited);
      else if (!(await condition(waited, Math.max(1, msUntil(input.runBefore))))) {
        // Past its deadline while still waiting (a claim or a settle in flight wins the race in SQL).
        const missed = await steps.missWindow({ stepId: input.stepId });
        moveTo(missed.status, missed.errorCode ?? null);
      }
      // The claim's lease: every check-in of the running browser moves its end (recorded in SQL);
      // the timer looks when the lease would end and sleeps on to the renewed end, so silence for
      // a whole lease lapses the claim and a long run costs one look per lease.
      let leaseUntil: number | null = null;
      while (leaseInSql && view.status === 'claimed') {
        const claim = view.claimedAt!;
        leaseUntil ??= workflowNow().getTime() + claimLeaseSeconds * 1000;
        const ms = leaseUntil - workflowNow().getTime();
        if (await condition(() => view.status !== 'claimed' || view.claimedAt !== claim, Math.max(1, ms))) {
          leaseUntil = null;
          continue;
        }
        const looked = await steps.expireClaim({ stepId: input.stepId, claimedAt: claim, now: workflowNow().toISOString() });
        if (looked.status === 'claimed') {
          // Renewed since: sleep to the new end (at least a second on, should the clocks disagree).
          const now = workflowNow().getTime();
          leaseUntil = looked.leaseUntil ? Math.max(Date.parse(looked.leaseUntil), now + 1000) : now + claimLeaseSeconds * 1000;
          continue;
        }
        leaseUntil = null;
        moveTo(looked.status, looked.errorCode ?? null);
      }
      while (view.status === 'claimed') {
        renewed = false;
        const changed = await condition(() => view.status !== 'claimed' || renewed, `${claimLeaseSeconds} seconds`);
        if (!changed) {
          const expired = await steps.expireClaim({ stepId: input.stepId, claimedAt: view.claimedAt! });
          moveTo(expired.status, expired.errorCode ?? null);
        }
      }
    }
    // Let an update that just settled the step deliver its answer before the run closes.
    await condition(allHandlersFinished);
  } while (!terminal.has(view.status));
  return view;
}
