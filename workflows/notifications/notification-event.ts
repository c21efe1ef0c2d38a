/**
 * Delivers a batch of workspace events to every channel their rules and endpoints name (decisions
 * 038, 045). One activity plans every delivery of the batch and makes every first attempt at once,
 * so a batch whose receivers answer 2xx costs one workflow start, one activity and the workflow's
 * completion, however many events it holds. Only the failed deliveries then follow the retry
 * schedule (at once, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h; a longer Retry-After wins) on this
 * workflow's timers, grouped by their wait: deliveries that fail alike share one timer and one
 * activity per round. Each attempt records itself, so a worker killed mid-batch resumes where it
 * was and a recorded attempt answers a retried activity. A replay of one delivery runs the same
 * retry loop under its own workflow.
 */
import { workflowNow } from '../shared/clock.js';
import { proxyActivities, sleep } from '@temporalio/workflow';
import type { NotificationActivities } from '../../activities/notifications/notifications.js';
import { retryGroups, type AttemptedDelivery } from '../../domain/notifications/webhooks.js';
import type {
  NotificationBatchInput,
  NotificationBatchOutcome,
  NotificationReplayInput,
} from './notification-event.contract.js';

const { sendNotificationDigests } = proxyActivities<NotificationActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});
// A request waits at most 15 s for its receiver (three redirects share that limit); a batch's
// requests go out a few dozen at a time. The heartbeat (every second while requests are out)
// tells a killed worker within 10 s.
const { deliverNotificationBatch, attemptNotificationDeliveries } = proxyActivities<NotificationActivities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

/** Retries what failed at attempt number `attempt`, round after round; answers how many then succeeded. */
async function retryFailed(
  attempted: AttemptedDelivery[],
  attempt: number,
  trigger: 'scheduled' | 'replay',
): Promise<number> {
  const rounds = retryGroups(attempted, attempt).map(async (group) => {
    await sleep(group.afterSeconds * 1000);
    const results = await attemptNotificationDeliveries({
      deliveries: group.deliveries,
      attempt: attempt + 1,
      trigger,
      at: workflowNow().toISOString(),
    });
    return (
      results.filter((r) => r.result.kind === 'succeeded').length + (await retryFailed(results, attempt + 1, trigger))
    );
  });
  return (await Promise.all(rounds)).reduce((a, b) => a + b, 0);
}

export async function notificationBatchWorkflow(input: NotificationBatchInput): Promise<NotificationBatchOutcome> {
  const first = await deliverNotificationBatch({ eventIds: input.eventIds, at: workflowNow().toISOString() });
  const retried = await retryFailed(first.failed, 1, 'scheduled');
  return { events: input.eventIds.length, deliveries: first.deliveries, succeeded: first.succeeded + retried };
}

export async function notificationReplayWorkflow(input: NotificationReplayInput): Promise<boolean> {
  const delivery = { id: input.deliveryId, run: input.run };
  const [first] = await attemptNotificationDeliveries({
    deliveries: [delivery],
    attempt: 1,
    trigger: 'replay',
    at: workflowNow().toISOString(),
  });
  if (first!.result.kind === 'succeeded') return true;
  return (await retryFailed([first!], 1, 'replay')) > 0;
}

/**
 * The daily digest (run by its cron schedule, `notificationDigestCron`): every member's waiting
 * digest deliveries in one email each.
 */
export async function notificationDigestWorkflow(): Promise<number> {
  return sendNotificationDigests({});
}
