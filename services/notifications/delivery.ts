/**
 * One attempt to deliver one event to one channel (issue 21; decision 038), called by the
 * delivery workflow's activity. The attempt is recorded and the delivery settled in one
 * transaction, compare-and-set, so a retried activity records nothing twice; an attempt already
 * recorded (a worker killed after recording) is answered from its record without sending again.
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
import { disableAfterFailingMs, retryScheduleSeconds, webhookIdOf, type AttemptOutcome, type AttemptResult } from '../../domain/notifications/webhooks.js';
import { deliveryById, markDigested, pendingDigest, recordAttempt, recordedAttempt, type DeliveryRow } from '../../store/notifications/deliveries.js';
import { eventById } from '../../store/notifications/outbox.js';
import { endpointById, markEndpointFailing, markEndpointHealthy } from '../../store/notifications/webhooks.js';
import { markTeamChatRevoked, teamChatConnection } from '../../store/notifications/team-chat.js';
import { memberEmailOf } from '../../store/notifications/rules.js';
import { secretsKeyring } from '../platform/sealing.js';

type NotificationIntegrations = Pick<Integrations, 'notifications' | 'mailer' | 'secretsKeys'>;

export const sealingContext = {
  webhookSecret: (endpointId: string) => `webhook_endpoints.secret:${endpointId}`,
  botToken: (workspaceId: string) => `team_chat_connections.bot_token:${workspaceId}`,
  verifier: (workspaceId: string) => `team_chat_authorizations.code_verifier:${workspaceId}`,
};

export async function sealFor(sql: Sql, integrations: Pick<Integrations, 'secretsKeys'>, plaintext: string, context: string): Promise<string> {
  return seal(await secretsKeyring(sql, integrations), plaintext, context);
}

export interface AttemptInput {
  deliveryId: string;
  run: number;
  attempt: number;
  trigger: 'scheduled' | 'replay';
  /** The workflow's clock (time-skipping tests move it): what an endpoint's failing time is measured in. */
  at: string;
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

const resultOf = (t: { outcome: AttemptOutcome; status_code?: number | null; statusCode?: number | null; error: string | null; retryAfterSeconds?: number; permanent?: boolean }): AttemptResult => {
  const status = t.statusCode ?? t.status_code ?? null;
  if (t.outcome === 'succeeded') return { kind: 'succeeded', statusCode: status ?? 0 };
  if (t.outcome === 'skipped') return { kind: 'skipped', reason: t.error ?? 'skipped' };
  return { kind: 'failed', statusCode: status, ...(t.retryAfterSeconds ? { retryAfterSeconds: t.retryAfterSeconds } : {}), ...(t.permanent ? { permanent: true } : {}) };
};

export async function attemptDelivery(sql: Sql, integrations: NotificationIntegrations, input: AttemptInput): Promise<AttemptResult> {
  const delivery = await deliveryById(sql, input.deliveryId);
  if (!delivery || delivery.run !== input.run) return { kind: 'skipped', reason: 'superseded' };
  if (delivery.status !== 'pending') return delivery.status === 'succeeded' ? { kind: 'succeeded', statusCode: 200 } : { kind: 'skipped', reason: delivery.status };
  const recorded = await recordedAttempt(sql, delivery.id, input.run, input.attempt);
  if (recorded) return resultOf(recorded);
  const event = await eventById(sql, delivery.event_id);
  if (!event) return { kind: 'skipped', reason: 'event gone' };

  let tried: Tried;
  if (delivery.channel === 'webhook') tried = await tryWebhook(sql, integrations, delivery, event);
  else if (delivery.channel === 'team_chat') tried = await tryTeamChat(sql, integrations, delivery, event);
  else tried = await tryEmail(sql, integrations, delivery, event);

  const last = input.attempt >= retryScheduleSeconds.length;
  const settle = tried.outcome === 'succeeded' ? 'succeeded' : tried.outcome === 'skipped' ? 'skipped' : last || tried.permanent ? 'failed' : 'pending';
  await sql.begin(async (tx) => {
    const recordedNow = await recordAttempt(tx, { deliveryId: delivery.id, run: input.run, attempt: input.attempt, trigger: input.trigger, ...tried, settle });
    if (!recordedNow || delivery.channel !== 'webhook' || !delivery.webhook_endpoint_id) return;
    if (tried.outcome === 'succeeded') await markEndpointHealthy(tx, delivery.webhook_endpoint_id);
    else if (tried.outcome !== 'skipped') await markEndpointFailing(tx, delivery.webhook_endpoint_id, new Date(input.at), disableAfterFailingMs);
  });
  return resultOf(tried);
}

async function tryWebhook(sql: Sql, integrations: NotificationIntegrations, d: DeliveryRow, event: NonNullable<Awaited<ReturnType<typeof eventById>>>): Promise<Tried> {
  const endpoint = d.webhook_endpoint_id ? await endpointById(sql, d.webhook_endpoint_id) : undefined;
  if (!endpoint) return { outcome: 'skipped', statusCode: null, excerpt: null, error: 'The endpoint was deleted.', durationMs: 0 };
  if (!endpoint.enabled) return { outcome: 'skipped', statusCode: null, excerpt: null, error: 'The endpoint is disabled.', durationMs: 0 };
  const keyring = await secretsKeyring(sql, integrations);
  const secrets: string[] = [];
  try {
    secrets.push(unseal(keyring, endpoint.secret_sealed, sealingContext.webhookSecret(endpoint.id)));
    if (endpoint.previous_secret_sealed && endpoint.previous_secret_expires_at && endpoint.previous_secret_expires_at.getTime() > Date.now()) {
      secrets.push(unseal(keyring, endpoint.previous_secret_sealed, sealingContext.webhookSecret(endpoint.id)));
    }
  } catch (error) {
    if (error instanceof SealedSecretError) return { outcome: 'failed', statusCode: null, excerpt: null, error: `The signing secret cannot be opened: ${error.message} Rotate it.`, durationMs: 0, permanent: true };
    throw error;
  }
  const body = JSON.stringify(event);
  const headers = signedHeaders(secrets, webhookIdOf(d.id), Math.floor(Date.now() / 1000), body);
  const answer = await integrations.notifications.webhooks.post(endpoint.url, body, headers);
  if (answer.kind === 'answered') {
    const ok = answer.status >= 200 && answer.status < 300;
    return {
      outcome: ok ? 'succeeded' : 'failed', statusCode: answer.status, excerpt: answer.excerpt, error: ok ? null : `The endpoint answered ${answer.status}.`,
      durationMs: answer.durationMs, ...(answer.retryAfterSeconds !== undefined ? { retryAfterSeconds: Math.min(answer.retryAfterSeconds, 36_000) } : {}),
    };
  }
  return { outcome: answer.kind === 'timeout' ? 'timeout' : answer.kind === 'refused' ? 'refused' : 'failed', statusCode: null, excerpt: null, error: answer.error, durationMs: answer.durationMs };
}

async function tryTeamChat(sql: Sql, integrations: NotificationIntegrations, d: DeliveryRow, event: NonNullable<Awaited<ReturnType<typeof eventById>>>): Promise<Tried> {
  const skipped = (error: string): Tried => ({ outcome: 'skipped', statusCode: null, excerpt: null, error, durationMs: 0 });
  const client = integrations.notifications.teamChat;
  if ('missing' in client) return skipped(`The team chat is not configured here (${client.missing.join(', ')}).`);
  const connection = await teamChatConnection(sql, d.workspace_id);
  if (!connection) return skipped('The team chat is disconnected; the rule keeps its channel for a reconnect.');
  if (connection.status !== 'connected') return skipped(`The team chat needs reconnecting: ${connection.last_error ?? 'its token no longer works'}.`);
  let token: string;
  try {
    token = unseal(await secretsKeyring(sql, integrations), connection.bot_token_sealed, sealingContext.botToken(d.workspace_id));
  } catch (error) {
    if (!(error instanceof SealedSecretError)) throw error;
    await markTeamChatRevoked(sql, d.workspace_id, connection.bot_token_sealed, `The stored token cannot be opened: ${error.message}`);
    return skipped('The team chat needs reconnecting: its stored token cannot be opened.');
  }
  const started = Date.now();
  try {
    const posted = await client.postMessage(token, { channel: d.chat_channel_id!, ...teamChatMessage(event) });
    return { outcome: 'succeeded', statusCode: 200, excerpt: `ok ts=${posted.ts}`, error: null, durationMs: Date.now() - started };
  } catch (error) {
    if (!(error instanceof TeamChatError)) throw error;
    const durationMs = Date.now() - started;
    if (error.revoked) {
      await markTeamChatRevoked(sql, d.workspace_id, connection.bot_token_sealed, error.message);
      return { ...skipped(`The team chat needs reconnecting: ${error.message}`), durationMs, statusCode: error.status };
    }
    const permanent = error.code === 'channel_not_found' || error.code === 'not_in_channel';
    return {
      outcome: 'failed', statusCode: error.status, excerpt: error.code, error: permanent ? `${error.message} Invite the app to the channel or pick another.` : error.message, durationMs,
      ...(error.retryAfterSeconds ? { retryAfterSeconds: error.retryAfterSeconds } : {}), ...(permanent ? { permanent } : {}),
    };
  }
}

async function tryEmail(sql: Sql, integrations: NotificationIntegrations, d: DeliveryRow, event: NonNullable<Awaited<ReturnType<typeof eventById>>>): Promise<Tried> {
  const mailer = integrations.mailer;
  if (!mailer) return { outcome: 'skipped', statusCode: null, excerpt: null, error: 'No mail server is configured here (SMTP_URL).', durationMs: 0 };
  const email = await memberEmailOf(sql, d.member_id);
  if (!email) return { outcome: 'skipped', statusCode: null, excerpt: null, error: 'The member left the workspace.', durationMs: 0 };
  const started = Date.now();
  try {
    const mail = memberEmail(event);
    const sent = await mailer.send({ messageId: `<notification.${d.id}@${mailer.domain}>`, from: { name: 'Notifications', address: mailer.defaultFrom }, to: email, ...mail });
    return { outcome: 'succeeded', statusCode: null, excerpt: sent.response.slice(0, 200), error: null, durationMs: Date.now() - started };
  } catch (error) {
    return { outcome: 'failed', statusCode: null, excerpt: null, error: `The mail server refused: ${(error as Error).message}`.slice(0, 500), durationMs: Date.now() - started };
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
  await mailer.send({ messageId: `<digest.${items[0]!.id}.${randomUUID()}@${mailer.domain}>`, from: { name: 'Notifications', address: mailer.defaultFrom }, to: email, ...mail });
  return markDigested(sql, items.map((i) => i.id));
}
