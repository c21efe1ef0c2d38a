/**
 * The payout cycle's Temporal side (decision 044): the program-wide Schedule
 * `affiliate-payout-cycle/<task queue>` (a calendar spec: the configured day of each month at 00:00
 * UTC, overlap SKIP, a day of catch-up), made once when the worker starts and kept as it is
 * afterwards (its day follows AFFILIATE_PAYOUT_DAY: a changed day updates it), and a cycle run by
 * hand for a time. Pausing the program is a payout gate in Postgres, not a paused Schedule: a cycle
 * still runs, follows its open payouts, and pays nobody while paused.
 */
import {
  ScheduleAlreadyRunning,
  ScheduleOverlapPolicy,
  WorkflowExecutionAlreadyStartedError,
} from '@temporalio/client';
import { payoutPeriodOf } from '../../domain/affiliates/payout-gates.js';
import {
  affiliatePayoutScheduleId,
  payoutCycleWorkflowId,
  type PayoutCycleInput,
  type PayoutCycleResult,
} from '../../workflows/affiliates/payout-cycle.contract.js';
import type { TemporalHandle } from '../deps.js';

/** Makes the monthly Schedule when missing, or moves it to the configured day. */
export async function ensurePayoutSchedule(
  temporal: TemporalHandle,
  dayOfMonth: number,
): Promise<'created' | 'kept' | 'updated'> {
  const spec = { calendars: [{ dayOfMonth, hour: 0, minute: 0, comment: 'Affiliate payouts, monthly at 00:00 UTC' }] };
  const scheduleId = affiliatePayoutScheduleId(temporal.taskQueue);
  try {
    await temporal.client.schedule.create({
      scheduleId,
      spec,
      action: {
        type: 'startWorkflow',
        workflowType: 'affiliatePayoutCycleWorkflow',
        args: [{}],
        taskQueue: temporal.taskQueue,
        workflowId: scheduleId,
      },
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 day' },
      memo: { what: 'affiliate payout cycle (decision 044)' },
    });
    return 'created';
  } catch (error) {
    if (!(error instanceof ScheduleAlreadyRunning)) throw error;
  }
  const handle = temporal.client.schedule.getHandle(scheduleId);
  const described = await handle.describe();
  const days = described.spec.calendars?.[0]?.dayOfMonth;
  const current = Array.isArray(days) ? days[0] : days;
  const start = typeof current === 'object' && current !== null && 'start' in current ? current.start : current;
  if (start === dayOfMonth) return 'kept';
  await handle.update((previous) => ({ ...previous, spec }));
  return 'updated';
}

/** Keeps trying to make the Schedule (Temporal may start after the worker); stops with the returned function. */
export function keepPayoutScheduleEnsured(
  temporal: TemporalHandle,
  dayOfMonth: number,
  onError: (error: unknown) => void,
): () => Promise<void> {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const attempt = () => {
    if (stopped) return;
    ensurePayoutSchedule(temporal, dayOfMonth).catch((error: unknown) => {
      onError(error);
      if (!stopped) timer = setTimeout(attempt, 60_000);
    });
  };
  attempt();
  return async () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}

/** Runs a cycle now for `at`'s period (an operator or a test); a cycle of that period already running is joined. */
export async function runPayoutCycle(
  temporal: TemporalHandle,
  input: { at: Date; followForMs?: number },
): Promise<PayoutCycleResult> {
  const args: PayoutCycleInput = {
    cycleAt: input.at.toISOString(),
    ...(input.followForMs !== undefined ? { followForMs: input.followForMs } : {}),
  };
  const workflowId = payoutCycleWorkflowId(temporal.taskQueue, payoutPeriodOf(input.at));
  try {
    const handle = await temporal.client.workflow.start('affiliatePayoutCycleWorkflow', {
      taskQueue: temporal.taskQueue,
      workflowId,
      args: [args],
    });
    return (await handle.result()) as PayoutCycleResult;
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    return (await temporal.client.workflow.getHandle(workflowId).result()) as PayoutCycleResult;
  }
}
