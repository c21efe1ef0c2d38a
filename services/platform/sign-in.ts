/**
 * Which workspace and member a bearer token's holder acts as (docs/teams.md). A known member
 * costs one round trip; a person of a known organisation joins on first use; an unknown
 * organisation's first token provisions its workspace when the policy says so; anything else is
 * refused with the reason (domain/platform/identity.ts decides, the statements here apply it).
 */
import type { Sql } from '../../db/sql.js';
import { decideSignIn, type Identity, type SignInFacts, type SignInPolicy } from '../../domain/platform/identity.js';
import type { Plan, Role } from '../../domain/shared/common.js';
import { ApiError } from '../../domain/shared/errors.js';
import { membershipsOf, reachWorkspace, wasRemovedFromWorkspace } from '../../store/platform/auth.js';
import { insertJoinedMember, type JoinedVia } from '../../store/platform/members.js';
import { createWorkspace } from '../../store/platform/workspaces.js';

export interface SignedIn {
  workspaceId: string;
  plan: Plan;
  memberId: string;
  role: Role;
}

const signedIn = (r: { workspace_id: string; plan: Plan; member_id: string; role: Role }): SignedIn => ({
  workspaceId: r.workspace_id,
  plan: r.plan,
  memberId: r.member_id,
  role: r.role,
});

/** `workspaceId` is the X-Workspace-Id header, when the request names a workspace. */
export async function signIn(
  sql: Sql,
  identity: Identity,
  request: { workspaceId: string | null },
  policy: SignInPolicy,
): Promise<SignedIn> {
  const reached = await reachWorkspace(sql, { ...identity, workspaceId: request.workspaceId });
  if (reached?.member_id) return signedIn({ ...reached, member_id: reached.member_id, role: reached.role! });
  const facts: SignInFacts = {
    workspace: null,
    named: request.workspaceId !== null,
    memberships: 0,
    member: false,
    removed: false,
  };
  if (reached) {
    facts.workspace = { id: reached.workspace_id, mappedFromOrg: reached.mapped };
    facts.removed = await wasRemovedFromWorkspace(sql, reached.workspace_id, identity.userId);
  } else if (!facts.named && identity.orgId === null) {
    const memberships = await membershipsOf(sql, identity.userId);
    if (memberships.length === 1) return signedIn(memberships[0]!);
    facts.memberships = memberships.length;
  }
  const decision = decideSignIn(identity, facts, policy);
  switch (decision.outcome) {
    case 'refused':
      throw new ApiError(decision.status, decision.detail);
    case 'join':
      return join(sql, identity, reached!.workspace_id, decision.role, 'first_use');
    case 'provision':
      return provisionOrganisation(sql, identity);
    case 'member':
      throw new Error('a member is answered before the decision');
  }
}

/** A display name for a person whose token carries none: the email's local part. */
export function displayNameOf(identity: Pick<Identity, 'name' | 'email' | 'userId'>): string {
  if (identity.name) return identity.name.slice(0, 255);
  const local = identity.email
    ?.split('@')[0]
    ?.replace(/[._-]+/g, ' ')
    .trim();
  return (local || identity.email || identity.userId).slice(0, 255);
}

/**
 * Makes the person a member (or reads the member a concurrent first request made). Another
 * member holding their email under another identity is a 409: the service never merges two
 * identities on its own.
 */
export async function join(
  sql: Sql,
  identity: Identity,
  workspaceId: string,
  role: Role,
  via: JoinedVia,
  invitationId: string | null = null,
): Promise<SignedIn> {
  await sql.begin((tx) =>
    insertJoinedMember(tx, {
      workspaceId,
      userId: identity.userId,
      email: identity.email!,
      displayName: displayNameOf(identity),
      role,
      via,
      invitationId,
    }),
  );
  const member = await reachWorkspace(sql, { ...identity, workspaceId });
  if (!member?.member_id)
    throw new ApiError(
      'conflict',
      `Another member of this workspace has the email ${identity.email} under another identity; an admin must remove that member first.`,
    );
  return signedIn({ ...member, member_id: member.member_id, role: member.role! });
}

/**
 * The organisation's workspace, created by its first token (AUTH_PROVISION_ON_FIRST_USE), its
 * holder the admin. Two first tokens at once create one: the organisation's unique key decides,
 * and the second joins the workspace the first made (with the role its own claim maps to).
 */
async function provisionOrganisation(sql: Sql, identity: Identity): Promise<SignedIn> {
  if (!identity.email)
    throw new ApiError(
      'forbidden',
      'The token carries no email claim, which joining a workspace needs (AUTH_CLAIM_EMAIL).',
    );
  const created = await sql.begin(async (tx) => {
    const workspace = await createWorkspace(
      tx,
      {
        name: (identity.orgName ?? `Organisation ${identity.orgId}`).slice(0, 255),
        plan: 'free',
        externalOrgId: identity.orgId,
        signedUpBy: identity.userId,
      },
      { ifKeyFree: true },
    );
    if (workspace)
      await insertJoinedMember(tx, {
        workspaceId: workspace.id,
        userId: identity.userId,
        email: identity.email!,
        displayName: displayNameOf(identity),
        role: 'admin',
        via: 'first_use',
      });
    return workspace;
  });
  const reached = await reachWorkspace(sql, { ...identity, workspaceId: null });
  if (!reached) throw new Error('the organisation’s workspace was neither created nor found');
  if (reached.member_id) return signedIn({ ...reached, member_id: reached.member_id, role: reached.role! });
  if (created) throw new Error('the provisioned workspace has no member for its creator');
  return join(sql, identity, reached.workspace_id, identity.joinRole, 'first_use');
}
