/**
 * Delivering events to their channels (decisions 038, 045): a batch's plan and first attempts
 * (deliverBatch), and any attempt number of several deliveries (attemptDeliveries), each attempt
 * recorded and its delivery settled compare-and-set, so a retried activity records nothing twice;
 * an attempt already recorded is answered from its record without sending again.
 *
 * Deduplication: a webhook carries the delivery's stable `webhook-id`, the same on every retry
 * and replay, so a receiver deduplicates; team chat and email cannot deduplicate, so a worker
 * killed between sending and recording sends that one message at most once more.
 */
import { randomUUID } from 'node:crypto';
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import { SealedSecretError, seal, unseal } from '../../integrations/secrets/sealed.js';
import { signedHeaders } from '../../integrations/webhooks/signing.js';
import { TeamChatError } from '../../integrations/team-chat/client.js';
import { memberEmail, teamChatMessage, digestEmail } from '../../domain/notifications/render.js';
import {
  disableAfterFailingMs,
  retryScheduleSeconds,
  webhookIdOf,
  type AttemptedDelivery,
  type AttemptOutcome,
  type AttemptResult,
} from '../../domain/notifications/webhooks.js';
import type { WorkspaceEvent } from '../../domain/notifications/events.js';
import type { Keyring } from '../../integrations/secrets/sealed.js';
import {
  deliveriesByIds,
  markDigested,
  pendingDigest,
  planBatchDeliveries,
  recordAttempts,
  recordedAttempts,
  type DeliveryRow,
  type NewAttempt,
} from '../../store/notifications/deliveries.js';
import { eventsByIds } from '../../store/notifications/outbox.js';
import {
  endpointsByIds,
  lockEndpoints,
  markEndpointFailing,
  type EndpointRow,
} from '../../store/notifications/webhooks.js';
import {
  markTeamChatRevoked,
  teamChatConnection,
  type TeamChatConnectionRow,
} from '../../store/notifications/team-chat.js';
import { memberEmailOf } from '../../store/notifications/rules.js';
import { secretsKeyring } from '../platform/sealing.js';

type NotificationIntegrations = Pick<Integrations, 'notifications' | 'mailer' | 'secretsKeys'>;

export const sealingContext = {
  webhookSecret: (endpointId: string) => `webhook_endpoints.secret:${endpointId}`,
  botToken: (workspaceId: string) => `team_chat_connections.bot_token:${workspaceId}`,
  verifier: (workspaceId: string) => `team_chat_authorizations.code_verifier:${workspaceId}`,
};

export async function sealFor(
  sql: Sql,
  integrations: Pick<Integrations, 'secretsKeys'>,
  plaintext: string,
  context: string,
): Promise<string> {
  return seal(await secretsKeyring(sql, integrations), plaintext, context);
}

export interface AttemptsInput {
  deliveries: { id: string; run: number }[];
  /** The attempt number these are (1 for the first). */
  attempt: number;
  trigger: 'scheduled' | 'replay';
  /** The workflow's clock (time-skipping tests move it): what an endpoint's failing time is measured in. */
  at: string;
}

export interface AttemptOptions {
  /** How many attempts are in flight at once (default 32; the sender keeps connections alive). */
  concurrency?: number;
  /**
   * Aborted when the activity is cancelled (its worker is going away): no attempt starts after it;
   * those already out are recorded as they end. The retried activity answers each from its record
   * or, for an attempt whose worker died before recording it, sends again with the same `webhook-id`.
   */
  signal?: AbortSignal;
  /** Rows already read (the plan's), so the batch's first attempts read nothing twice. */
  rows?: DeliveryRow[];
}

interface Tried {
  outcome: AttemptOutcome;
  statusCode: number | null;
  excerpt: string | null;
  error: string | null;
  durationMs: number;
  retryAfterSeconds?: number;
  permanent?: boolean;
}

const resultOf = (t: {
  outcome: AttemptOutcome;
  status_code?: number | null;
  statusCode?: number | null;
  error: string | null;
  retryAfterSeconds?: number;
  permanent?: boolean;
}): AttemptResult => {
  const status = t.statusCode ?? t.status_code ?? null;
  if (t.outcome === 'succeeded') return { kind: 'succeeded', statusCode: status ?? 0 };
  if (t.outcome === 'skipped') return { kind: 'skipped', reason: t.error ?? 'skipped' };
  return {
    kind: 'failed',
    statusCode: status,
    ...(t.retryAfterSeconds ? { retryAfterSeconds: t.retryAfterSeconds } : {}),
    ...(t.permanent ? { permanent: true } : {}),
  };
};

/** What one batch of attempts reads once: the events, the endpoints, the keyring, each workspace's team-chat connection. */
interface Shared {
  events: Map<string, WorkspaceEvent>;
  endpoints: Map<string, EndpointRow>;
  keyring: () => Promise<Keyring>;
  connections: Map<string, Promise<TeamChatConnectionRow | undefined>>;
}

const memo = <T>(make: () => Promise<T>) => {
  let made: Promise<T> | undefined;
  return () => (made ??= make());
};

async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return results;
}

const aborted = () =>
  Object.assign(new Error('The attempts were cancelled: their worker is going away.'), { name: 'AbortError' });

/**
 * Attempts number `input.attempt` of several deliveries at once (bounded), each recorded and its
 * delivery settled compare-and-set (many per statement), so a retried activity records nothing twice.
 * An attempt already recorded (a worker killed after recording) is answered from its record
 * without sending; a delivery no longer pending is answered from its status; a delivery replayed
 * since (another run) is skipped as superseded. Answers one result per delivery, in order.
 */
export async function attemptDeliveries(
  sql: Sql,
  integrations: NotificationIntegrations,
  input: AttemptsInput,
  options: AttemptOptions = {},
): Promise<AttemptedDelivery[]> {
  const ids = input.deliveries.map((d) => d.id);
  const [rows, recorded] = await Promise.all([
    options.rows ?? deliveriesByIds(sql, ids),
    recordedAttempts(sql, input.deliveries, input.attempt),
  ]);
  const byId = new Map(rows.map((r) => [r.id, r]));
  const [events, endpoints] = await Promise.all([
    eventsByIds(sql, [...new Set(rows.map((r) => r.event_id))]),
    endpointsByIds(sql, [...new Set(rows.flatMap((r) => (r.webhook_endpoint_id ? [r.webhook_endpoint_id] : [])))]),
  ]);
  const shared: Shared = {
    events,
    endpoints,
    keyring: memo(() => secretsKeyring(sql, integrations)),
    connections: new Map(),
  };
  const record = attemptRecorder(sql, new Date(input.at));
  return mapLimit(input.deliveries, options.concurrency ?? 32, async ({ id, run }): Promise<AttemptedDelivery> => {
    const answer = (result: AttemptResult): AttemptedDelivery => ({ id, run, result });
    if (options.signal?.aborted) throw aborted();
    const delivery = byId.get(id);
    if (!delivery || delivery.run !== run) return answer({ kind: 'skipped', reason: 'superseded' });
    if (delivery.status !== 'pending')
      return answer(
        delivery.status === 'succeeded'
          ? { kind: 'succeeded', statusCode: 200 }
          : { kind: 'skipped', reason: delivery.status },
      );
    const before = recorded.get(`${id}:${run}`);
    if (before) return answer(resultOf(before));
    const event = shared.events.get(delivery.event_id);
    if (!event) return answer({ kind: 'skipped', reason: 'event gone' });

    let tried: Tried;
    if (delivery.channel === 'webhook') tried = await tryWebhook(shared, integrations, delivery, event);
    else if (delivery.channel === 'team_chat') tried = await tryTeamChat(sql, shared, integrations, delivery, event);
    else tried = await tryEmail(sql, integrations, delivery, event);

    const last = input.attempt >= retryScheduleSeconds.length;
    const settle =
      tried.outcome === 'succeeded'
        ? 'succeeded'
        : tried.outcome === 'skipped'
          ? 'skipped'
          : last || tried.permanent
            ? 'failed'
            : 'pending';
    const endpointId = delivery.channel === 'webhook' ? delivery.webhook_endpoint_id : null;
    const recordedNow = await record({
      deliveryId: id,
      run,
      attempt: input.attempt,
      trigger: input.trigger,
      ...tried,
      settle,
      healthyEndpointId: tried.outcome === 'succeeded' ? endpointId : null,
      failingEndpointId: tried.outcome !== 'succeeded' && tried.outcome !== 'skipped' ? endpointId : null,
    });
    if (recordedNow) return answer(resultOf(tried));
    // Another run of this activity recorded it first: its record is the answer.
    const [theirs] = (await recordedAttempts(sql, [{ id, run }], input.attempt)).values();
    return answer(theirs ? resultOf(theirs) : { kind: 'skipped', reason: 'superseded' });
  });
}

type ToRecord = NewAttempt & { healthyEndpointId: string | null; failingEndpointId: string | null };

/**
 * Records attempts as they finish, many per transaction: one flush at a time, and whatever
 * finished meanwhile goes in the next. A failed webhook attempt marks its endpoint failing (and
 * disables it after 5 days) in the transaction that records it. Answers whether this call
 * recorded the attempt.
 */
function attemptRecorder(sql: Sql, at: Date): (attempt: ToRecord) => Promise<boolean> {
  let queue: { attempt: ToRecord; done: (recorded: boolean) => void; fail: (error: unknown) => void }[] = [];
  let flushing = false;
  async function flush() {
    flushing = true;
    while (queue.length > 0) {
      const items = queue;
      queue = [];
      try {
        const recorded = await sql.begin(async (tx) => {
          // Batches to the same endpoints flush at once: each takes their rows in one order first,
          // or two flushes marking one endpoint healthy and another failing deadlock (seen under load).
          await lockEndpoints(
            tx,
            items.flatMap((i) =>
              [i.attempt.healthyEndpointId, i.attempt.failingEndpointId].filter((id): id is string => id !== null),
            ),
          );
          const made = await recordAttempts(
            tx,
            items.map((i) => i.attempt),
          );
          const failing = new Set(
            items.flatMap((i) =>
              i.attempt.failingEndpointId && made.has(i.attempt.deliveryId) ? [i.attempt.failingEndpointId] : [],
            ),
          );
          for (const endpointId of failing) await markEndpointFailing(tx, endpointId, at, disableAfterFailingMs);
          return made;
        });
        for (const i of items) i.done(recorded.has(i.attempt.deliveryId));
      } catch (error) {
        for (const i of items) i.fail(error);
      }
    }
    flushing = false;
  }
  return (attempt) =>
    new Promise<boolean>((done, fail) => {
      queue.push({ attempt, done, fail });
      if (!flushing) void flush();
    });
}

export interface BatchOutcome {
  /** Deliveries of the batch's events (not counting digests). */
  deliveries: number;
  succeeded: number;
  /** The first attempts that failed and may be retried, for the workflow's retry loop. */
  failed: AttemptedDelivery[];
}

/**
 * A batch of committed events: plans every delivery (idempotent, one transaction) and makes every
 * first attempt at once (bounded, recorded). Retried after a killed worker, it plans nothing
 * twice, answers settled deliveries from their status and recorded attempts from their record.
 */
export async function deliverBatch(
  sql: Sql,
  integrations: NotificationIntegrations,
  input: { eventIds: string[]; at: string },
  options: AttemptOptions = {},
): Promise<BatchOutcome> {
  const rows = await sql.begin((tx) => planBatchDeliveries(tx, input.eventIds));
  const attempted = await attemptDeliveries(
    sql,
    integrations,
    { deliveries: rows.map((r) => ({ id: r.id, run: 1 })), attempt: 1, trigger: 'scheduled', at: input.at },
    { ...options, rows },
  );
  return {
    deliveries: rows.length,
    succeeded: attempted.filter((a) => a.result.kind === 'succeeded').length,
    failed: attempted.filter((a) => a.result.kind === 'failed'),
  };
}

async function tryWebhook(
  shared: Shared,
  integrations: NotificationIntegrations,
  d: DeliveryRow,
  event: WorkspaceEvent,
): Promise<Tried> {
  const endpoint = d.webhook_endpoint_id ? shared.endpoints.get(d.webhook_endpoint_id) : undefined;
  if (!endpoint)
    return { outcome: 'skipped', statusCode: null, excerpt: null, error: 'The endpoint was deleted.', durationMs: 0 };
  if (!endpoint.enabled)
    return { outcome: 'skipped', statusCode: null, excerpt: null, error: 'The endpoint is disabled.', durationMs: 0 };
  const keyring = await shared.keyring();
  const secrets: string[] = [];
  try {
    secrets.push(unseal(keyring, endpoint.secret_sealed, sealingContext.webhookSecret(endpoint.id)));
    if (
      endpoint.previous_secret_sealed &&
      endpoint.previous_secret_expires_at &&
      endpoint.previous_secret_expires_at.getTime() > Date.now()
    ) {
      secrets.push(unseal(keyring, endpoint.previous_secret_sealed, sealingContext.webhookSecret(endpoint.id)));
    }
  } catch (error) {
    if (error instanceof SealedSecretError)
      return {
        outcome: 'failed',
        statusCode: null,
        excerpt: null,
        error: `The signing secret cannot be opened: ${error.message} Rotate it.`,
        durationMs: 0,
        permanent: true,
      };
    throw error;
  }
  const body = JSON.stringify(event);
  const headers = signedHeaders(secrets, webhookIdOf(d.id), Math.floor(Date.now() / 1000), body);
  const answer = await integrations.notifications.webhooks.post(endpoint.url, body, headers);
  if (answer.kind === 'answered') {
    const ok = answer.status >= 200 && answer.status < 300;
    return {
      outcome: ok ? 'succeeded' : 'failed',
      statusCode: answer.status,
      excerpt: answer.excerpt,
      error: ok ? null : `The endpoint answered ${answer.status}.`,
      durationMs: answer.durationMs,
      ...(answer.retryAfterSeconds !== undefined
        ? { retryAfterSeconds: Math.min(answer.retryAfterSeconds, 36_000) }
        : {}),
    };
  }
  return {
    outcome: answer.kind === 'timeout' ? 'timeout' : answer.kind === 'refused' ? 'refused' : 'failed',
    statusCode: null,
    excerpt: null,
    error: answer.error,
    durationMs: answer.durationMs,
  };
}

async function tryTeamChat(
  sql: Sql,
  shared: Shared,
  integrations: NotificationIntegrations,
  d: DeliveryRow,
  event: WorkspaceEvent,
): Promise<Tried> {
  const skipped = (error: string): Tried => ({
    outcome: 'skipped',
    statusCode: null,
    excerpt: null,
    error,
    durationMs: 0,
  });
  const client = integrations.notifications.teamChat;
  if ('missing' in client) return skipped(`The team chat is not configured here (${client.missing.join(', ')}).`);
  let connecting = shared.connections.get(d.workspace_id);
  if (!connecting) shared.connections.set(d.workspace_id, (connecting = teamChatConnection(sql, d.workspace_id)));
  const connection = await connecting;
  if (!connection) return skipped('The team chat is disconnected; the rule keeps its channel for a reconnect.');
  if (connection.status !== 'connected')
    return skipped(`The team chat needs reconnecting: ${connection.last_error ?? 'its token no longer works'}.`);
  let token: string;
  try {
    token = unseal(await shared.keyring(), connection.bot_token_sealed, sealingContext.botToken(d.workspace_id));
  } catch (error) {
    if (!(error instanceof SealedSecretError)) throw error;
    await markTeamChatRevoked(
      sql,
      d.workspace_id,
      connection.bot_token_sealed,
      `The stored token cannot be opened: ${error.message}`,
    );
    return skipped('The team chat needs reconnecting: its stored token cannot be opened.');
  }
  const started = Date.now();
  try {
    const posted = await client.postMessage(token, { channel: d.chat_channel_id!, ...teamChatMessage(event) });
    return {
      outcome: 'succeeded',
      statusCode: 200,
      excerpt: `ok ts=${posted.ts}`,
      error: null,
      durationMs: Date.now() - started,
    };
  } catch (error) {
    if (!(error instanceof TeamChatError)) throw error;
    const durationMs = Date.now() - started;
    if (error.revoked) {
      await markTeamChatRevoked(sql, d.workspace_id, connection.bot_token_sealed, error.message);
      return { ...skipped(`The team chat needs reconnecting: ${error.message}`), durationMs, statusCode: error.status };
    }
    const permanent = error.code === 'channel_not_found' || error.code === 'not_in_channel';
    return {
      outcome: 'failed',
      statusCode: error.status,
      excerpt: error.code,
      error: permanent ? `${error.message} Invite the app to the channel or pick another.` : error.message,
      durationMs,
      ...(error.retryAfterSeconds ? { retryAfterSeconds: error.retryAfterSeconds } : {}),
      ...(permanent ? { permanent } : {}),
    };
  }
}

async function tryEmail(
  sql: Sql,
  integrations: NotificationIntegrations,
  d: DeliveryRow,
  event: WorkspaceEvent,
): Promise<Tried> {
  const mailer = integrations.mailer;
  if (!mailer)
    return {
      outcome: 'skipped',
      statusCode: null,
      excerpt: null,
      error: 'No mail server is configured here (SMTP_URL).',
      durationMs: 0,
    };
  const email = await memberEmailOf(sql, d.member_id);
  if (!email)
    return {
      outcome: 'skipped',
      statusCode: null,
      excerpt: null,
      error: 'The member left the workspace.',
      durationMs: 0,
    };
  const started = Date.now();
  try {
    const mail = memberEmail(event);
    const sent = await mailer.send({
      messageId: `<notification.${d.id}@${mailer.domain}>`,
      from: { name: 'Notifications', address: mailer.defaultFrom },
      to: email,
      ...mail,
    });
    return {
      outcome: 'succeeded',
      statusCode: null,
      excerpt: sent.response.slice(0, 200),
      error: null,
      durationMs: Date.now() - started,
    };
  } catch (error) {
    return {
      outcome: 'failed',
      statusCode: null,
      excerpt: null,
      error: `The mail server refused: ${(error as Error).message}`.slice(0, 500),
      durationMs: Date.now() - started,
    };
  }
}

/**
 * One member's daily digest: their waiting digest deliveries in one email, marked digested after
 * the send (a kill in between sends that digest at most once more). No mailer: they keep waiting.
 */
export async function sendDigest(sql: Sql, integrations: NotificationIntegrations, memberId: string): Promise<number> {
  const mailer = integrations.mailer;
  if (!mailer) return 0;
  const items = await pendingDigest(sql, memberId, 500);
  if (items.length === 0) return 0;
  const email = await memberEmailOf(sql, memberId);
  if (!email) return 0;
  const mail = digestEmail(items);
  await mailer.send({
    messageId: `<digest.${items[0]!.id}.${randomUUID()}@${mailer.domain}>`,
    from: { name: 'Notifications', address: mailer.defaultFrom },
    to: email,
    ...mail,
  });
  return markDigested(
    sql,
    items.map((i) => i.id),
  );
}
