/**
 * One browser step's life, from the Tasks page or the queue to a terminal status. Person-side
 * transitions arrive as Updates: the validator refuses cheaply from the workflow's own view (the
 * API answers 409), the handler runs the guarded SQL activity and returns the record, so the HTTP
 * answer is the workflow's answer. Its id, input, Updates and query are in browser-step.contract.ts.
 */
import {
    ApplicationFailure,
    allHandlersFinished,
    condition,
    proxyLocalActivities,
    setHandler,
    upsertSearchAttributes,
    workflowInfo,
} from '@temporalio/workflow';
import { Mutex } from 'async-mutex';
import type { StoredStepStatus } from '../../domain/pnet/steps.js';
import { claimLeaseSeconds } from '../../domain/pnet/timing.js';
import { msUntil, workflowNow } from '../shared/clock.js';
import { StepErrorCodeKey, StepStatusKey } from '../shared/search-attributes.js';
import type { PnetStepActivities } from '../../activities/pnet/steps.js';
import {
  approveStepUpdate,
  browserStepStateQuery,
  cancelStepUpdate,
  claimStepUpdate,
  rejectStepUpdate,
  releaseClaimUpdate,
  reportResultUpdate,
  retryStepUpdate,
  type BrowserStepInput,
  type BrowserStepView,
  type CancelRequest,
  type ClaimRequest,
  type RejectRequest,
  type ReleaseRequest,
  type SettleReport,
  type StepTransitionResult,
} from './browser-step.contract.js';

const terminal: ReadonlySet<StoredStepStatus> = new Set(['succeeded', 'failed', 'rejected', 'skipped', 'cancelled']);

/**
 * Every step transition is a few guarded SQL statements: run in the worker as local activities,
 * an Update is accepted, done and answered in one workflow task instead of three tasks and an
 * activity task, which halves the Temporal server's work per step. A worker killed mid-call
 * leaves the Update unaccepted; the next worker's task runs it again, and the SQL is guarded.
 */
const steps = proxyLocalActivities<PnetStepActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', nonRetryableErrorTypes: ['conflict', 'not_found'] },
});

function refuse(view: BrowserStepView, allowed: StoredStepStatus[], action: string): void {
  if (!allowed.includes(view.status)) {
    const shown = view.status === 'awaiting_approval' ? 'awaiting approval' : view.status;
    throw ApplicationFailure.nonRetryable(`The step is ${shown}; it cannot be ${action}.`, 'conflict');
  }
}

export async function browserStepWorkflow(input: BrowserStepInput): Promise<BrowserStepView> {
  const view: BrowserStepView = { stepId: input.stepId, status: input.status, claimedAt: null, claims: 0 };
  /**
   * The transitions run one at a time, each with the view change it makes. Two Updates accepted
   * in one task (a settle and a claim racing) would otherwise run their local activities side by
   * side, and which finished first decided where the main loop's next timer fell among their
   * completions; a replay, which has both results at once, ordered them differently and failed as
   * non-deterministic (found by the chaos run; test/integration/browser-step-updates.test.ts).
   */
  const transitions = new Mutex();
  const tracked = workflowInfo().typedSearchAttributes.get(StepStatusKey) !== undefined;
  const moveTo = (status: StoredStepStatus, errorCode: string | null = null) => {
    view.status = status;
    if (!tracked) return;
    // Operators find every step that ended one way (claim_expired, say) by its error code.
    upsertSearchAttributes([{ key: StepStatusKey, value: status }, ...(errorCode !== null ? [{ key: StepErrorCodeKey, value: errorCode }] : [])]);
  };
  /** Runs a transition (under the lock) and moves the view to `status`, by default the step's own. */
  const transition = (run: () => Promise<StepTransitionResult>, status?: StoredStepStatus, after?: (result: StepTransitionResult) => void) =>
    transitions.runExclusive(async () => {
      const result = await run();
      after?.(result);
      moveTo(status ?? result.step.status, result.step.error_code);
      return result;
    });

  setHandler(browserStepStateQuery, () => view);
  setHandler(
    claimStepUpdate,
    ({ sessionId, verifyFirst }) =>
      transition(
        () => steps.claimStep({ stepId: input.stepId, accountId: input.accountId, sessionId, verifyFirst, now: workflowNow().toISOString() }),
        'claimed',
        (result) => {
          view.claimedAt = result.step.claimed_at;
          view.claims += 1;
        },
      ),
    { validator: (_request: ClaimRequest) => refuse(view, ['queued', 'resuming'], 'claimed') },
  );
  setHandler(
    reportResultUpdate,
    (report) => transition(() => steps.settleStep({ stepId: input.stepId, report })),
    // A late success for a step put back in line is accepted (it ran); the activity decides.
    { validator: (report: SettleReport) => refuse(view, report.status === 'succeeded' ? ['claimed', 'queued', 'resuming'] : ['claimed'], 'settled by this result') },
  );
  setHandler(
    retryStepUpdate,
    () =>
      transition(() => steps.retryStep({ stepId: input.stepId }), undefined, () => {
        view.claimedAt = null;
      }),
    { validator: () => refuse(view, ['failed'], 'retried') },
  );
  setHandler(
    releaseClaimUpdate,
    ({ claimedAt }) => transition(() => steps.releaseClaim({ stepId: input.stepId, claimedAt }), 'queued'),
    { validator: (_release: ReleaseRequest) => refuse(view, ['claimed'], 'released') },
  );
  setHandler(
    approveStepUpdate,
    () => transition(() => steps.approveStep({ stepId: input.stepId }), 'queued'),
    { validator: () => refuse(view, ['awaiting_approval'], 'approved') },
  );
  setHandler(
    rejectStepUpdate,
    ({ reason }) => transition(() => steps.rejectStep({ stepId: input.stepId, reason }), 'rejected'),
    { validator: (_request: RejectRequest) => refuse(view, ['awaiting_approval'], 'rejected') },
  );
  setHandler(
    cancelStepUpdate,
    ({ errorCode }) => transition(() => steps.cancelStep({ stepId: input.stepId, errorCode }), 'cancelled'),
    { validator: (_request: CancelRequest) => refuse(view, ['awaiting_approval', 'queued', 'resuming'], 'cancelled') },
  );

  // A retry reopens a settled step, so the run closes only when it is settled and idle.
  do {
    while (!terminal.has(view.status)) {
      const waited = () => terminal.has(view.status) || view.status === 'claimed';
      if (input.runBefore === undefined) await condition(waited);
      else if (!(await condition(waited, Math.max(1, msUntil(input.runBefore))))) {
        // Past its deadline while still waiting (a claim or a settle in flight wins the race in SQL).
        await transitions.runExclusive(async () => {
          const missed = await steps.missWindow({ stepId: input.stepId });
          moveTo(missed.status, missed.errorCode ?? null);
        });
      }
      // The claim's lease: every check-in of the running browser moves its end (recorded in SQL);
      // the timer looks when the lease would end and sleeps on to the renewed end, so silence for
      // a whole lease lapses the claim and a long run costs one look per lease.
      let leaseUntil: number | null = null;
      while (view.status === 'claimed') {
        const claim = view.claimedAt!;
        leaseUntil ??= workflowNow().getTime() + claimLeaseSeconds * 1000;
        const ms = leaseUntil - workflowNow().getTime();
        if (await condition(() => view.status !== 'claimed' || view.claimedAt !== claim, Math.max(1, ms))) {
          leaseUntil = null;
          continue;
        }
        leaseUntil = await transitions.runExclusive(async () => {
          const looked = await steps.expireClaim({ stepId: input.stepId, claimedAt: claim, now: workflowNow().toISOString() });
          if (looked.status === 'claimed') {
            // Renewed since: sleep to the new end (at least a second on, should the clocks disagree).
            const now = workflowNow().getTime();
            return looked.leaseUntil ? Math.max(Date.parse(looked.leaseUntil), now + 1000) : now + claimLeaseSeconds * 1000;
          }
          moveTo(looked.status, looked.errorCode ?? null);
          return null;
        });
      }
    }
    // Let an update that just settled the step deliver its answer before the run closes.
    await condition(allHandlersFinished);
  } while (!terminal.has(view.status));
  return view;
}
