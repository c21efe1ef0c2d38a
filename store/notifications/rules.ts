/** Notification rules and member preferences (decision 038): rows per workspace, reached by workspace. */
import type { Db, Sql } from '../../db/sql.js';
import type { EventType } from '../../domain/notifications/events.js';
import type {
  CreateRule,
  NotificationChannel,
  NotificationRule,
  PreferenceMode,
} from '../../domain/notifications/rules.js';

export interface RuleRow {
  id: string;
  workspace_id: string;
  event_type: EventType;
  filters: Record<string, unknown>;
  channel: NotificationChannel;
  member_ids: string[];
  chat_channel_id: string | null;
  chat_channel_name: string | null;
  webhook_endpoint_id: string | null;
  enabled: boolean;
  created_at: Date;
  updated_at: Date;
}

export const ruleOut = (r: RuleRow): NotificationRule => ({
  id: r.id,
  event_type: r.event_type,
  filters: r.filters,
  channel: r.channel,
  member_ids: r.member_ids,
  chat_channel_id: r.chat_channel_id,
  chat_channel_name: r.chat_channel_name,
  webhook_endpoint_id: r.webhook_endpoint_id,
  enabled: r.enabled,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
});

export async function countRules(db: Db, workspaceId: string): Promise<number> {
  const [row] = await db<
    { n: number }[]
  >`select count(*)::int as n from notification_rules where workspace_id = ${workspaceId}`;
  return row!.n;
}

export async function insertRule(
  db: Db,
  workspaceId: string,
  r: CreateRule,
  createdBy: string | null,
): Promise<RuleRow> {
  const [row] = await db<RuleRow[]>`
    insert into notification_rules (workspace_id, event_type, filters, channel, member_ids, chat_channel_id, chat_channel_name, webhook_endpoint_id, enabled, created_by)
    values (${workspaceId}, ${r.event_type}, ${db.json(r.filters ?? {})}, ${r.channel}, ${r.member_ids ?? []}, ${r.chat_channel_id ?? null},
      ${r.chat_channel_name ?? null}, ${r.webhook_endpoint_id ?? null}, ${r.enabled ?? true}, ${createdBy})
    returning *`;
  return row!;
}

export async function listRules(db: Db, workspaceId: string): Promise<RuleRow[]> {
  return db<RuleRow[]>`select * from notification_rules where workspace_id = ${workspaceId} order by created_at, id`;
}

export async function findRule(db: Db, workspaceId: string, id: string): Promise<RuleRow | undefined> {
  const [row] = await db<
    RuleRow[]
  >`select * from notification_rules where id = ${id} and workspace_id = ${workspaceId}`;
  return row;
}

export async function updateRule(
  db: Db,
  workspaceId: string,
  id: string,
  patch: {
    filters?: Record<string, unknown>;
    member_ids?: string[];
    chat_channel_id?: string;
    chat_channel_name?: string;
    enabled?: boolean;
  },
): Promise<RuleRow | undefined> {
  const [row] = await db<RuleRow[]>`
    update notification_rules set
      filters = coalesce(${patch.filters ? db.json(patch.filters as never) : null}::jsonb, filters),
      member_ids = case when channel = 'email' then coalesce(${patch.member_ids ?? null}::uuid[], member_ids) else member_ids end,
      chat_channel_id = case when channel = 'team_chat' then coalesce(${patch.chat_channel_id ?? null}, chat_channel_id) else chat_channel_id end,
      chat_channel_name = case when channel = 'team_chat' then coalesce(${patch.chat_channel_name ?? null}, chat_channel_name) else chat_channel_name end,
      enabled = coalesce(${patch.enabled ?? null}::boolean, enabled),
      updated_at = now()
    where id = ${id} and workspace_id = ${workspaceId}
    returning *`;
  return row;
}

export async function deleteRule(db: Db, workspaceId: string, id: string): Promise<boolean> {
  const rows = await db`delete from notification_rules where id = ${id} and workspace_id = ${workspaceId} returning id`;
  return rows.length > 0;
}

/** How many team-chat rules the workspace has (kept across a disconnect). */
export async function countTeamChatRules(db: Db, workspaceId: string): Promise<number> {
  const [row] = await db<
    { n: number }[]
  >`select count(*)::int as n from notification_rules where workspace_id = ${workspaceId} and channel = 'team_chat'`;
  return row!.n;
}

export async function memberPreferences(db: Db, memberId: string): Promise<Map<string, PreferenceMode>> {
  const rows = await db<
    { event_type: string; mode: PreferenceMode }[]
  >`select event_type, mode from notification_preferences where member_id = ${memberId}`;
  return new Map(rows.map((r) => [r.event_type, r.mode]));
}

/** Sets a member's preferences, all or none (one transaction). */
export async function setPreferences(
  sql: Sql,
  workspaceId: string,
  memberId: string,
  prefs: { event_type: string; mode: PreferenceMode }[],
): Promise<void> {
  await sql.begin((tx) => writePreferences(tx, workspaceId, memberId, prefs));
}

async function writePreferences(
  db: Db,
  workspaceId: string,
  memberId: string,
  prefs: { event_type: string; mode: PreferenceMode }[],
): Promise<void> {
  for (const p of prefs) {
    if (p.mode === 'each') {
      await db`delete from notification_preferences where member_id = ${memberId} and event_type = ${p.event_type}`;
    } else {
      await db`
        insert into notification_preferences (workspace_id, member_id, event_type, mode) values (${workspaceId}, ${memberId}, ${p.event_type}, ${p.mode})
        on conflict (member_id, event_type) do update set mode = excluded.mode, updated_at = now()`;
    }
  }
}

/** member id → mode for one event type, over the workspace's members. */
export async function preferencesForType(
  db: Db,
  workspaceId: string,
  eventType: string,
): Promise<Map<string, PreferenceMode>> {
  const rows = await db<{ member_id: string; mode: PreferenceMode }[]>`
    select member_id, mode from notification_preferences where workspace_id = ${workspaceId} and event_type = ${eventType}`;
  return new Map(rows.map((r) => [r.member_id, r.mode]));
}

/** How many of `ids` are members of the workspace (distinct). */
export async function countWorkspaceMembers(db: Db, workspaceId: string, ids: string[]): Promise<number> {
  const [row] = await db<
    { n: number }[]
  >`select count(*)::int as n from members where workspace_id = ${workspaceId} and id = any(${ids}::uuid[])`;
  return row!.n;
}

/** A member's email address, if they are still a member. */
export async function memberEmailOf(db: Db, memberId: string | null): Promise<string | undefined> {
  if (!memberId) return undefined;
  const [row] = await db<{ email: string }[]>`select email from members where id = ${memberId}`;
  return row?.email;
}
