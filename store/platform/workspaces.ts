import { openBillingAccount } from '../billing/accounts.js';
import type { Db } from '../../db/sql.js';
import type { Plan, Role } from '../../domain/shared/common.js';

interface WorkspaceRow {
  id: string;
  name: string;
  plan: Plan;
  created_at: Date;
}
interface MemberRow {
  id: string;
  idp_user_id: string;
  display_name: string;
  email: string;
  role: Role;
  created_at: Date;
}

const toWorkspace = (r: WorkspaceRow) => ({
  id: r.id,
  name: r.name,
  plan: r.plan,
  created_at: r.created_at.toISOString(),
});
const toMember = (r: MemberRow) => ({
  id: r.id,
  user_id: r.idp_user_id,
  display_name: r.display_name,
  email: r.email,
  role: r.role,
  created_at: r.created_at.toISOString(),
});

export async function getWorkspace(db: Db, id: string) {
  const [row] = await db<WorkspaceRow[]>`select id, name, plan, created_at from workspaces where id = ${id}`;
  return row && toWorkspace(row);
}

export async function listMembers(db: Db, workspaceId: string) {
  const rows = await db<MemberRow[]>`select * from members where workspace_id = ${workspaceId} order by created_at, id`;
  return rows.map(toMember);
}

export async function getMember(db: Db, workspaceId: string, id: string) {
  const [row] = await db<MemberRow[]>`select * from members where workspace_id = ${workspaceId} and id = ${id}`;
  return row && toMember(row);
}

export interface NewWorkspace {
  name: string;
  plan: Plan;
  referredBy?: string | null;
  externalOrgId?: string | null;
  signedUpBy?: string | null;
}

/**
 * A workspace with its credit balance and billing account; `referredBy` attributes it to a
 * referrer, once. `externalOrgId` maps an identity-provider organisation to it, and `signedUpBy`
 * names the person who signed it up; either key already taken answers undefined and creates nothing.
 */
export async function createWorkspace(db: Db, input: NewWorkspace): Promise<Workspace>;
export async function createWorkspace(
  db: Db,
  input: NewWorkspace,
  options: { ifKeyFree: true },
): Promise<Workspace | undefined>;
export async function createWorkspace(
  db: Db,
  input: NewWorkspace,
  options?: { ifKeyFree: true },
): Promise<Workspace | undefined> {
  const [row] = await db<WorkspaceRow[]>`
    insert into workspaces (name, plan, external_org_id, signed_up_by)
    values (${input.name}, ${input.plan}, ${input.externalOrgId ?? null}, ${input.signedUpBy ?? null})
    ${options?.ifKeyFree ? db`on conflict do nothing` : db``}
    returning id, name, plan, created_at`;
  if (!row) return undefined;
  await db`insert into credit_balances (workspace_id) values (${row.id})`;
  await openBillingAccount(db, { workspaceId: row.id, anchor: row.created_at, referredBy: input.referredBy ?? null });
  return toWorkspace(row);
}

type Workspace = ReturnType<typeof toWorkspace>;

export async function addMember(
  db: Db,
  input: { workspaceId: string; idpUserId: string; displayName: string; email: string; role: Role },
) {
  const [row] = await db<MemberRow[]>`
    insert into members (workspace_id, idp_user_id, display_name, email, role)
    values (${input.workspaceId}, ${input.idpUserId}, ${input.displayName}, ${input.email}, ${input.role})
    returning *`;
  return toMember(row!);
}

export async function workspaceExists(db: Db, id: string): Promise<boolean> {
  const [row] = await db`select 1 from workspaces where id = ${id}`;
  return row !== undefined;
}
