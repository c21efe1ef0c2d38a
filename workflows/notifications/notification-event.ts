/**
 * Delivers one workspace event to every channel its rules and endpoints name (issue 21; decision
 * 038): the deliveries are planned once (an activity, idempotent), then each is attempted on the
 * retry schedule (at once, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h; a longer Retry-After wins),
 * in parallel. Each attempt is one activity that records itself, so a worker killed mid-delivery
 * resumes at the attempt it was on, and the attempt's record answers a retried activity.
 * A replay of one delivery runs the same loop under its own workflow.
 */
import { workflowNow } from '../shared/clock.js';
import { proxyActivities, sleep } from '@temporalio/workflow';
import type { NotificationActivities } from '../../activities/notifications/notifications.js';
import { decideNext } from '../../domain/notifications/webhooks.js';
import type { NotificationEventInput, NotificationEventOutcome, NotificationReplayInput } from './notification-event.contract.js';

const { planNotificationDeliveries, sendNotificationDigests } = proxyActivities<NotificationActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});
// An attempt waits at most 15 s for the receiver (three redirects share that limit).
const { attemptNotificationDelivery } = proxyActivities<NotificationActivities>({
  startToCloseTimeout: '45 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

async function deliver(deliveryId: string, run: number, trigger: 'scheduled' | 'replay'): Promise<boolean> {
  for (let attempt = 1; ; attempt += 1) {
    const result = await attemptNotificationDelivery({ deliveryId, run, attempt, trigger, at: workflowNow().toISOString() });
    const next = decideNext(result, attempt);
    if (next.kind === 'done') return result.kind === 'succeeded';
    if (next.kind === 'give_up') return false;
    await sleep(next.afterSeconds * 1000);
  }
}

export async function notificationEventWorkflow(input: NotificationEventInput): Promise<NotificationEventOutcome> {
  const deliveries = await planNotificationDeliveries({ eventId: input.eventId });
  const results = await Promise.all(deliveries.map((d) => deliver(d.id, d.run, 'scheduled')));
  return { deliveries: deliveries.length, succeeded: results.filter(Boolean).length };
}

export async function notificationReplayWorkflow(input: NotificationReplayInput): Promise<boolean> {
  return deliver(input.deliveryId, input.run, 'replay');
}

/**
 * The daily digest (run by its cron schedule, `notificationDigestCron`): every member's waiting
 * digest deliveries in one email each.
 */
export async function notificationDigestWorkflow(): Promise<number> {
  return sendNotificationDigests({});
}
