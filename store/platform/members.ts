/** Workspace members: reads, and the writes of admins managing them (services/platform/members.ts). */
import type { Db } from '../../db/sql.js';
import type { MemberAuditEntry } from '../../domain/platform/members.js';
import type { Role } from '../../domain/shared/common.js';
import { randomUUID } from 'node:crypto';
import { parseEventPayload } from '../../domain/notifications/events.js';
import { recordWorkspaceEvent } from '../notifications/outbox.js';

/** The identity-provider user id of a member; null when there is no such member. */
export async function memberIdpUserId(sql: Db, memberId: string): Promise<string | null> {
  const [member] = await sql<{ idp_user_id: string }[]>`select idp_user_id from members where id = ${memberId}`;
  return member?.idp_user_id ?? null;
}

export interface LockedMember {
  id: string;
  role: Role;
  idp_user_id: string;
  email: string;
}

/**
 * Every member of the workspace, each row locked until the transaction ends, in id order (so two
 * changes lock in the same order and never deadlock). A second change waits here for the first to
 * commit and then reads the rows as it left them: two admins demoting each other cannot both pass
 * the last-admin check.
 */
export async function lockWorkspaceMembers(tx: Db, workspaceId: string): Promise<LockedMember[]> {
  return tx<LockedMember[]>`
    select id, role, idp_user_id, email from members where workspace_id = ${workspaceId} order by id for update`;
}

interface AuditInput {
  workspaceId: string;
  actorMemberId: string | null;
  target: LockedMember;
}

async function insertAudit(tx: Db, input: AuditInput & { action: 'role_changed' | 'removed'; after: Role | null }) {
  await tx`
    insert into member_audit (workspace_id, actor_member_id, action, target_member_id, target_user_id, target_email, role_before, role_after)
    values (${input.workspaceId}, ${input.actorMemberId}, ${input.action}, ${input.target.id}, ${input.target.idp_user_id},
            ${input.target.email}, ${input.target.role}, ${input.after})`;
}

/** Sets a locked member's role, with its audit entry and its `member.role_changed` event, in the caller's transaction. */
export async function changeMemberRole(tx: Db, input: AuditInput & { role: Role }): Promise<void> {
  await tx`update members set role = ${input.role} where id = ${input.target.id} and workspace_id = ${input.workspaceId}`;
  await insertAudit(tx, { ...input, action: 'role_changed', after: input.role });
  await recordWorkspaceEvent(tx, {
    workspaceId: input.workspaceId,
    type: 'member.role_changed',
    payload: {
      member_id: input.target.id,
      user_id: input.target.idp_user_id,
      role_before: input.target.role,
      role_after: input.role,
      changed_by_member_id: input.actorMemberId,
    },
  });
}

/**
 * Removes a locked member in the caller's transaction. Their API keys are revoked first (the
 * foreign key would only orphan them, and an orphaned key still authenticates). Deleting the row
 * ends their bearer tokens (auth reads the member on every request) and their connected AI apps
 * with every OAuth token (those rows go with the member). The removal is recorded per
 * (workspace, identity-provider user), for any future self-join path to refuse.
 */
export async function removeMember(tx: Db, input: AuditInput): Promise<{ revokedApiKeys: number }> {
  const { workspaceId, target } = input;
  const revoked = await tx`
    update api_keys set deleted_at = now(), updated_at = now()
    where workspace_id = ${workspaceId} and created_by = ${target.id} and deleted_at is null returning id`;
  await tx`
    insert into member_removals (workspace_id, idp_user_id, member_id, email, removed_by)
    values (${workspaceId}, ${target.idp_user_id}, ${target.id}, ${target.email}, ${input.actorMemberId})
    on conflict (workspace_id, idp_user_id) do update set
      member_id = excluded.member_id, email = excluded.email, removed_by = excluded.removed_by, removed_at = now()`;
  await tx`delete from members where id = ${target.id} and workspace_id = ${workspaceId}`;
  await insertAudit(tx, { ...input, action: 'removed', after: null });
  await recordWorkspaceEvent(tx, {
    workspaceId,
    type: 'member.removed',
    payload: {
      member_id: target.id,
      user_id: target.idp_user_id,
      email: target.email,
      role_before: target.role,
      removed_by_member_id: input.actorMemberId,
      revoked_api_keys: revoked.length,
    },
  });
  return { revokedApiKeys: revoked.length };
}

export type JoinedVia = 'sign_up' | 'first_use' | 'invitation';

/**
 * Gives the member with this email the identity-provider user id `userId` (an operator's explicit
 * merge of two identities, which sign-in never does on its own); answers the member's id, or
 * undefined when no member has the email. The (workspace, user) key refuses a `userId` already a member.
 */
export async function rekeyMemberByEmail(
  db: Db,
  input: { workspaceId: string; email: string; userId: string },
): Promise<{ id: string; previous_user_id: string } | undefined> {
  const [row] = await db<{ id: string; previous_user_id: string }[]>`
    update members m set idp_user_id = ${input.userId}
    from (select id, idp_user_id from members where workspace_id = ${input.workspaceId} and lower(email) = lower(${input.email}) for update) old
    where m.id = old.id
    returning m.id, old.idp_user_id as previous_user_id`;
  return row;
}

/** Who joins, how, and whether a removal refuses them (insertJoinedMember). */
export interface JoiningMember {
  userId: string;
  email: string;
  displayName: string;
  role: Role;
  via: JoinedVia;
  invitationId?: string | null;
  refuseRemoved?: boolean;
}

/**
 * Makes a person a member, with the `joined` audit entry and the `member.joined` event, in ONE
 * statement (its own transaction, or the caller's): a first request that joins costs one round
 * trip more than a known member's (docs/benchmarks.md, bench:sign-in). The (workspace, user) and
 * (workspace, email) keys decide a race: the second of two concurrent joins inserts nothing and
 * answers no member (the caller reads the one the first made). With `refuseRemoved` a person the
 * workspace removed is not added and `removed` says so; without it (an invitation) the removal is
 * forgotten: they are back.
 */
export async function insertJoinedMember(
  db: Db,
  input: JoiningMember & { workspaceId: string },
): Promise<{ member: { id: string } | undefined; removed: boolean }> {
  const [row] = await db<{ member_id: string | null; removed: boolean }[]>`
    with target as (select ${input.workspaceId}::uuid as id), ${joinedMemberCtes(db, input)}
    select (select id from member) as member_id, exists (select 1 from removal) as removed`;
  return {
    member: row!.member_id ? { id: row!.member_id } : undefined,
    removed: (input.refuseRemoved ?? false) && row!.removed,
  };
}

/**
 * The CTEs that join a person to the workspace a preceding CTE `target (id)` names: nothing when
 * `target` is empty. Shared by a join and by a provisioning that creates the workspace in the same
 * statement (store/platform/workspaces.ts, insertProvisionedWorkspace).
 */
export function joinedMemberCtes(db: Db, input: JoiningMember) {
  const memberId = randomUUID();
  const payload = parseEventPayload('member.joined', {
    member_id: memberId,
    user_id: input.userId,
    email: input.email,
    role: input.role,
    via: input.via,
    invitation_id: input.invitationId ?? null,
  });
  const refuseRemoved = input.refuseRemoved ?? false;
  return db`
    removal as (
      select 1 from member_removals r join target on r.workspace_id = target.id where r.idp_user_id = ${input.userId}
    ), member as (
      insert into members (id, workspace_id, idp_user_id, display_name, email, role)
      select ${memberId}, target.id, ${input.userId}, ${input.displayName}, ${input.email}, ${input.role} from target
      where not (${refuseRemoved} and exists (select 1 from removal))
      on conflict do nothing
      returning id, workspace_id
    ), cleared as (
      delete from member_removals r using member
      where r.workspace_id = member.workspace_id and r.idp_user_id = ${input.userId}
    ), audit as (
      insert into member_audit (workspace_id, actor_member_id, action, target_member_id, target_user_id, target_email, role_before, role_after, joined_via)
      select workspace_id, id, 'joined', id, ${input.userId}, ${input.email}, null, ${input.role}, ${input.via} from member
    ), event as (
      insert into workspace_events (workspace_id, type, payload)
      select workspace_id, 'member.joined', ${db.json(payload as never)} from member
    )`;
}

interface AuditRow {
  id: number;
  action: MemberAuditEntry['action'];
  actor_member_id: string | null;
  target_member_id: string;
  target_user_id: string;
  target_email: string;
  role_before: Role | null;
  role_after: Role | null;
  joined_via: JoinedVia | null;
  created_at: Date;
}

/** A page of the workspace's member audit, newest first; `next_offset` is null on the last page. */
export async function listMemberAudit(
  db: Db,
  workspaceId: string,
  page: { limit: number; offset: number },
): Promise<{ entries: MemberAuditEntry[]; next_offset: number | null }> {
  const rows = await db<AuditRow[]>`
    select id, action, actor_member_id, target_member_id, target_user_id, target_email, role_before, role_after, joined_via, created_at
    from member_audit where workspace_id = ${workspaceId}
    order by id desc limit ${page.limit + 1} offset ${page.offset}`;
  const more = rows.length > page.limit;
  return {
    entries: rows.slice(0, page.limit).map((r) => ({ ...r, created_at: r.created_at.toISOString() })),
    next_offset: more ? page.offset + page.limit : null,
  };
}
