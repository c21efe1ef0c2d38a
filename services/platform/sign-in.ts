/**
 * Which workspace and member a bearer token's holder acts as (docs/teams.md). A known member
 * costs one round trip; a person of a known organisation joins on first use; an unknown
 * organisation's first token provisions its workspace when the policy says so; anything else is
 * refused with the reason (domain/platform/identity.ts decides, the statements here apply it).
 */
import type { Sql } from '../../db/sql.js';
import {
  decideSignIn,
  type Identity,
  type SignInDecision,
  type SignInFacts,
  type SignInPolicy,
} from '../../domain/platform/identity.js';
import type { Plan, Role } from '../../domain/shared/common.js';
import { ApiError } from '../../domain/shared/errors.js';
import {
  membershipsOf,
  reachWorkspace,
  wasRemovedEverywhere,
  wasRemovedFromWorkspace,
  type ReachedWorkspace,
} from '../../store/platform/auth.js';
import { insertJoinedMember } from '../../store/platform/members.js';
import { insertProvisionedWorkspace } from '../../store/platform/workspaces.js';

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
  // Where the person could join, the join's own statement checks for a removal (one round trip
  // for the whole join) and the decision is taken again when it finds one. Where they cannot, the
  // refusal reads whether they were removed, so they are told so.
  if (reached) facts.workspace = { id: reached.workspace_id, mappedFromOrg: reached.mapped };
  else if (!facts.named && identity.orgId === null) {
    const memberships = await membershipsOf(sql, identity.userId);
    if (memberships.length === 1) return signedIn(memberships[0]!);
    facts.memberships = memberships.length;
    if (memberships.length === 0) facts.removed = await wasRemovedEverywhere(sql, identity.userId);
  }
  let decision = decideSignIn(identity, facts, policy);
  if (decision.outcome === 'refused' && reached) {
    facts.removed = await wasRemovedFromWorkspace(sql, reached.workspace_id, identity.userId);
    decision = decideSignIn(identity, facts, policy);
  }
  switch (decision.outcome) {
    case 'refused':
      throw new ApiError(decision.status, decision.detail);
    case 'join': {
      const joined = await join(sql, identity, reached!, decision.role);
      if (joined) return joined;
      const refusal = decideSignIn(identity, { ...facts, removed: true }, policy);
      throw new ApiError(refusal.outcome === 'refused' ? refusal.status : 'forbidden', detailOf(refusal));
    }
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

const detailOf = (decision: SignInDecision) => (decision.outcome === 'refused' ? decision.detail : 'Refused.');

/**
 * Makes the person a member on first use, in one statement (insertJoinedMember), or reads the
 * member a concurrent first request made. Answers undefined when the workspace removed them.
 * Another member holding their email under another identity is a 409: the service never merges
 * two identities on its own.
 */
async function join(
  sql: Sql,
  identity: Identity,
  reached: ReachedWorkspace,
  role: Role,
): Promise<SignedIn | undefined> {
  const { member, removed } = await insertJoinedMember(sql, {
    workspaceId: reached.workspace_id,
    userId: identity.userId,
    email: identity.email!,
    displayName: displayNameOf(identity),
    role,
    via: 'first_use',
    refuseRemoved: true,
  });
  if (removed) return undefined;
  if (member) return { workspaceId: reached.workspace_id, plan: reached.plan, memberId: member.id, role };
  const raced = await reachWorkspace(sql, { ...identity, workspaceId: reached.workspace_id });
  if (!raced?.member_id)
    throw new ApiError(
      'conflict',
      `Another member of this workspace has the email ${identity.email} under another identity; an admin must remove that member first.`,
    );
  return signedIn({ ...raced, member_id: raced.member_id, role: raced.role! });
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
  const created = await insertProvisionedWorkspace(sql, {
    name: (identity.orgName ?? `Organisation ${identity.orgId}`).slice(0, 255),
    externalOrgId: identity.orgId!,
    signedUpBy: identity.userId,
    member: {
      userId: identity.userId,
      email: identity.email,
      displayName: displayNameOf(identity),
      role: 'admin',
      via: 'first_use',
    },
  });
  if (created) return { workspaceId: created.workspace.id, plan: 'free', memberId: created.memberId, role: 'admin' };
  const reached = await reachWorkspace(sql, { ...identity, workspaceId: null });
  if (!reached) throw new Error('the organisation’s workspace was neither created nor found');
  if (reached.member_id) return signedIn({ ...reached, member_id: reached.member_id, role: reached.role! });
  const joined = await join(sql, identity, reached, identity.joinRole);
  if (!joined)
    throw new ApiError('forbidden', 'This user was removed from the workspace; an admin must invite them again.');
  return joined;
}
