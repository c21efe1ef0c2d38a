/** Creating workspaces and members from the operator's side (admin command line, local stack). */
import { randomUUID } from 'node:crypto';
import { setPlan, workspaceOfReferralCode } from '../store/billing/accounts.js';
import { decideDesignPartner, readDesignPartner } from '../store/billing/design-partners.js';
import { settleBillingAt } from '../services/billing/settle.js';
import { ApiError } from '../domain/shared/errors.js';
import { grantCredits } from '../store/platform/credits.js';
import { createApiKey } from '../store/platform/api-keys.js';
import { mintAccessToken } from '../services/platform/tokens.js';
import { rekeyMemberByEmail } from '../store/platform/members.js';
import { addMember, createWorkspace, lockOrgMapping, setExternalOrg } from '../store/platform/workspaces.js';
import type { Sql } from '../db/sql.js';
import { defaultScope } from '../domain/platform/api-keys.js';
import type { Plan, Role } from '../domain/shared/common.js';
import { signingSecret } from './auth-config.js';
import { attributeNewWorkspace } from '../services/affiliates/affiliates.js';
import { cookieWindowDays } from '../domain/affiliates/affiliates.js';

/** A development token (null when tokens come from an identity provider), naming the workspace as its organisation. */
async function tokenFor(sql: Sql, userId: string, workspaceId: string): Promise<string | null> {
  const secret = await signingSecret(sql);
  return secret ? mintAccessToken(secret, { sub: userId, org_id: workspaceId }) : null;
}

function nameFromEmail(email: string): string {
  return (
    email
      .split('@')[0]!
      .replace(/[._-]+/g, ' ')
      .trim() || email
  );
}

/**
 * A workspace, its first admin and an API key of the plan's default scope. `affiliateCode` or
 * `affiliateClick` (the click id the affiliate link handed out, honoured within `cookieWindowDays`,
 * 30 by default) attributes the signup to an affiliate in the same transaction (decision 043).
 * `externalOrgId` maps the identity provider's organisation to it (its people then join on first
 * use) and `userId` is the admin's id at the provider; without one the admin gets a random id.
 */
export async function createWorkspaceWithAdmin(
  sql: Sql,
  input: {
    name: string;
    plan: Plan;
    email?: string;
    referralCode?: string;
    affiliateCode?: string;
    affiliateClick?: string;
    userId?: string;
    externalOrgId?: string;
    cookieWindowDays?: number;
  },
) {
  const userId = input.userId ?? randomUUID();
  const referredBy = input.referralCode ? await workspaceOfReferralCode(sql, input.referralCode) : null;
  if (referredBy === undefined)
    throw new ApiError('unprocessable', `No workspace has the referral code "${input.referralCode}".`);
  const email = input.email ?? `admin+${userId.slice(0, 8)}@localhost`;
  const { workspace, key } = await sql.begin(async (tx) => {
    const workspace = await createWorkspace(
      tx,
      {
        name: input.name,
        plan: input.plan,
        referredBy,
        externalOrgId: input.externalOrgId ?? null,
        signedUpBy: null,
      },
      { ifKeyFree: true },
    );
    if (!workspace)
      throw new ApiError('conflict', `The organisation "${input.externalOrgId}" already has a workspace.`);
    await attributeNewWorkspace(tx, {
      workspaceId: workspace.id,
      code: input.affiliateCode,
      clickId: input.affiliateClick,
      at: new Date(),
      cookieWindowDays: input.cookieWindowDays ?? cookieWindowDays,
    });
    const member = await addMember(tx, {
      workspaceId: workspace.id,
      idpUserId: userId,
      displayName: nameFromEmail(email),
      email,
      role: 'admin',
    });
    const key = await createApiKey(tx, {
      workspaceId: workspace.id,
      createdBy: member.id,
      name: 'Admin key',
      scope: defaultScope(input.plan),
      expireAt: null,
    });
    return { workspace, key };
  });
  return {
    workspace_id: workspace.id,
    user_id: userId,
    api_key: key.key,
    access_token: await tokenFor(sql, userId, workspace.id),
  };
}

export async function addWorkspaceMember(
  sql: Sql,
  input: { workspaceId: string; email: string; role: Role; userId?: string | undefined },
) {
  const userId = input.userId ?? randomUUID();
  await addMember(sql, {
    workspaceId: input.workspaceId,
    idpUserId: userId,
    displayName: nameFromEmail(input.email),
    email: input.email,
    role: input.role,
  });
  return { user_id: userId, access_token: await tokenFor(sql, userId, input.workspaceId) };
}

/**
 * Maps an identity-provider organisation to an existing workspace (one made before sign-in went
 * through the provider): its people then reach it with the provider's tokens, and join on first
 * use (docs/teams.md). A workspace mapped to another organisation keeps it unless `replace`, since
 * that organisation's people would lose it; an organisation mapped elsewhere is refused.
 */
export async function mapWorkspaceToOrganisation(
  sql: Sql,
  input: { workspaceId: string; orgId: string; replace: boolean },
) {
  return sql.begin(async (tx) => {
    const mapping = await lockOrgMapping(tx, input.workspaceId, input.orgId);
    if (!mapping) throw new ApiError('not_found', `Workspace ${input.workspaceId} not found.`);
    const previous = mapping.external_org_id;
    if (previous === input.orgId)
      return { workspace_id: input.workspaceId, org_id: input.orgId, previous_org_id: previous };
    if (mapping.org_workspace_id)
      throw new ApiError(
        'conflict',
        `Organisation ${input.orgId} is mapped to workspace ${mapping.org_workspace_id} already.`,
      );
    if (previous && !input.replace)
      throw new ApiError(
        'conflict',
        `Workspace ${input.workspaceId} is mapped to organisation ${previous}; pass --replace true to map it to ${input.orgId} instead (the people of ${previous} then reach it no more).`,
      );
    await setExternalOrg(tx, input.workspaceId, input.orgId);
    return { workspace_id: input.workspaceId, org_id: input.orgId, previous_org_id: previous };
  });
}

/**
 * Gives an existing member (found by email) the user id their identity provider names them by, so
 * their provider tokens reach the member they are, with its role, keys and history, instead of
 * joining as someone new.
 */
export async function setMemberUser(sql: Sql, input: { workspaceId: string; email: string; userId: string }) {
  const member = await rekeyMemberByEmail(sql, input);
  if (!member)
    throw new ApiError('not_found', `No member of workspace ${input.workspaceId} has the email ${input.email}.`);
  return { member_id: member.id, user_id: input.userId, previous_user_id: member.previous_user_id };
}

export async function grantWorkspaceCredits(
  sql: Sql,
  input: { workspaceId: string; amount: number; causeKey?: string },
) {
  return grantCredits(sql, {
    workspaceId: input.workspaceId,
    amount: input.amount,
    causeKey: input.causeKey ?? `admin-grant:${randomUUID()}`,
    note: 'granted from the admin command line',
  });
}

/**
 * An operator's plan (no payment provider, or a deal made outside it). The period's grants follow
 * at once, through the same settlement the billing workflow runs (a grant already made is not repeated).
 */
export async function setWorkspacePlan(sql: Sql, workspaceId: string, plan: Plan) {
  await sql.begin((tx) => setPlan(tx, workspaceId, plan, new Date()));
  const settled = await settleBillingAt(sql, workspaceId, new Date());
  return { plan: settled.plan, granted: settled.granted };
}

/** An operator's decision on a design-partner application; an acceptance grants the period's benefit at once. */
export async function decideDesignPartnerApplication(
  sql: Sql,
  workspaceId: string,
  decision: 'accept' | 'decline' | 'end',
  note: string | null,
) {
  const status = ({ accept: 'accepted', decline: 'declined', end: 'ended' } as const)[decision];
  const row = await decideDesignPartner(sql, workspaceId, status, note);
  if (!row) {
    const current = await readDesignPartner(sql, workspaceId);
    throw new ApiError(
      'conflict',
      current
        ? `The application is ${current.status}; "${decision}" needs one that is ${decision === 'end' ? 'accepted' : 'pending'}.`
        : 'This workspace has not applied.',
    );
  }
  const settled = await settleBillingAt(sql, workspaceId, new Date());
  return { status: row.status, granted: settled.granted };
}
