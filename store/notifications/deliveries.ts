/**
 * Deliveries (decisions 038, 045): one row per (event, channel), made once by the batch's first
 * activity (unique on event and channel key), and every attempt recorded. Each attempt's write is
 * compare-and-set on (delivery, run, status pending) and the attempt row is unique on (delivery,
 * run, attempt), so a retried activity or a killed worker records an attempt once and settles a
 * delivery once.
 */
import type { Db } from '../../db/sql.js';
import type { EventType } from '../../domain/notifications/events.js';
import { planDeliveries, type NotificationChannel } from '../../domain/notifications/rules.js';
import { webhookIdOf, type AttemptOutcome } from '../../domain/notifications/webhooks.js';
import { listRules, preferencesForType } from './rules.js';
import type { PreferenceMode } from '../../domain/notifications/rules.js';

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

/**
 * Plans the deliveries of a batch of events (once: a second call finds them made, unique on
 * event and channel key) and answers every delivery of those events that is not waiting for a
 * digest, in event order. Rules, endpoints and members are read once per workspace of the batch,
 * preferences once per workspace and type, and the rows are written in one statement.
 */
export async function planBatchDeliveries(db: Db, eventIds: string[]): Promise<DeliveryRow[]> {
  if (eventIds.length === 0) return [];
  const events = await db<{ id: string; workspace_id: string; type: EventType; payload: Record<string, unknown> }[]>`
    select id, workspace_id, type, payload from workspace_events where id = any(${eventIds}::uuid[]) order by seq`;
  type Endpoint = { id: string; event_types: string[]; enabled: boolean; created_by: string | null };
  const workspaces = new Map<
    string,
    Promise<{
      rules: Awaited<ReturnType<typeof listRules>>;
      endpoints: Endpoint[];
      members: string[];
      admins: string[];
    }>
  >();
  const contextOf = (workspaceId: string) => {
    let context = workspaces.get(workspaceId);
    if (!context) {
      context = Promise.all([
        listRules(db, workspaceId),
        db<
          Endpoint[]
        >`select id, event_types, enabled, created_by from webhook_endpoints where workspace_id = ${workspaceId}`,
        db<
          { id: string; role: string }[]
        >`select id, role from members where workspace_id = ${workspaceId} order by created_at`,
      ]).then(([rules, endpoints, members]) => ({
        rules,
        endpoints,
        members: members.map((m) => m.id),
        admins: members.filter((m) => m.role === 'admin').map((m) => m.id),
      }));
      workspaces.set(workspaceId, context);
    }
    return context;
  };
  const preferences = new Map<string, Promise<Map<string, PreferenceMode>>>();
  const preferencesOf = (workspaceId: string, type: string) => {
    const key = `${workspaceId}:${type}`;
    let found = preferences.get(key);
    if (!found) preferences.set(key, (found = preferencesForType(db, workspaceId, type)));
    return found;
  };
  const rows: Record<string, string | null>[] = [];
  for (const event of events) {
    const { rules, endpoints, members, admins } = await contextOf(event.workspace_id);
    // The owner of an endpoint the service disabled is told by email whatever the rules say (or, with no owner left, the admins).
    let alwaysEmail: string[] = [];
    if (event.type === 'webhook.endpoint_disabled') {
      const owner = endpoints.find((e) => e.id === event.payload.endpoint_id)?.created_by;
      alwaysEmail = owner ? [owner] : admins;
    }
    const planned = planDeliveries({
      event: { type: event.type, payload: event.payload },
      rules,
      endpoints,
      members,
      preferences: await preferencesOf(event.workspace_id, event.type),
      alwaysEmail,
    });
    for (const d of planned) {
      rows.push({
        workspace_id: event.workspace_id,
        event_id: event.id,
        channel: d.channel,
        channel_key: d.channelKey,
        rule_id: d.ruleId,
        webhook_endpoint_id: d.endpointId,
        member_id: d.memberId,
        chat_channel_id: d.chatChannelId,
        status: d.status,
      });
    }
  }
  const columns = [
    'workspace_id',
    'event_id',
    'channel',
    'channel_key',
    'rule_id',
    'webhook_endpoint_id',
    'member_id',
    'chat_channel_id',
    'status',
  ] as const;
  for (let i = 0; i < rows.length; i += 1000) {
    await db`insert into notification_deliveries ${db(rows.slice(i, i + 1000), ...columns)} on conflict (event_id, channel_key) do nothing`;
  }
  return db<DeliveryRow[]>`
    select d.* from notification_deliveries d join workspace_events e on e.id = d.event_id
    where d.event_id = any(${eventIds}::uuid[]) and d.status not in ('digest_pending', 'digested')
    order by e.seq, d.channel_key`;
}

export async function deliveriesByIds(db: Db, ids: string[]): Promise<DeliveryRow[]> {
  if (ids.length === 0) return [];
  return db<DeliveryRow[]>`select * from notification_deliveries where id = any(${ids}::uuid[])`;
}

export interface RecordedAttempt {
  outcome: AttemptOutcome;
  status_code: number | null;
  error: string | null;
}

/** The attempts numbered `attempt` already recorded for these deliveries' runs, by `<delivery id>:<run>`. */
export async function recordedAttempts(
  db: Db,
  deliveries: { id: string; run: number }[],
  attempt: number,
): Promise<Map<string, RecordedAttempt>> {
  if (deliveries.length === 0) return new Map();
  const rows = await db<(RecordedAttempt & { delivery_id: string; run: number })[]>`
    select delivery_id, run, outcome, status_code, error from notification_delivery_attempts
    where delivery_id = any(${deliveries.map((d) => d.id)}::uuid[]) and attempt = ${attempt}`;
  const runs = new Map(deliveries.map((d) => [d.id, d.run]));
  return new Map(rows.filter((r) => runs.get(r.delivery_id) === r.run).map((r) => [`${r.delivery_id}:${r.run}`, r]));
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

/**
 * Records attempts and settles their deliveries, each once, in one statement (compare-and-set on
 * each delivery's run and pending status; an attempt of a run a replay superseded is recorded without
 * settling anything; an attempt is unique on delivery, run and attempt); a
 * 2xx to a webhook also clears its endpoint's failing time in that statement. Answers the
 * deliveries whose attempt this call recorded (another write may have got there first).
 */
export async function recordAttempts(
  db: Db,
  attempts: (NewAttempt & { healthyEndpointId?: string | null })[],
): Promise<Set<string>> {
  if (attempts.length === 0) return new Set();
  const column = <T>(pick: (a: NewAttempt & { healthyEndpointId?: string | null }) => T) => attempts.map(pick);
  const rows = await db<{ delivery_id: string }[]>`
    with input as (
      select * from unnest(
        ${column((a) => a.deliveryId)}::uuid[], ${column((a) => a.run)}::int[], ${column((a) => a.attempt)}::int[], ${column((a) => a.trigger)}::text[],
        ${column((a) => Math.max(0, Math.round(a.durationMs)))}::int[], ${column((a) => a.outcome)}::text[], ${column((a) => a.statusCode)}::int[],
        ${column((a) => a.excerpt?.replace(/\u0000/g, '').slice(0, 1000) ?? null)}::text[], ${column((a) => a.error?.replace(/\u0000/g, '').slice(0, 1000) ?? null)}::text[],
        ${column((a) => a.settle)}::text[], ${column((a) => a.healthyEndpointId ?? null)}::uuid[]
      ) as t(delivery_id, run, attempt, trigger, duration_ms, outcome, status_code, excerpt, error, settle, healthy_endpoint_id)
    ), inserted as (
      insert into notification_delivery_attempts (delivery_id, run, attempt, trigger, duration_ms, outcome, status_code, response_excerpt, error)
      select i.delivery_id, i.run, i.attempt, i.trigger, i.duration_ms, i.outcome, i.status_code, i.excerpt, i.error from input i
      -- An attempt of a run a replay has since superseded really happened (the receiver may have
      -- it): it is listed, but only an attempt of the current, pending run settles the delivery.
      where exists (
        select 1 from notification_deliveries d
        where d.id = i.delivery_id and (d.run > i.run or (d.run = i.run and d.status = 'pending'))
      )
      on conflict (delivery_id, run, attempt) do nothing
      returning delivery_id
    ), settled as (
      update notification_deliveries d set attempt_count = d.attempt_count + 1, last_status_code = i.status_code, last_error = i.error,
        status = i.settle, succeeded_at = case when i.settle = 'succeeded' then now() else d.succeeded_at end, updated_at = now()
      from input i
      where d.id = i.delivery_id and d.run = i.run and d.status = 'pending' and i.delivery_id in (select delivery_id from inserted)
      returning i.healthy_endpoint_id
    ), healthy as (
      update webhook_endpoints set failing_since = null
      where id in (select healthy_endpoint_id from settled) and failing_since is not null
    )
    select delivery_id from inserted`;
  return new Set(rows.map((r) => r.delivery_id));
}

/** A delivery queued again: a new run (so the next attempts count from 1), pending. Answers the run. */
export async function reopenDelivery(db: Db, deliveryId: string): Promise<number> {
  const [row] = await db<{ run: number }[]>`
    update notification_deliveries set run = run + 1, status = 'pending', attempt_count = 0, updated_at = now()
    where id = ${deliveryId} returning run`;
  return row!.run;
}

/** The endpoint's delivery of the event, made when it had none (the endpoint did not take the type then). */
export async function webhookDeliveryOf(
  db: Db,
  workspaceId: string,
  endpointId: string,
  eventId: string,
): Promise<string> {
  const key = `webhook:${endpointId}`;
  const [made] = await db<{ id: string }[]>`
    insert into notification_deliveries (workspace_id, event_id, channel, channel_key, webhook_endpoint_id, status)
    values (${workspaceId}, ${eventId}, 'webhook', ${key}, ${endpointId}, 'failed')
    on conflict (event_id, channel_key) do nothing returning id`;
  if (made) return made.id;
  const [existing] = await db<
    { id: string }[]
  >`select id from notification_deliveries where event_id = ${eventId} and channel_key = ${key}`;
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
export async function listEndpointAttempts(
  db: Db,
  endpointId: string,
  q: { limit: number; before?: number; eventId?: string },
) {
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
    attempts: page.map((r) => ({
      ...r,
      webhook_id: webhookIdOf(r.delivery_id),
      attempted_at: r.attempted_at.toISOString(),
    })),
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
  const rows =
    await db`update notification_deliveries set status = 'digested', updated_at = now() where id = any(${ids}::uuid[]) and status = 'digest_pending' returning id`;
  return rows.length;
}
