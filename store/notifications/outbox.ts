/**
 * The workspace event outbox (decision 038). recordWorkspaceEvent inserts in the caller's
 * transaction, so an event exists exactly when the change that causes it committed; the dispatcher
 * (services/notifications/dispatcher.ts) starts its delivery after commit.
 */
import type postgres from 'postgres';
import type { Db } from '../../db/sql.js';
import {
  parseEventPayload,
  type EventPayload,
  type EventType,
  type WorkspaceEvent,
} from '../../domain/notifications/events.js';

export interface NewWorkspaceEvent<T extends EventType> {
  workspaceId: string;
  type: T;
  payload: EventPayload<T>;
}

/**
 * Records one event in the caller's transaction (pass the `tx` of the change). The payload is
 * checked against the catalogue's schema; a payload that does not fit throws, rolling the change
 * back, since it is a programming error. Answers the event's id.
 */
export async function recordWorkspaceEvent<T extends EventType>(tx: Db, event: NewWorkspaceEvent<T>): Promise<string> {
  const payload = parseEventPayload(event.type, event.payload);
  const [row] = await tx<{ id: string }[]>`
    insert into workspace_events (workspace_id, type, payload)
    values (${event.workspaceId}, ${event.type}, ${tx.json(payload as never)})
    returning id`;
  return row!.id;
}

/**
 * Runs `body` in the caller's transaction when `db` is one, else in a new one: for a store
 * function that takes either and must write its change and its event together.
 */
export async function withinTransaction<T>(db: Db, body: (tx: Db) => Promise<T>): Promise<T> {
  if ('savepoint' in db || 'release' in db) return body(db);
  return (db as postgres.Sql).begin((tx) => body(tx)) as Promise<T>;
}

interface EventRow {
  id: string;
  seq: number;
  workspace_id: string;
  type: EventType;
  payload: Record<string, unknown>;
  occurred_at: Date;
}

export const eventOut = (row: EventRow): WorkspaceEvent => ({
  id: row.id,
  type: row.type,
  occurred_at: row.occurred_at.toISOString(),
  workspace_id: row.workspace_id,
  payload: row.payload,
});

export async function eventById(db: Db, eventId: string): Promise<WorkspaceEvent | undefined> {
  const [row] = await db<EventRow[]>`select * from workspace_events where id = ${eventId}`;
  return row && eventOut(row);
}

/** Events by id (those that exist). */
export async function eventsByIds(db: Db, ids: string[]): Promise<Map<string, WorkspaceEvent>> {
  if (ids.length === 0) return new Map();
  const rows = await db<EventRow[]>`select * from workspace_events where id = any(${ids}::uuid[])`;
  return new Map(rows.map((r) => [r.id, eventOut(r)]));
}

/** Events not yet handed to a delivery batch, oldest first; locked so two dispatchers share. */
export async function undispatchedEvents(tx: Db, limit: number): Promise<{ id: string; workspace_id: string }[]> {
  return tx<{ id: string; workspace_id: string }[]>`
    select id, workspace_id from workspace_events where dispatched_at is null
    order by seq limit ${limit} for update skip locked`;
}

export async function markEventsDispatched(db: Db, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await db`update workspace_events set dispatched_at = now() where id = any(${ids}::uuid[]) and dispatched_at is null`;
}

/** A workspace's events, newest first, keyset-paged by (occurred_at, id) after the event `beforeId`. */
export async function listWorkspaceEvents(
  db: Db,
  workspaceId: string,
  q: { limit: number; type?: string; beforeId?: string },
): Promise<WorkspaceEvent[]> {
  const rows = await db<EventRow[]>`
    select * from workspace_events
    where workspace_id = ${workspaceId}
      ${q.type ? db`and type = ${q.type}` : db``}
      ${q.beforeId ? db`and (occurred_at, id) < (select occurred_at, id from workspace_events where id = ${q.beforeId} and workspace_id = ${workspaceId})` : db``}
    order by occurred_at desc, id desc limit ${q.limit}`;
  return rows.map(eventOut);
}

/** A workspace's events since a time (oldest first), for "replay everything since". */
export async function eventsSince(db: Db, workspaceId: string, since: Date, limit: number): Promise<WorkspaceEvent[]> {
  const rows = await db<EventRow[]>`
    select * from workspace_events where workspace_id = ${workspaceId} and occurred_at >= ${since}
    order by seq limit ${limit}`;
  return rows.map(eventOut);
}
