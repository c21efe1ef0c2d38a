/** The notification workflows' contract (workflows/notifications/notification-event.ts): ids and inputs. */

/** One workflow per event: started by the dispatcher after the event commits; starting it twice is refused by Temporal. */
export const notificationEventWorkflowId = (eventId: string) => `notification-event/${eventId}`;
/** One workflow per replay of one delivery (its run). */
export const notificationReplayWorkflowId = (deliveryId: string, run: number) => `notification-delivery/${deliveryId}/${run}`;

export interface NotificationEventInput {
  eventId: string;
}

export interface NotificationReplayInput {
  deliveryId: string;
  run: number;
}

export interface NotificationEventOutcome {
  deliveries: number;
  succeeded: number;
}

/** The one daily digest workflow: a cron workflow started by the dispatcher (started again is a no-op). */
export const notificationDigestWorkflowId = 'notification-digest';
/** Every day at 08:00 UTC. */
export const notificationDigestCron = '0 8 * * *';
