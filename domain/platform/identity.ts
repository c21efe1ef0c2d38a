/**
 * Who a bearer token says its holder is, read from the claims an identity provider puts in it, and
 * the pure decision of which workspace and member that person acts as (docs/teams.md).
 */
import type { Role } from '../shared/common.js';

/**
 * Where each fact sits in a provider's token. A name is looked up as a top-level claim first (a
 * namespaced claim such as `https://example.com/org_id` is one key), then as a dotted path (`o.id`).
 */
export interface ClaimNames {
  orgId: string;
  orgRole: string;
  orgName: string;
  email: string;
  emailVerified: string;
  name: string;
}

/** Defaults that fit Clerk (v1 claims), Auth0 organisations, WorkOS and Keycloak's standard claims. */
export const defaultClaimNames: ClaimNames = {
  orgId: 'org_id',
  orgRole: 'org_role',
  orgName: 'org_name',
  email: 'email',
  emailVerified: 'email_verified',
  name: 'name',
};

/** Organisation roles that make a person joining on first use an admin (AUTH_ADMIN_ROLES). */
export const defaultAdminRoles = ['admin', 'org:admin', 'owner'];

/** A verified token's holder. */
export interface Identity {
  /** The provider's user id (`sub`): one member per workspace. */
  userId: string;
  /** The provider's organisation id, or null for a token of no organisation. */
  orgId: string | null;
  orgName: string | null;
  /** The role a person joining on first use gets, mapped from the organisation role claim. */
  joinRole: Role;
  email: string | null;
  emailVerified: boolean;
  name: string | null;
  /**
   * Development tokens (signed with the service's own secret) name the workspace itself as their
   * organisation; tokens of an outside provider never do, so a provider's org id that happens to
   * look like a workspace id reaches nothing it was not mapped to.
   */
  orgMayBeWorkspaceId: boolean;
}

/** How sign-in treats people and organisations the service does not know yet. */
export interface SignInPolicy {
  /** A token of an organisation with no workspace creates one, its holder the admin (AUTH_PROVISION_ON_FIRST_USE). */
  provisionOnFirstUse: boolean;
}

export const defaultSignInPolicy: SignInPolicy = { provisionOnFirstUse: false };

export function readClaim(payload: Record<string, unknown>, name: string): unknown {
  if (name in payload) return payload[name];
  let value: unknown = payload;
  for (const part of name.split('.')) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

const text = (value: unknown) => (typeof value === 'string' && value.trim() !== '' ? value.trim() : null);

/** The holder of a verified token's claims; undefined when it names no user. */
export function identityFromClaims(
  payload: Record<string, unknown>,
  options: { claims: ClaimNames; adminRoles: string[]; orgMayBeWorkspaceId: boolean },
): Identity | undefined {
  const userId = text(payload.sub);
  if (!userId) return undefined;
  const { claims } = options;
  const orgRole = readClaim(payload, claims.orgRole);
  const roles = Array.isArray(orgRole) ? orgRole.map(String) : typeof orgRole === 'string' ? [orgRole] : [];
  const verified = readClaim(payload, claims.emailVerified);
  return {
    userId,
    orgId: text(readClaim(payload, claims.orgId)),
    orgName: text(readClaim(payload, claims.orgName)),
    joinRole: roles.some((r) => options.adminRoles.includes(r)) ? 'admin' : 'member',
    email: text(readClaim(payload, claims.email))?.toLowerCase() ?? null,
    emailVerified: verified === true || verified === 'true',
    name: text(readClaim(payload, claims.name)),
    orgMayBeWorkspaceId: options.orgMayBeWorkspaceId,
  };
}

/** What the service knows of the person and the workspace a request names or implies. */
export interface SignInFacts {
  /** The workspace reached: named by `X-Workspace-Id`, mapped from the org claim, or the person's only one. */
  workspace: { id: string; mappedFromOrg: boolean } | null;
  /** The request named a workspace (X-Workspace-Id); unknown there means not a member. */
  named: boolean;
  /** How many workspaces the person is a member of (when the request names none and the token no org). */
  memberships: number;
  member: boolean;
  /** Removed from the workspace reached, or (reaching none) from a workspace they no longer belong to. */
  removed: boolean;
}

export type SignInDecision =
  | { outcome: 'member' }
  | { outcome: 'join'; role: Role }
  | { outcome: 'provision' }
  | { outcome: 'refused'; status: 'forbidden' | 'bad_request'; detail: string };

/**
 * Whether the person acts as a member, joins on first use, provisions their organisation's
 * workspace, or is refused, and why. Only a workspace the token's organisation maps to can be
 * joined; a person removed from it is not re-added by signing in again.
 */
export function decideSignIn(identity: Identity, facts: SignInFacts, policy: SignInPolicy): SignInDecision {
  const { workspace } = facts;
  if (!workspace) {
    if (facts.removed) return refused(removedDetail);
    if (facts.named) return refused('This user is not a member of the workspace named in X-Workspace-Id.');
    if (identity.orgId && policy.provisionOnFirstUse) return { outcome: 'provision' };
    if (identity.orgId)
      return refused('Your organisation has no workspace here yet: sign up with POST /signup/ (operationId signUp).');
    if (facts.memberships > 1)
      return {
        outcome: 'refused',
        status: 'bad_request',
        detail: 'You are a member of several workspaces: name one in the X-Workspace-Id header.',
      };
    return refused(
      'You are not a member of any workspace: sign up with POST /signup/ (operationId signUp) or accept an invitation.',
    );
  }
  if (facts.member) return { outcome: 'member' };
  if (facts.removed) return refused(removedDetail);
  if (!workspace.mappedFromOrg) return refused('This user is not a member of the workspace.');
  if (!identity.email)
    return refused('The token carries no email claim, which joining a workspace needs (AUTH_CLAIM_EMAIL).');
  return { outcome: 'join', role: identity.joinRole };
}

const removedDetail = 'This user was removed from the workspace; an admin must invite them again.';

function refused(detail: string): SignInDecision {
  return { outcome: 'refused', status: 'forbidden', detail };
}
