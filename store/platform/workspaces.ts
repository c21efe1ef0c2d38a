import { newReferralCode, openBillingAccount } from '../billing/accounts.js';
import { joinedMemberCtes, type JoiningMember } from './members.js';
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

/**
 * An identity-provider organisation's workspace, its balance, its billing account and its first
 * member (with the `joined` audit entry and event), in ONE statement: provisioning on first use
 * costs one round trip (docs/benchmarks.md, bench:sign-in). The organisation's unique key decides a
 * race: the second of two concurrent first tokens creates nothing and answers undefined.
 */
export async function insertProvisionedWorkspace(
  db: Db,
  input: { name: string; externalOrgId: string; signedUpBy: string; member: JoiningMember },
): Promise<{ workspace: Workspace; memberId: string } | undefined> {
  const [row] = await db<(WorkspaceRow & { member_id: string | null })[]>`
    with w as (
      insert into workspaces (name, plan, external_org_id, signed_up_by)
      values (${input.name}, 'free', ${input.externalOrgId}, ${input.signedUpBy})
      on conflict do nothing
      returning id, name, plan, created_at
    ), balance as (
      insert into credit_balances (workspace_id) select id from w
    ), account as (
      insert into billing_accounts (workspace_id, grant_anchor, referral_code, referred_by)
      select id, created_at, ${newReferralCode()}, null from w
    ), target as (select id from w), ${joinedMemberCtes(db, input.member)}
    select w.*, (select id from member) as member_id from w`;
  if (!row) return undefined;
  if (!row.member_id) throw new Error('the provisioned workspace has no member for its creator');
  return { workspace: toWorkspace(row), memberId: row.member_id };
}

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

/**
 * The workspace's row locked with its identity-provider organisation, for a change of mapping; and
 * the workspace another organisation id is mapped to, if any.
 */
export async function lockOrgMapping(db: Db, workspaceId: string, orgId: string) {
  const [row] = await db<{ external_org_id: string | null; org_workspace_id: string | null }[]>`
    select external_org_id, (select id from workspaces where external_org_id = ${orgId}) as org_workspace_id
    from workspaces where id = ${workspaceId} for update`;
  return row;
}

/** Maps the organisation to the workspace (the unique key refuses one mapped elsewhere meanwhile). */
export async function setExternalOrg(db: Db, workspaceId: string, orgId: string): Promise<void> {
  await db`update workspaces set external_org_id = ${orgId} where id = ${workspaceId}`;
}

export async function workspaceExists(db: Db, id: string): Promise<boolean> {
  const [row] = await db`select 1 from workspaces where id = ${id}`;
  return row !== undefined;
}
