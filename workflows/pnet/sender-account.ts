/**
 * A sender account's own timers: the housekeeping reads it schedules and the end of a
 * checkpoint's back-off. It sleeps until the next one falls due, or until the API signals that
 * the account changed (settings, a checkpoint reported), and continues-as-new before its history
 * grows long.
 */
import { condition, continueAsNew, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import { msUntil, workflowNow } from '../shared/clock.js';
import type { SenderAccountActivities } from '../../activities/pnet/sender-account.js';
import {
  accountChangedSignal,
  senderAccountStateQuery,
  type AccountClock,
  type SenderAccountInput,
} from './sender-account.contract.js';

/** While the account is not connected (or nothing is scheduled) it looks again this often. */
const idleCheckMs = 15 * 60 * 1000;
const minTickMs = 30 * 1000;
/** Ticks per run before continuing as new: a few events each keep the history far below its limits. */
const ticksPerRun = 200;

const clock = proxyActivities<SenderAccountActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

export async function senderAccountWorkflow(input: SenderAccountInput): Promise<void> {
  let changed = false;
  let state: AccountClock | null = null;
  setHandler(accountChangedSignal, () => {
    changed = true;
  });
  setHandler(senderAccountStateQuery, () => state);

  for (let tick = 0; tick < ticksPerRun && !workflowInfo().continueAsNewSuggested; tick++) {
    changed = false;
    state = await clock.tickSenderAccount({ accountId: input.accountId, now: workflowNow().toISOString() });
    const dueTimes = [state.checkpointUntil, state.nextCheckAt].filter((t): t is string => t !== null).map(msUntil);
    // A floor, so a clock that reads a due time already past can never spin the loop.
    const sleepMs = Math.max(minTickMs, Math.min(idleCheckMs, ...dueTimes));
    await condition(() => changed, sleepMs);
  }
  await continueAsNew<typeof senderAccountWorkflow>(input);
}
