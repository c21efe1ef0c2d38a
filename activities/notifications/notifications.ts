/** The notification workflows' activities: thin doors to services/notifications and the store. */
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import type { Mailer } from '../../integrations/mailer.js';
import type { AttemptResult } from '../../domain/notifications/webhooks.js';
import type { NotificationChannel } from '../../domain/notifications/rules.js';
import { attemptDelivery, sendDigest, type AttemptInput } from '../../services/notifications/delivery.js';
import { membersWithDigest, planEventDeliveries } from '../../store/notifications/deliveries.js';

export interface NotificationActivities {
  planNotificationDeliveries(input: { eventId: string }): Promise<{ id: string; run: number; channel: NotificationChannel }[]>;
  attemptNotificationDelivery(input: AttemptInput): Promise<AttemptResult>;
  /** Sends every member's waiting digest; answers how many deliveries went out in digests. */
  sendNotificationDigests(input: Record<string, never>): Promise<number>;
}

/** `integrations` is read at each call (a test may set a client on it); `mailer` is the worker's (its deps' override, else the integrations'). */
export function createNotificationActivities(deps: { sql: Sql; integrations: Pick<Integrations, 'notifications' | 'secretsKeys'>; mailer: () => Mailer | null }): NotificationActivities {
  const live = () => ({ notifications: deps.integrations.notifications, secretsKeys: deps.integrations.secretsKeys, mailer: deps.mailer() });
  return {
    planNotificationDeliveries: ({ eventId }) => deps.sql.begin((tx) => planEventDeliveries(tx, eventId)),
    attemptNotificationDelivery: (input) => attemptDelivery(deps.sql, live(), input),
    async sendNotificationDigests() {
      let sent = 0;
      for (const m of await membersWithDigest(deps.sql)) sent += await sendDigest(deps.sql, live(), m.member_id);
      return sent;
    },
  };
}
