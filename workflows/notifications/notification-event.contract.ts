/** The notification workflows' contract (workflows/notifications/notification-event.ts): ids and inputs. */

/**
 * One workflow per batch of committed events, named by its first event: started by the
 * dispatcher in the transaction that marks the events dispatched; a start made twice (a
 * dispatcher killed before its commit) is Temporal's refusal, and the dispatcher then marks
 * only the events that workflow was started with (decision 045).
 */
export const notificationBatchWorkflowId = (firstEventId: string) => `notification-batch/${firstEventId}`;
/** One workflow per replay of one delivery (its run). */
export const notificationReplayWorkflowId = (deliveryId: string, run: number) =>
  `notification-delivery/${deliveryId}/${run}`;

/** The most events one batch takes. */
export const notificationBatchMax = 200;

export interface NotificationBatchInput {
  /** Oldest first; at most notificationBatchMax. */
  eventIds: string[];
}

export interface NotificationReplayInput {
  deliveryId: string;
  run: number;
}

export interface NotificationBatchOutcome {
  events: number;
  /** Deliveries of the batch's events (digests not counted). */
  deliveries: number;
  succeeded: number;
}

/**
 * The daily digest workflow of a task queue: a cron workflow started by the dispatcher (started
 * again is a no-op). Per task queue: a lane sharing the namespace digests a database of its own.
 */
export const notificationDigestWorkflowId = (taskQueue: string) => `notification-digest/${taskQueue}`;
/** Every day at 08:00 UTC. */
export const notificationDigestCron = '0 8 * * *';
