/**
 * One browser step's life, from the Tasks page or the queue to a terminal status. The browser's own
 * transitions (claim, result, release) are committed and answered by the API (decision 046); the API
 * then signals `stepChanged` and this workflow reads the row and owns what time does: the claim's
 * lease timer and the window's deadline. Person-side transitions arrive as Updates whose handlers
 * run the guarded SQL and return the record. Its id, input, signal, Updates and query are in
 * browser-step.contract.ts.
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
  rejectStepUpdate,
  retryStepUpdate,
  stepChangedSignal,
  type BrowserStepInput,
  type BrowserStepView,
  type CancelRequest,
  type RejectRequest,
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
  retry: {
    initialInterval: '1 second',
    maximumInterval: '30 seconds',
    nonRetryableErrorTypes: ['conflict', 'not_found'],
  },
});

function refuseUnlessAwaiting(view: BrowserStepView, action: string): void {
  if (view.status !== 'awaiting_approval')
    throw ApplicationFailure.nonRetryable(`The step is ${view.status}; it cannot be ${action}.`, 'conflict');
}

export async function browserStepWorkflow(input: BrowserStepInput): Promise<BrowserStepView> {
  const view: BrowserStepView = { stepId: input.stepId, status: input.status, claimedAt: null, claims: 0 };
  /**
   * The transitions run one at a time, each with the view change it makes. Two Updates accepted
   * in one task (a cancel and a retry racing) would otherwise run their local activities side by
   * side, and which finished first decided where the main loop's next timer fell among their
   * completions; a replay, which has both results at once, ordered them differently and failed as
   * non-deterministic (found by the chaos run; test/integration/browser-step-updates.test.ts).
   */
  const transitions = new Mutex();
  const tracked = workflowInfo().typedSearchAttributes.get(StepStatusKey) !== undefined;
  const moveTo = (status: StoredStepStatus, errorCode: string | null = null) => {
    if (status === view.status) return;
    view.status = status;
    if (!tracked) return;
    // Operators find every step that ended one way (claim_expired, say) by its error code.
    upsertSearchAttributes([
      { key: StepStatusKey, value: status },
      ...(errorCode !== null ? [{ key: StepErrorCodeKey, value: errorCode }] : []),
    ]);
  };
  const seeClaim = (claimedAt: string | null) => {
    if (claimedAt !== null && claimedAt !== view.claimedAt) view.claims += 1;
    view.claimedAt = claimedAt;
  };
  /**
   * Runs a person's transition (under the lock) and moves the view to `status`, by default the
   * step's own (the record shows a cancelled step as failed; the view keeps the stored status).
   */
  const transition = (run: () => Promise<StepTransitionResult>, status?: StoredStepStatus) =>
    transitions.runExclusive(async () => {
      const result = await run();
      // A person's transition never leaves the step claimed (a claimed step refuses them all).
      seeClaim(null);
      moveTo(status ?? result.step.status, result.step.error_code);
      return result;
    });

  /** Set by `stepChanged`: the API committed a browser's transition this run has not read. */
  let told = false;
  const readChange = () =>
    transitions.runExclusive(async () => {
      told = false;
      const row = await steps.readStepChange({ stepId: input.stepId });
      seeClaim(row.claimedAt);
      moveTo(row.status, row.errorCode);
    });

  setHandler(stepChangedSignal, () => {
    told = true;
  });
  setHandler(browserStepStateQuery, () => view);
  // A browser never moves a step awaiting approval, so the view refuses approve and reject
  // cheaply. Retry and cancel refuse in SQL: a browser's claim or result may be committed and not
  // read here yet, so for them the view can lag the row.
  setHandler(approveStepUpdate, () => transition(() => steps.approveStep({ stepId: input.stepId }), 'queued'), {
    validator: () => refuseUnlessAwaiting(view, 'approved'),
  });
  setHandler(
    rejectStepUpdate,
    ({ reason }: RejectRequest) => transition(() => steps.rejectStep({ stepId: input.stepId, reason }), 'rejected'),
    {
      validator: (_request: RejectRequest) => refuseUnlessAwaiting(view, 'rejected'),
    },
  );
  setHandler(retryStepUpdate, () => transition(() => steps.retryStep({ stepId: input.stepId })));
  setHandler(cancelStepUpdate, ({ errorCode }: CancelRequest) =>
    transition(() => steps.cancelStep({ stepId: input.stepId, errorCode }), 'cancelled'),
  );

  // A retry reopens a settled step, so the run closes only when it is settled and idle.
  do {
    while (!terminal.has(view.status)) {
      if (view.status !== 'claimed') {
        // Waiting for a browser (or a person): the API's signal, or the window's deadline.
        const woken = () => told || terminal.has(view.status) || view.status === 'claimed';
        if (input.runBefore === undefined) await condition(woken);
        else if (!(await condition(woken, Math.max(1, msUntil(input.runBefore))))) {
          // Past its deadline while still waiting (a claim committed meanwhile wins the race in SQL).
          await transitions.runExclusive(async () => {
            const missed = await steps.missWindow({ stepId: input.stepId });
            moveTo(missed.status, missed.errorCode ?? null);
          });
        }
        if (told) await readChange();
        continue;
      }
      // The claim's lease: every check-in of the running browser moves its end (recorded in SQL);
      // the timer looks when the lease would end and sleeps on to the renewed end, so silence for
      // a whole lease lapses the claim and a long run costs one look per lease.
      let leaseUntil: number | null = null;
      while (view.status === 'claimed') {
        const claim = view.claimedAt!;
        leaseUntil ??= Date.parse(claim) + claimLeaseSeconds * 1000;
        const ms = leaseUntil - workflowNow().getTime();
        if (await condition(() => told || view.status !== 'claimed' || view.claimedAt !== claim, Math.max(1, ms))) {
          if (told) await readChange();
          if (view.claimedAt !== claim) leaseUntil = null;
          continue;
        }
        leaseUntil = await transitions.runExclusive(async () => {
          const looked = await steps.expireClaim({
            stepId: input.stepId,
            claimedAt: claim,
            now: workflowNow().toISOString(),
          });
          if (looked.status === 'claimed') {
            // Renewed since: sleep to the new end (at least a second on, should the clocks disagree).
            const now = workflowNow().getTime();
            return looked.leaseUntil
              ? Math.max(Date.parse(looked.leaseUntil), now + 1000)
              : now + claimLeaseSeconds * 1000;
          }
          seeClaim(null);
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
