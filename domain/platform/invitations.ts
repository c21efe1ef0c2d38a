/**
 * Admins inviting teammates by email (operationIds inviteMember, listInvitations,
 * revokeInvitation, acceptInvitation; docs/teams.md): the request and answer schemas, the
 * invitation's secret, its status, the email that carries it, and the pure decision an acceptance
 * is checked with (services/platform/invitations.ts runs it on the row it locked).
 */
import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { Identity } from './identity.js';
import { MemberSchema, WorkspaceSchema } from './workspaces.js';
import {
  EmailAddressSchema,
  queryInteger,
  RoleSchema,
  TimestampSchema,
  UuidSchema,
  type Role,
} from '../shared/common.js';
import type { ErrorCode } from '../shared/errors.js';

// ---------------------------------------------------------------------------------------------
// The secret: 32 random bytes, base64url (43 characters). Only its SHA-256 is stored, as for API keys.

export const invitationTokenPattern = /^[A-Za-z0-9_-]{43}$/;

export function generateInvitationToken(): string {
  return randomBytes(32).toString('base64url');
}

export function hashInvitationToken(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

// ---------------------------------------------------------------------------------------------
// Schemas.

export const invitationExpiryDays = { min: 1, max: 30, default: 7 } as const;

export const MemberInvitationCreateSchema = z
  .object({
    email: EmailAddressSchema.describe(
      'Where the invitation goes; the person accepts with a token of this verified address',
    ),
    role: RoleSchema.default('member').describe(
      'The role the person joins with: `admin` manages members, keys and billing',
    ),
    expires_in_days: z
      .int()
      .min(invitationExpiryDays.min)
      .max(invitationExpiryDays.max)
      .default(invitationExpiryDays.default)
      .describe('Days until the invitation expires, 1 to 30 (7)'),
  })
  .meta({ id: 'MemberInvitationCreate' });
export type MemberInvitationCreate = z.infer<typeof MemberInvitationCreateSchema>;

export const InvitationStatusSchema = z
  .enum(['pending', 'accepted', 'revoked', 'expired'])
  .describe('`pending` until accepted, revoked (or replaced by a new invitation) or past `expires_at`');
export type InvitationStatus = z.infer<typeof InvitationStatusSchema>;

export const MemberInvitationSchema = z
  .object({
    id: UuidSchema,
    email: z.string().describe('The invited address, lower-case'),
    role: RoleSchema.describe('The role the person joins with'),
    status: InvitationStatusSchema,
    invited_by_member_id: UuidSchema.describe('The admin who invited (kept after their removal)'),
    created_at: TimestampSchema,
    expires_at: TimestampSchema,
    accepted_at: TimestampSchema.nullable(),
    accepted_by_member_id: UuidSchema.nullable().describe('The member the acceptance made'),
    revoked_at: TimestampSchema.nullable(),
    revoked_by_member_id: UuidSchema.nullable().describe(
      'The admin who revoked it, or whose new invitation replaced it',
    ),
  })
  .meta({
    id: 'MemberInvitation',
    description: 'An invitation to the workspace; its token is only ever in the email.',
  });
export type MemberInvitation = z.infer<typeof MemberInvitationSchema>;

export const InvitationListQuerySchema = z.object({
  limit: queryInteger(z.int().min(1).max(200).default(50)).describe('Invitations per page, 1 to 200'),
  offset: queryInteger(z.int().min(0).max(1_000_000).default(0)).describe('Invitations to skip, 0 to 1,000,000'),
});

export const MemberInvitationPageSchema = z
  .object({
    invitations: z.array(MemberInvitationSchema).describe('Pending first, then the rest; newest first within each'),
    next_offset: z.int().nullable().describe('The offset of the next page; null on the last'),
  })
  .meta({ id: 'MemberInvitationPage' });

export const InvitationAcceptSchema = z
  .object({
    token: z
      .string()
      .regex(invitationTokenPattern, 'must be the 43-character token of the invitation email')
      .describe('The token of the invitation email'),
  })
  .meta({ id: 'InvitationAccept' });

export const InvitationAcceptedSchema = z
  .object({
    workspace: WorkspaceSchema,
    member: MemberSchema.describe('The member the acceptance made, with the invitation’s role'),
  })
  .meta({ id: 'InvitationAccepted' });

// ---------------------------------------------------------------------------------------------
// The stored invitation and what it reads as.

export interface InvitationRow {
  id: string;
  workspace_id: string;
  email: string;
  role: Role;
  invited_by: string;
  created_at: Date;
  expires_at: Date;
  accepted_at: Date | null;
  accepted_by_member_id: string | null;
  revoked_at: Date | null;
  revoked_by: string | null;
}

type StatusFields = Pick<InvitationRow, 'expires_at' | 'accepted_at' | 'revoked_at'>;

/**
 * An invitation's status at `now`: expired at and past its expiry instant. One revoked only when it
 * had already expired (replaced by a new invitation after expiring) still reads as expired.
 */
export function invitationStatus(row: StatusFields, now: Date): InvitationStatus {
  if (row.accepted_at) return 'accepted';
  if (row.revoked_at && row.revoked_at < row.expires_at) return 'revoked';
  if (row.revoked_at || now >= row.expires_at) return 'expired';
  return 'pending';
}

export function toMemberInvitation(row: InvitationRow, now: Date): MemberInvitation {
  return {
    id: row.id,
    email: row.email,
    role: row.role,
    status: invitationStatus(row, now),
    invited_by_member_id: row.invited_by,
    created_at: row.created_at.toISOString(),
    expires_at: row.expires_at.toISOString(),
    accepted_at: row.accepted_at?.toISOString() ?? null,
    accepted_by_member_id: row.accepted_by_member_id,
    revoked_at: row.revoked_at?.toISOString() ?? null,
    revoked_by_member_id: row.revoked_by,
  };
}

// ---------------------------------------------------------------------------------------------
// Accepting.

export type AcceptanceRefusal =
  'unknown' | 'already_accepted' | 'revoked' | 'expired' | 'email_mismatch' | 'email_unverified' | 'already_member';

export type AcceptanceDecision =
  | { outcome: 'accepted'; role: Role }
  | { outcome: 'refused'; reason: AcceptanceRefusal; code: ErrorCode; detail: string };

const refused = (reason: AcceptanceRefusal, code: ErrorCode, detail: string): AcceptanceDecision => ({
  outcome: 'refused',
  reason,
  code,
  detail,
});

/**
 * Whether the holder of `identity` may accept `invitation` (undefined: no invitation has the
 * token) at `now`, and why not. An invitation is used once, before its expiry instant, by a
 * person whose token carries the invited address, verified; `alreadyMember` says the person is a
 * member of the invitation's workspace already.
 */
export function decideAcceptance(
  invitation: (StatusFields & { email: string; role: Role }) | undefined,
  identity: Pick<Identity, 'email' | 'emailVerified'>,
  now: Date,
  facts: { alreadyMember: boolean },
): AcceptanceDecision {
  if (!invitation) return refused('unknown', 'not_found', 'No invitation has this token: ask an admin for a new one.');
  switch (invitationStatus(invitation, now)) {
    case 'accepted':
      return refused(
        'already_accepted',
        'conflict',
        'This invitation was already accepted: an invitation is used once.',
      );
    case 'revoked':
      return refused('revoked', 'conflict', 'This invitation was revoked by an admin, or replaced by a newer one.');
    case 'expired':
      return refused(
        'expired',
        'conflict',
        `This invitation expired at ${invitation.expires_at.toISOString()}: ask an admin to invite you again.`,
      );
    case 'pending':
      break;
  }
  if (identity.email === null || identity.email.toLowerCase() !== invitation.email)
    return refused(
      'email_mismatch',
      'forbidden',
      identity.email === null
        ? 'This invitation is for an email address, and your token carries none (AUTH_CLAIM_EMAIL).'
        : `This invitation is for another email address than your token’s (${identity.email}): sign in with the invited address.`,
    );
  if (!identity.emailVerified)
    return refused(
      'email_unverified',
      'forbidden',
      `Your token’s email address (${identity.email}) is not verified (email_verified): verify it with your identity provider and sign in again.`,
    );
  if (facts.alreadyMember) return refused('already_member', 'conflict', 'You are already a member of this workspace.');
  return { outcome: 'accepted', role: invitation.role };
}

// ---------------------------------------------------------------------------------------------
// The email.

/** A header's or a line's text with no line breaks or other control characters. */
const oneLine = (text: string) => text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();

/** The link in the email: the app's accept page (INVITATION_ACCEPT_URL) with the token. */
export function acceptLink(page: string, token: string): string {
  const url = new URL(page);
  url.searchParams.set('token', token);
  return url.toString();
}

/**
 * The invitation email's subject and text. The API has no page of its own to land on: the person
 * signs in and sends the token to `POST /invitations/accept/` (operationId acceptInvitation), or
 * the app whose page INVITATION_ACCEPT_URL names does it for them (the link, when it is set).
 */
export function invitationEmail(input: {
  workspaceName: string;
  role: Role;
  inviterName: string;
  email: string;
  expiresAt: Date;
  token: string;
  acceptUrl: string | null;
}): { subject: string; text: string } {
  const workspace = oneLine(input.workspaceName);
  const inviter = oneLine(input.inviterName);
  const role = input.role === 'admin' ? 'an admin (managing members, API keys and billing)' : 'a member';
  return {
    subject: `${inviter} invited you to the workspace ${workspace}`,
    text: [
      `${inviter} invited you (${input.email}) to join the workspace "${workspace}" as ${role}.`,
      '',
      ...(input.acceptUrl
        ? ['To accept, open this link and sign in with this email address:', '', `  ${input.acceptUrl}`, '']
        : []),
      `${input.acceptUrl ? 'Or' : 'To accept,'} sign in with this email address (verified with your identity provider)`,
      'and send this token to POST /invitations/accept/ (operationId acceptInvitation):',
      '',
      `Token: ${input.token}`,
      '',
      `The invitation works once and expires at ${input.expiresAt.toISOString()} (UTC).`,
      'If you did not expect it, ignore this email: nothing happens unless it is accepted.',
      '',
    ].join('\n'),
  };
}
