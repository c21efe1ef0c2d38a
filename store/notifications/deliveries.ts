/**
 * Deliveries (issue 21): one row per (event, channel), made once by the event's workflow (unique
 * on event and channel key), and every attempt recorded. Each attempt's write is compare-and-set
 * on (delivery, run, status pending) and the attempt row is unique on (delivery, run, attempt),
 * so a retried activity or a killed worker records an attempt once and settles a delivery once.
 */
import type { Db } from '../../db/sql.js';
import type { EventType } from '../../domain/notifications/events.js';
import { planDeliveries, type NotificationChannel } from '../../domain/notifications/rules.js';
import { webhookIdOf, type AttemptOutcome } from '../../domain/notifications/webhooks.js';
import { listRules, preferencesForType } from './rules.js';

export interface DeliveryRow {
  id: string;
  workspace_id: string;
  event_id: string;
  channel: NotificationChannel;
  channel_key: string;
  rule_id: string | null;
  webhook_endpoint_id: string | null;
  member_id: string | null;
  chat_channel_id: string | null;
  status: 'pending' | 'succeeded' | 'failed' | 'skipped' | 'digest_pending' | 'digested';
  run: number;
  attempt_count: number;
}

/** Plans the event's deliveries (once: a second call finds them made) and answers those still to send. */
export async function planEventDeliveries(db: Db, eventId: string): Promise<{ id: string; run: number; channel: NotificationChannel }[]> {
  const [event] = await db<{ workspace_id: string; type: EventType; payload: Record<string, unknown> }[]>`
    select workspace_id, type, payload from workspace_events where id = ${eventId}`;
  if (!event) return [];
  const [rules, endpoints, members, preferences] = await Promise.all([
    listRules(db, event.workspace_id),
    db<{ id: string; event_types: string[]; enabled: boolean; created_by: string | null }[]>`
      select id, event_types, enabled, created_by from webhook_endpoints where workspace_id = ${event.workspace_id}`,
    db<{ id: string }[]>`select id from members where workspace_id = ${event.workspace_id} order by created_at`,
    preferencesForType(db, event.workspace_id, event.type),
  ]);
  // The owner of an endpoint the service disabled is told by email whatever the rules say (or, with no owner left, the admins).
  let alwaysEmail: string[] = [];
  if (event.type === 'webhook.endpoint_disabled') {
    const owner = endpoints.find((e) => e.id === event.payload.endpoint_id)?.created_by;
    alwaysEmail = owner
      ? [owner]
      : (await db<{ id: string }[]>`select id from members where workspace_id = ${event.workspace_id} and role = 'admin'`).map((m) => m.id);
  }
  const planned = planDeliveries({
    event: { type: event.type, payload: event.payload },
    rules,
    endpoints,
    members: members.map((m) => m.id),
    preferences,
    alwaysEmail,
  });
  for (const d of planned) {
    await db`
      insert into notification_deliveries (workspace_id, event_id, channel, channel_key, rule_id, webhook_endpoint_id, member_id, chat_channel_id, status)
      values (${event.workspace_id}, ${eventId}, ${d.channel}, ${d.channelKey}, ${d.ruleId}, ${d.endpointId}, ${d.memberId}, ${d.chatChannelId}, ${d.status})
      on conflict (event_id, channel_key) do nothing`;
  }
  return db<{ id: string; run: number; channel: NotificationChannel }[]>`
    select id, run, channel from notification_deliveries where event_id = ${eventId} and status = 'pending' order by channel_key`;
}

export async function deliveryById(db: Db, id: string): Promise<DeliveryRow | undefined> {
  const [row] = await db<DeliveryRow[]>`select * from notification_deliveries where id = ${id}`;
  return row;
}

export interface RecordedAttempt {
  outcome: AttemptOutcome;
  status_code: number | null;
  error: string | null;
}

export async function recordedAttempt(db: Db, deliveryId: string, run: number, attempt: number): Promise<RecordedAttempt | undefined> {
  const [row] = await db<RecordedAttempt[]>`
    select outcome, status_code, error from notification_delivery_attempts where delivery_id = ${deliveryId} and run = ${run} and attempt = ${attempt}`;
  return row;
}

export interface NewAttempt {
  deliveryId: string;
  run: number;
  attempt: number;
  trigger: 'scheduled' | 'replay';
  outcome: AttemptOutcome;
  statusCode: number | null;
  excerpt: string | null;
  error: string | null;
  durationMs: number;
  /** The delivery's status after this attempt: pending while a retry follows. */
  settle: 'pending' | 'succeeded' | 'failed' | 'skipped';
}

/** Records the attempt and settles the delivery, once (compare-and-set); false when another write got there first. */
export async function recordAttempt(db: Db, a: NewAttempt): Promise<boolean> {
  const [inserted] = await db`
    insert into notification_delivery_attempts (delivery_id, run, attempt, trigger, duration_ms, outcome, status_code, response_excerpt, error)
    select ${a.deliveryId}, ${a.run}, ${a.attempt}, ${a.trigger}, ${Math.max(0, Math.round(a.durationMs))}, ${a.outcome}, ${a.statusCode},
      ${a.excerpt?.replace(/\u0000/g, '').slice(0, 1000) ?? null}, ${a.error?.slice(0, 1000) ?? null}
    where exists (select 1 from notification_deliveries where id = ${a.deliveryId} and run = ${a.run} and status = 'pending')
    on conflict (delivery_id, run, attempt) do nothing
    returning id`;
  if (!inserted) return false;
  await db`
    update notification_deliveries set attempt_count = attempt_count + 1, last_status_code = ${a.statusCode}, last_error = ${a.error?.slice(0, 1000) ?? null},
      status = ${a.settle}, succeeded_at = case when ${a.settle} = 'succeeded' then now() else succeeded_at end, updated_at = now()
    where id = ${a.deliveryId} and run = ${a.run} and status = 'pending'`;
  return true;
}

/** A delivery queued again: a new run (so the next attempts count from 1), pending. Answers the run. */
export async function reopenDelivery(db: Db, deliveryId: string): Promise<number> {
  const [row] = await db<{ run: number }[]>`
    update notification_deliveries set run = run + 1, status = 'pending', attempt_count = 0, updated_at = now()
    where id = ${deliveryId} returning run`;
  return row!.run;
}

/** The endpoint's delivery of the event, made when it had none (the endpoint did not take the type then). */
export async function webhookDeliveryOf(db: Db, workspaceId: string, endpointId: string, eventId: string): Promise<string> {
  const key = `webhook:${endpointId}`;
  const [made] = await db<{ id: string }[]>`
    insert into notification_deliveries (workspace_id, event_id, channel, channel_key, webhook_endpoint_id, status)
    values (${workspaceId}, ${eventId}, 'webhook', ${key}, ${endpointId}, 'failed')
    on conflict (event_id, channel_key) do nothing returning id`;
  if (made) return made.id;
  const [existing] = await db<{ id: string }[]>`select id from notification_deliveries where event_id = ${eventId} and channel_key = ${key}`;
  return existing!.id;
}

interface AttemptListRow {
  id: number;
  delivery_id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  trigger: 'scheduled' | 'replay';
  attempted_at: Date;
  duration_ms: number;
  outcome: AttemptOutcome;
  status_code: number | null;
  response_excerpt: string | null;
  error: string | null;
}

/** An endpoint's attempts, newest first, paged by attempt id. */
export async function listEndpointAttempts(db: Db, endpointId: string, q: { limit: number; before?: number; eventId?: string }) {
  const rows = await db<AttemptListRow[]>`
    select a.id, a.delivery_id, d.event_id, e.type as event_type, a.attempt, a.trigger, a.attempted_at, a.duration_ms, a.outcome, a.status_code,
      a.response_excerpt, a.error
    from notification_delivery_attempts a
    join notification_deliveries d on d.id = a.delivery_id
    join workspace_events e on e.id = d.event_id
    where d.webhook_endpoint_id = ${endpointId}
      ${q.before !== undefined ? db`and a.id < ${q.before}` : db``}
      ${q.eventId ? db`and d.event_id = ${q.eventId}` : db``}
    order by a.id desc limit ${q.limit + 1}`;
  const page = rows.slice(0, q.limit);
  return {
    attempts: page.map((r) => ({ ...r, webhook_id: webhookIdOf(r.delivery_id), attempted_at: r.attempted_at.toISOString() })),
    next_before: rows.length > q.limit ? page[page.length - 1]!.id : null,
  };
}

/** Digest emails waiting for a member, oldest first, with their events. */
export async function pendingDigest(db: Db, memberId: string, limit: number) {
  return db<{ id: string; event_id: string; type: EventType; payload: Record<string, unknown>; occurred_at: Date }[]>`
    select d.id, d.event_id, e.type, e.payload, e.occurred_at from notification_deliveries d join workspace_events e on e.id = d.event_id
    where d.member_id = ${memberId} and d.status = 'digest_pending' order by e.seq limit ${limit}`;
}

export async function membersWithDigest(db: Db): Promise<{ member_id: string; workspace_id: string }[]> {
  return db<{ member_id: string; workspace_id: string }[]>`
    select distinct member_id, workspace_id from notification_deliveries where status = 'digest_pending' and member_id is not null`;
}

export async function markDigested(db: Db, ids: string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const rows = await db`update notification_deliveries set status = 'digested', updated_at = now() where id = any(${ids}::uuid[]) and status = 'digest_pending' returning id`;
  return rows.length;
}
