/**
 * The notification workflows' activities: thin doors to services/notifications and the store.
 * The delivery activities heartbeat every second while their requests are out (a killed worker's
 * batch is retried within the heartbeat timeout, not after its start-to-close limit) and start
 * no attempt once cancelled (those already out are recorded as they end).
 */
import { Context } from '@temporalio/activity';
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import type { Mailer } from '../../integrations/mailer.js';
import type { AttemptedDelivery } from '../../domain/notifications/webhooks.js';
import {
  attemptDeliveries,
  deliverBatch,
  sendDigest,
  type AttemptOptions,
  type AttemptsInput,
  type BatchOutcome,
} from '../../services/notifications/delivery.js';
import { membersWithDigest } from '../../store/notifications/deliveries.js';

export interface NotificationActivities {
  /** Plans a batch of events' deliveries and makes every first attempt; answers the failed ones for the retry loop. */
  deliverNotificationBatch(input: { eventIds: string[]; at: string }): Promise<BatchOutcome>;
  /** One attempt number of several deliveries (a retry round of a batch, or a replay). */
  attemptNotificationDeliveries(input: AttemptsInput): Promise<AttemptedDelivery[]>;
  /** Sends every member's waiting digest; answers how many deliveries went out in digests. */
  sendNotificationDigests(input: Record<string, never>): Promise<number>;
}

/** Runs `work` with a heartbeat every second and the activity's cancellation as its signal (neither outside an activity, as a test may call it). */
async function heartbeating<T>(work: (options: AttemptOptions) => Promise<T>): Promise<T> {
  let context: Context | undefined;
  try {
    context = Context.current();
  } catch {
    return work({});
  }
  const beat = setInterval(() => context.heartbeat(), 1000);
  context.heartbeat();
  try {
    return await work({ signal: context.cancellationSignal });
  } finally {
    clearInterval(beat);
  }
}

/** `integrations` is read at each call (a test may set a client on it); `mailer` is the worker's (its deps' override, else the integrations'). */
export function createNotificationActivities(deps: {
  sql: Sql;
  integrations: Pick<Integrations, 'notifications' | 'secretsKeys'>;
  mailer: () => Mailer | null;
}): NotificationActivities {
  const live = () => ({
    notifications: deps.integrations.notifications,
    secretsKeys: deps.integrations.secretsKeys,
    mailer: deps.mailer(),
  });
  return {
    deliverNotificationBatch: (input) => heartbeating((options) => deliverBatch(deps.sql, live(), input, options)),
    attemptNotificationDeliveries: (input) =>
      heartbeating((options) => attemptDeliveries(deps.sql, live(), input, options)),
    async sendNotificationDigests() {
      let sent = 0;
      for (const m of await membersWithDigest(deps.sql)) sent += await sendDigest(deps.sql, live(), m.member_id);
      return sent;
    },
  };
}
