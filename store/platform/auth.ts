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
