/**
 * Admins inviting teammates by email, and the invited person accepting (docs/teams.md): one
 * function per use case (operationIds inviteMember, listInvitations, revokeInvitation,
 * acceptInvitation), each one transaction that locks what it changes, asks the pure rules
 * (domain/platform/invitations.ts) and writes the change with its event
 * (store/platform/invitations.ts, store/platform/members.ts).
 */
import type { Sql } from '../../db/sql.js';
import {
  acceptLink,
  decideAcceptance,
  generateInvitationToken,
  hashInvitationToken,
  invitationEmail,
  invitationStatus,
  toMemberInvitation,
  type MemberInvitation,
  type MemberInvitationCreate,
} from '../../domain/platform/invitations.js';
import type { Identity } from '../../domain/platform/identity.js';
import { adminOnlyDetail } from '../../domain/platform/roles.js';
import type { Member } from '../../domain/platform/workspaces.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import type { Mailer } from '../../integrations/mailer.js';
import {
  insertInvitation,
  isMemberOfWorkspace,
  listInvitationsPage,
  lockInvitation,
  lockInvitationByTokenHash,
  lockOpenInvitation,
  markInvitationAccepted,
  revokeInvitation as revokeInvitationRow,
  workspaceHasMemberEmail,
} from '../../store/platform/invitations.js';
import { insertJoinedMember } from '../../store/platform/members.js';
import { getMember, getWorkspace } from '../../store/platform/workspaces.js';
import { displayNameOf } from './sign-in.js';

interface Actor {
  workspaceId: string;
  memberId: string | null;
}

export interface InviteDeps {
  sql: Sql;
  /** Null without SMTP_URL: nothing is invited, since the token would reach nobody. */
  mailer: Mailer | null;
  /** The app's accept page the email links to (INVITATION_ACCEPT_URL); undefined, the email carries the token alone. */
  acceptPage: string | undefined;
}

/**
 * Invites `input.email` with a role. A pending invitation of the same address is revoked and
 * replaced (its token stops working). An address of a member already is a 409. The email goes out
 * before the transaction commits: a mail server that does not take it answers 502 and leaves
 * nothing behind (no invitation, no event), and with no mail server configured nothing is tried (503).
 */
export async function inviteMember(
  deps: InviteDeps,
  actor: Actor,
  input: MemberInvitationCreate,
): Promise<MemberInvitation> {
  const { mailer } = deps;
  if (!mailer)
    throw new ApiError(
      'unavailable',
      'No mail server is configured here (SMTP_URL): an invitation travels by email, so none can be sent or stored.',
    );
  const email = input.email.toLowerCase();
  const token = generateInvitationToken();
  return deps.sql.begin(async (tx) => {
    // Auth let an admin in; one demoted or removed since then invites nobody.
    const inviter = actor.memberId ? await getMember(tx, actor.workspaceId, actor.memberId) : undefined;
    if (!inviter || inviter.role !== 'admin') throw new ApiError('forbidden', adminOnlyDetail);
    if (await workspaceHasMemberEmail(tx, actor.workspaceId, email))
      throw new ApiError('conflict', `${email} is already the address of a member of this workspace.`);
    const workspace = await getWorkspace(tx, actor.workspaceId);
    if (!workspace) throw notFound('Workspace');
    const open = await lockOpenInvitation(tx, actor.workspaceId, email);
    if (open) await revokeInvitationRow(tx, open, inviter.id);
    const created = await insertInvitation(tx, {
      workspaceId: actor.workspaceId,
      email,
      role: input.role,
      tokenHash: hashInvitationToken(token),
      invitedBy: inviter.id,
      expiresInDays: input.expires_in_days,
    });
    if (!created)
      throw new ApiError(
        'conflict',
        `Another invitation to ${email} was sent at the same moment; list the invitations to see it.`,
      );
    const { subject, text } = invitationEmail({
      workspaceName: workspace.name,
      role: created.row.role,
      inviterName: inviter.display_name,
      email,
      expiresAt: created.row.expires_at,
      token,
      acceptUrl: deps.acceptPage ? acceptLink(deps.acceptPage, token) : null,
    });
    try {
      await mailer.send({
        // Stable per invitation: a resend by the transport is recognised as the same message.
        messageId: `<invitation.${created.row.id}@${mailer.domain}>`,
        from: { name: workspace.name.replace(/[\u0000-\u001f\u007f]+/g, ' '), address: mailer.defaultFrom },
        to: email,
        subject,
        text,
      });
    } catch (err) {
      throw new ApiError(
        'bad_gateway',
        `The mail server did not take the invitation email, so no invitation was stored: ${String((err as Error).message).slice(0, 200)}`,
      );
    }
    return toMemberInvitation(created.row, created.now);
  });
}

/** The workspace's invitations: pending first, then the rest, newest first within each. */
export async function listInvitations(
  sql: Sql,
  workspaceId: string,
  page: { limit: number; offset: number },
): Promise<{ invitations: MemberInvitation[]; next_offset: number | null }> {
  const { rows, now, more } = await listInvitationsPage(sql, workspaceId, page);
  return {
    invitations: rows.map((row) => toMemberInvitation(row, now)),
    next_offset: more ? page.offset + page.limit : null,
  };
}

/** Revokes a pending invitation: its token stops working. Unknown or another workspace's: 404; not pending: 409. */
export async function revokeInvitation(sql: Sql, actor: Actor, invitationId: string): Promise<void> {
  await sql.begin(async (tx) => {
    const locked = await lockInvitation(tx, actor.workspaceId, invitationId);
    if (!locked) throw notFound('Invitation');
    const status = invitationStatus(locked.row, locked.now);
    if (status !== 'pending')
      throw new ApiError('conflict', `This invitation is ${status}: only a pending invitation can be revoked.`);
    const revoker = actor.memberId ? await getMember(tx, actor.workspaceId, actor.memberId) : undefined;
    if (!revoker || revoker.role !== 'admin') throw new ApiError('forbidden', adminOnlyDetail);
    await revokeInvitationRow(tx, locked, revoker.id);
  });
}

/**
 * The signed-in person accepts the invitation the token names and becomes a member with its role.
 * The invitation's row is locked first, so of two acceptances at once one makes the member and
 * the other finds the invitation accepted (409). A person removed from the workspace before is a
 * member again (insertJoinedMember forgets the removal).
 */
export async function acceptInvitation(
  sql: Sql,
  identity: Identity,
  token: string,
): Promise<{ workspace: NonNullable<Awaited<ReturnType<typeof getWorkspace>>>; member: Member }> {
  return sql.begin(async (tx) => {
    const locked = await lockInvitationByTokenHash(tx, hashInvitationToken(token));
    const alreadyMember = locked ? await isMemberOfWorkspace(tx, locked.row.workspace_id, identity.userId) : false;
    const decision = decideAcceptance(locked?.row, identity, locked?.now ?? new Date(), { alreadyMember });
    if (decision.outcome === 'refused') throw new ApiError(decision.code, decision.detail);
    const invitation = locked!.row;
    const { member: joined } = await insertJoinedMember(tx, {
      workspaceId: invitation.workspace_id,
      userId: identity.userId,
      email: invitation.email,
      displayName: displayNameOf(identity),
      role: decision.role,
      via: 'invitation',
      invitationId: invitation.id,
    });
    if (!joined)
      throw new ApiError(
        'conflict',
        (await isMemberOfWorkspace(tx, invitation.workspace_id, identity.userId))
          ? 'You are already a member of this workspace.'
          : `Another member of this workspace has the email ${invitation.email} under another identity; an admin must remove that member first.`,
      );
    await markInvitationAccepted(tx, invitation.id, joined.id);
    const workspace = await getWorkspace(tx, invitation.workspace_id);
    const member = await getMember(tx, invitation.workspace_id, joined.id);
    return { workspace: workspace!, member: member as Member };
  });
}
