/** What authentication reads of the workspace: the member a bearer token's user is. */
import type { Db } from '../../db/sql.js';
import type { Plan, Role } from '../../domain/shared/common.js';

/** The member of the workspace signed in as this identity-provider user, with the workspace's plan. */
export async function memberOfIdpUser(
  db: Db,
  workspaceId: string,
  idpUserId: string,
): Promise<{ id: string; role: Role; plan: Plan } | undefined> {
  const [member] = await db<{ id: string; role: Role; plan: Plan }[]>`
    select m.id, m.role, w.plan from members m join workspaces w on w.id = m.workspace_id
    where m.workspace_id = ${workspaceId} and m.idp_user_id = ${idpUserId}`;
  return member;
}

/** A member by id, with its workspace's plan: the person the assistant acts for. */
export async function memberById(
  db: Db,
  memberId: string,
): Promise<{ id: string; workspace_id: string; role: Role; plan: Plan } | undefined> {
  const [member] = await db<{ id: string; workspace_id: string; role: Role; plan: Plan }[]>`
    select m.id, m.workspace_id, m.role, w.plan from members m join workspaces w on w.id = m.workspace_id where m.id = ${memberId}`;
  return member;
}

/** Whether this identity-provider user was removed from the workspace (and not added back since). */
export async function wasRemovedFromWorkspace(db: Db, workspaceId: string, idpUserId: string): Promise<boolean> {
  const [row] = await db`
    select 1 from member_removals r
    where r.workspace_id = ${workspaceId} and r.idp_user_id = ${idpUserId}
      and not exists (select 1 from members m where m.workspace_id = r.workspace_id and m.idp_user_id = r.idp_user_id)`;
  return row !== undefined;
}

/** A workspace a bearer request reaches, and the person's member there, if any. */
export interface ReachedWorkspace {
  workspace_id: string;
  plan: Plan;
  /** The token's organisation is this workspace's (the only workspace a person may join on first use). */
  mapped: boolean;
  member_id: string | null;
  role: Role | null;
}

const uuidShape = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * One round trip for a known member: the workspace named by `workspaceId` (the X-Workspace-Id
 * header) or, without one, the workspace of the organisation `orgId` (by the provider's id, or by
 * the workspace's own id when `orgMayBeWorkspaceId`), with the person's member there.
 */
export async function reachWorkspace(
  db: Db,
  input: { userId: string; orgId: string | null; orgMayBeWorkspaceId: boolean; workspaceId: string | null },
): Promise<ReachedWorkspace | undefined> {
  const { userId, orgId } = input;
  const orgAsId = orgId !== null && input.orgMayBeWorkspaceId && uuidShape.test(orgId) ? orgId : null;
  const named = input.workspaceId !== null && uuidShape.test(input.workspaceId) ? input.workspaceId : null;
  if (input.workspaceId !== null && named === null) return undefined;
  if (named === null && orgId === null) return undefined;
  const [row] = await db<ReachedWorkspace[]>`
    select w.id as workspace_id, w.plan,
      (w.external_org_id = ${orgId} or w.id = ${orgAsId}::uuid) is true as mapped,
      m.id as member_id, m.role
    from workspaces w left join members m on m.workspace_id = w.id and m.idp_user_id = ${userId}
    where ${named === null ? db`(w.external_org_id = ${orgId} or w.id = ${orgAsId}::uuid)` : db`w.id = ${named}::uuid`}
    order by (w.external_org_id is not null) desc
    limit 1`;
  return row;
}

/** The person's memberships, at most two (enough to tell none, one and several apart). */
export async function membershipsOf(
  db: Db,
  userId: string,
): Promise<{ workspace_id: string; plan: Plan; member_id: string; role: Role }[]> {
  return db<{ workspace_id: string; plan: Plan; member_id: string; role: Role }[]>`
    select m.workspace_id, w.plan, m.id as member_id, m.role
    from members m join workspaces w on w.id = m.workspace_id
    where m.idp_user_id = ${userId} order by m.created_at limit 2`;
}

/** Whether this identity-provider user was removed from some workspace and is a member of none. */
export async function wasRemovedEverywhere(db: Db, idpUserId: string): Promise<boolean> {
  const [row] = await db`
    select 1 from member_removals r
    where r.idp_user_id = ${idpUserId} and not exists (select 1 from members m where m.idp_user_id = r.idp_user_id)
    limit 1`;
  return row !== undefined;
}
