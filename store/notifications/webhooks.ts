/**
 * Webhook endpoints (decision 038): rows per workspace, their sealed signing secrets (sealed by the
 * service before they reach SQL; context `webhook-secret:<endpoint id>`), rotation, and the health
 * marks a delivery writes (failing_since, disabled). People reach an endpoint by workspace.
 */
import type { Db } from '../../db/sql.js';
import type { WebhookEndpoint } from '../../domain/notifications/webhooks.js';
import type { EventType } from '../../domain/notifications/events.js';
import { recordWorkspaceEvent } from './outbox.js';

export interface EndpointRow {
  id: string;
  workspace_id: string;
  url: string;
  description: string;
  event_types: EventType[];
  enabled: boolean;
  disabled_reason: string | null;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_secret_expires_at: Date | null;
  failing_since: Date | null;
  created_by: string | null;
  created_at: Date;
  updated_at: Date;
}

export const endpointOut = (r: EndpointRow): WebhookEndpoint => ({
  id: r.id,
  url: r.url,
  description: r.description,
  event_types: r.event_types,
  enabled: r.enabled,
  disabled_reason: r.disabled_reason,
  failing_since: r.failing_since?.toISOString() ?? null,
  previous_secret_expires_at: r.previous_secret_expires_at?.toISOString() ?? null,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
});

export async function countEndpoints(db: Db, workspaceId: string): Promise<number> {
  const [row] = await db<
    { n: number }[]
  >`select count(*)::int as n from webhook_endpoints where workspace_id = ${workspaceId}`;
  return row!.n;
}

export async function insertEndpoint(
  db: Db,
  e: {
    id: string;
    workspaceId: string;
    url: string;
    description: string;
    eventTypes: string[];
    enabled: boolean;
    secretSealed: string;
    createdBy: string | null;
  },
): Promise<EndpointRow> {
  const [row] = await db<EndpointRow[]>`
    insert into webhook_endpoints (id, workspace_id, url, description, event_types, enabled, secret_sealed, created_by)
    values (${e.id}, ${e.workspaceId}, ${e.url}, ${e.description}, ${e.eventTypes}, ${e.enabled}, ${e.secretSealed}, ${e.createdBy})
    returning *`;
  return row!;
}

export async function listEndpoints(db: Db, workspaceId: string): Promise<EndpointRow[]> {
  return db<EndpointRow[]>`select * from webhook_endpoints where workspace_id = ${workspaceId} order by created_at, id`;
}

export async function findEndpoint(db: Db, workspaceId: string, id: string): Promise<EndpointRow | undefined> {
  const [row] = await db<
    EndpointRow[]
  >`select * from webhook_endpoints where id = ${id} and workspace_id = ${workspaceId}`;
  return row;
}

export async function updateEndpoint(
  db: Db,
  workspaceId: string,
  id: string,
  patch: { url?: string; description?: string; event_types?: string[]; enabled?: boolean },
): Promise<EndpointRow | undefined> {
  const [row] = await db<EndpointRow[]>`
    update webhook_endpoints set
      url = coalesce(${patch.url ?? null}, url),
      description = coalesce(${patch.description ?? null}, description),
      event_types = coalesce(${patch.event_types ?? null}::text[], event_types),
      enabled = coalesce(${patch.enabled ?? null}::boolean, enabled),
      disabled_reason = case when ${patch.enabled ?? null}::boolean is not null then null else disabled_reason end,
      failing_since = case when ${patch.enabled === true} then null else failing_since end,
      updated_at = now()
    where id = ${id} and workspace_id = ${workspaceId}
    returning *`;
  return row;
}

export async function deleteEndpoint(db: Db, workspaceId: string, id: string): Promise<boolean> {
  const rows = await db`delete from webhook_endpoints where id = ${id} and workspace_id = ${workspaceId} returning id`;
  return rows.length > 0;
}

/** A new secret; the current one becomes the previous, signing beside it until `overlapSeconds` from now (0: not at all). */
export async function rotateSecret(
  db: Db,
  workspaceId: string,
  id: string,
  newSealed: string,
  overlapSeconds: number,
): Promise<EndpointRow | undefined> {
  const [row] = await db<EndpointRow[]>`
    update webhook_endpoints set
      previous_secret_sealed = case when ${overlapSeconds} > 0 then secret_sealed else null end,
      previous_secret_expires_at = case when ${overlapSeconds} > 0 then now() + ${overlapSeconds}::int * interval '1 second' else null end,
      secret_sealed = ${newSealed}, updated_at = now()
    where id = ${id} and workspace_id = ${workspaceId}
    returning *`;
  return row;
}

/** Endpoints by id (those that exist). */
export async function endpointsByIds(db: Db, ids: string[]): Promise<Map<string, EndpointRow>> {
  if (ids.length === 0) return new Map();
  const rows = await db<EndpointRow[]>`select * from webhook_endpoints where id = any(${ids}::uuid[])`;
  return new Map(rows.map((r) => [r.id, r]));
}

/** Locks endpoints' rows in id order, so transactions writing several endpoints never wait on each other in a circle. */
export async function lockEndpoints(db: Db, ids: string[]): Promise<void> {
  const unique = [...new Set(ids)];
  if (unique.length === 0) return;
  await db`select id from webhook_endpoints where id = any(${unique}::uuid[]) order by id for update`;
}

/**
 * A failed attempt at `at`: failing_since is set if it was not; when it has been failing for
 * `disableAfterMs` the endpoint is disabled (compare-and-set on enabled, so once) and the
 * `webhook.endpoint_disabled` event is written in the same transaction. Answers whether this call disabled it.
 */
export async function markEndpointFailing(db: Db, id: string, at: Date, disableAfterMs: number): Promise<boolean> {
  const [row] = await db<{ failing_since: Date; enabled: boolean; workspace_id: string; url: string }[]>`
    update webhook_endpoints set failing_since = coalesce(failing_since, ${at})
    where id = ${id} returning failing_since, enabled, workspace_id, url`;
  if (!row || !row.enabled || at.getTime() - row.failing_since.getTime() < disableAfterMs) return false;
  const reason = `Every delivery failed for ${Math.round(disableAfterMs / 86_400_000)} days (since ${row.failing_since.toISOString()}).`;
  const [disabled] = await db`
    update webhook_endpoints set enabled = false, disabled_reason = ${reason}, updated_at = now()
    where id = ${id} and enabled returning id`;
  if (!disabled) return false;
  await recordWorkspaceEvent(db, {
    workspaceId: row.workspace_id,
    type: 'webhook.endpoint_disabled',
    payload: { endpoint_id: id, url: row.url, failing_since: row.failing_since.toISOString(), reason },
  });
  return true;
}
