/**
 * The step-signal sweeper (decision 046): the API commits a browser's claim, result or release and
 * signals the step's workflow afterwards, so a process that dies between the two (or a Temporal
 * server unreachable then) leaves a change no workflow has read, perhaps a claim with no lease
 * timer. The row keeps `signal_due_at` until its workflow reads it; this workflow signals again
 * every step whose change stayed unread for the grace, starting its workflow if need be. So nothing
 * is claimed without a timer for longer than the grace and a turn. Each turn also lapses every
 * claim still held a grace after its lease's end (its lease timer late behind a thawed worker's
 * backlog, or never set), so a silent browser's claim is handed out again on time.
 */
import { continueAsNew, proxyLocalActivities, sleep, workflowInfo } from '@temporalio/workflow';
import { workflowNow } from '../shared/clock.js';
import type { PnetStepActivities } from '../../activities/pnet/steps.js';
import type { StepSignalSweeperInput } from './step-signals.contract.js';

// A local activity: a turn waits for its own workflow task only, not also for an activity task
// behind every step's in the queue (after a worker outage, that queue holds the outage's backlog).
const { resendStepSignals } = proxyLocalActivities<PnetStepActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

/** Steps signalled per turn; a full turn is followed by another at once. */
const perTurn = 500;
/** Turns per run before continuing as new: about eight events each. */
const turnsPerRun = 300;

export async function stepSignalSweeperWorkflow(input: StepSignalSweeperInput): Promise<void> {
  for (let turn = 0; turn < turnsPerRun && !workflowInfo().continueAsNewSuggested; turn += 1) {
    const resent = await resendStepSignals({
      graceSeconds: input.graceSeconds,
      limit: perTurn,
      now: workflowNow().toISOString(),
      taskQueue: input.stepTaskQueue,
    });
    if (resent < perTurn) await sleep(input.everySeconds * 1000);
  }
  await continueAsNew<typeof stepSignalSweeperWorkflow>(input);
}
