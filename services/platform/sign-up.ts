/**
 * Signing up (operationId `signUp`): a signed-in person creates their workspace and becomes its
 * admin, with referral and affiliate attribution in the same transaction (docs/teams.md).
 */
import type { Sql } from '../../db/sql.js';
import type { Identity } from '../../domain/platform/identity.js';
import type { Member, SignUp } from '../../domain/platform/workspaces.js';
import { ApiError, ValidationRefusal } from '../../domain/shared/errors.js';
import { workspaceOfReferralCode } from '../../store/billing/accounts.js';
import { insertJoinedMember } from '../../store/platform/members.js';
import { createWorkspace, getMember } from '../../store/platform/workspaces.js';
import { attributeNewWorkspace } from '../affiliates/affiliates.js';
import { wakeWorkspaceBilling } from '../billing/billing-client.js';
import { displayNameOf } from './sign-in.js';
import type { TemporalHandle } from '../deps.js';

const refusal = (field: string, msg: string, input: unknown) =>
  new ValidationRefusal([{ loc: ['body', field], msg, type: 'value_error', input }]);

export interface SignUpDeps {
  sql: Sql;
  temporal: TemporalHandle;
  cookieWindowDays: number;
  onError: (error: unknown, message: string) => void;
}

/**
 * One workspace per organisation (the token's organisation claim), or one of their own for a
 * person whose token carries none: a second sign-up is a 409 that says which. The billing
 * workflow starts at once; if Temporal cannot be reached, the keeper starts it within a minute.
 */
export async function signUp(deps: SignUpDeps, identity: Identity, input: SignUp) {
  const email = identity.email;
  if (!email)
    throw new ApiError('forbidden', 'The token carries no email claim, which signing up needs (AUTH_CLAIM_EMAIL).');
  const referredBy = input.referral_code ? await workspaceOfReferralCode(deps.sql, input.referral_code) : null;
  if (referredBy === undefined)
    throw refusal('referral_code', `No workspace has the referral code "${input.referral_code}".`, input.referral_code);
  const signedUp = await deps.sql.begin(async (tx) => {
    const workspace = await createWorkspace(
      tx,
      { name: input.name, plan: 'free', referredBy, externalOrgId: identity.orgId, signedUpBy: identity.userId },
      { ifKeyFree: true },
    );
    if (!workspace)
      throw new ApiError(
        'conflict',
        identity.orgId
          ? `Your organisation (${identity.orgId}) already has a workspace: sign in to join it, or ask its admin for an invitation.`
          : 'You already signed up a workspace of your own; your token reaches it.',
      );
    await attributeNewWorkspace(tx, {
      workspaceId: workspace.id,
      code: input.affiliate_click_id ? undefined : input.affiliate_code,
      clickId: input.affiliate_click_id,
      at: new Date(),
      cookieWindowDays: deps.cookieWindowDays,
    }).catch((error: unknown) => {
      // The affiliate's refusals name no field; the 422 of this route does.
      if (!(error instanceof ApiError) || error.code !== 'unprocessable') throw error;
      const field = input.affiliate_click_id ? 'affiliate_click_id' : 'affiliate_code';
      throw refusal(field, error.detail, input[field]);
    });
    const { member } = await insertJoinedMember(tx, {
      workspaceId: workspace.id,
      userId: identity.userId,
      email,
      displayName: displayNameOf(identity),
      role: 'admin',
      via: 'sign_up',
    });
    return { workspace, member: (await getMember(tx, workspace.id, member!.id)) as Member };
  });
  await wakeWorkspaceBilling(deps.temporal.client, deps.temporal.taskQueue, deps.sql, signedUp.workspace.id).catch(
    (error: unknown) => deps.onError(error, 'the billing workflow waits for the keeper'),
  );
  return signedUp;
}
