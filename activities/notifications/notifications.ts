/** The notification workflows' activities: thin doors to services/notifications and the store. */
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import type { AttemptResult } from '../../domain/notifications/webhooks.js';
import type { NotificationChannel } from '../../domain/notifications/rules.js';
import { attemptDelivery, type AttemptInput } from '../../services/notifications/delivery.js';
import { planEventDeliveries } from '../../store/notifications/deliveries.js';

export interface NotificationActivities {
  planNotificationDeliveries(input: { eventId: string }): Promise<{ id: string; run: number; channel: NotificationChannel }[]>;
  attemptNotificationDelivery(input: AttemptInput): Promise<AttemptResult>;
}

export function createNotificationActivities(deps: { sql: Sql; integrations: Pick<Integrations, 'notifications' | 'mailer' | 'secretsKeys'> }): NotificationActivities {
  return {
    planNotificationDeliveries: ({ eventId }) => deps.sql.begin((tx) => planEventDeliveries(tx, eventId)),
    attemptNotificationDelivery: (input) => attemptDelivery(deps.sql, deps.integrations, input),
  };
}
