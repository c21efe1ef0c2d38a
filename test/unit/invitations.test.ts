/**
 * The pure rules of member invitations (domain/platform/invitations.ts): the status read from a
 * row and the clock, every branch of accepting (at and past the expiry instant), the request's
 * bounds, the secret and the email's words.
 */
import { describe, expect, it } from 'vitest';
import {
  acceptLink,
  decideAcceptance,
  generateInvitationToken,
  hashInvitationToken,
  InvitationAcceptSchema,
  invitationEmail,
  invitationStatus,
  invitationTokenPattern,
  MemberInvitationCreateSchema,
  toMemberInvitation,
  type InvitationRow,
} from '../../domain/platform/invitations.js';

const expiresAt = new Date('2030-01-08T12:00:00.000Z');
const before = new Date(expiresAt.getTime() - 1);
const after = new Date(expiresAt.getTime() + 1);

const row = (over: Partial<InvitationRow> = {}): InvitationRow => ({
  id: '00000000-0000-4000-8000-000000000001',
  workspace_id: '00000000-0000-4000-8000-000000000002',
  email: 'pat@example.com',
  role: 'member',
  invited_by: '00000000-0000-4000-8000-000000000003',
  created_at: new Date('2030-01-01T12:00:00.000Z'),
  expires_at: expiresAt,
  accepted_at: null,
  accepted_by_member_id: null,
  revoked_at: null,
  revoked_by: null,
  ...over,
});

const person = { email: 'pat@example.com', emailVerified: true };
const notMember = { alreadyMember: false };

describe('invitationStatus', () => {
  it('is pending before the expiry instant, expired at it and past it', () => {
    expect(invitationStatus(row(), before)).toBe('pending');
    expect(invitationStatus(row(), expiresAt)).toBe('expired');
    expect(invitationStatus(row(), after)).toBe('expired');
  });

  it('is accepted or revoked whatever the clock, and expired when it was revoked only after expiring', () => {
    expect(invitationStatus(row({ accepted_at: before }), after)).toBe('accepted');
    expect(invitationStatus(row({ revoked_at: before }), before)).toBe('revoked');
    expect(invitationStatus(row({ revoked_at: before }), after)).toBe('revoked');
    // Replaced by a new invitation once it had expired: it still reads as expired.
    expect(invitationStatus(row({ revoked_at: expiresAt }), after)).toBe('expired');
    expect(invitationStatus(row({ revoked_at: after }), after)).toBe('expired');
  });

  it('is in the read shape, with no token and ISO instants', () => {
    const read = toMemberInvitation(row({ revoked_at: before, revoked_by: 'x' }), before);
    expect(read).toEqual({
      id: row().id,
      email: 'pat@example.com',
      role: 'member',
      status: 'revoked',
      invited_by_member_id: row().invited_by,
      created_at: '2030-01-01T12:00:00.000Z',
      expires_at: '2030-01-08T12:00:00.000Z',
      accepted_at: null,
      accepted_by_member_id: null,
      revoked_at: before.toISOString(),
      revoked_by_member_id: 'x',
    });
  });
});

describe('decideAcceptance', () => {
  it('accepts a pending invitation of the token’s verified address, with its role, just before expiry', () => {
    expect(decideAcceptance(row({ role: 'admin' }), person, before, notMember)).toEqual({
      outcome: 'accepted',
      role: 'admin',
    });
    // The address compares in any case (the token's is lower-cased when read; the row's is stored so).
    expect(decideAcceptance(row(), { ...person, email: 'Pat@Example.com' }, before, notMember).outcome).toBe(
      'accepted',
    );
  });

  it('refuses an unknown token with 404', () => {
    expect(decideAcceptance(undefined, person, before, notMember)).toMatchObject({
      outcome: 'refused',
      reason: 'unknown',
      code: 'not_found',
    });
  });

  it('refuses an accepted, a revoked and an expired invitation with 409, each saying which', () => {
    const accepted = decideAcceptance(row({ accepted_at: before }), person, before, notMember);
    const revoked = decideAcceptance(row({ revoked_at: before }), person, before, notMember);
    const atExpiry = decideAcceptance(row(), person, expiresAt, notMember);
    const pastExpiry = decideAcceptance(row(), person, after, notMember);
    expect(accepted).toMatchObject({
      reason: 'already_accepted',
      code: 'conflict',
      detail: expect.stringMatching(/already accepted/),
    });
    expect(revoked).toMatchObject({ reason: 'revoked', code: 'conflict', detail: expect.stringMatching(/revoked/) });
    for (const expired of [atExpiry, pastExpiry])
      expect(expired).toMatchObject({
        reason: 'expired',
        code: 'conflict',
        detail: expect.stringContaining('expired at 2030-01-08T12:00:00.000Z'),
      });
  });

  it('refuses another address, or none, with 403 saying so', () => {
    expect(decideAcceptance(row(), { ...person, email: 'sam@example.com' }, before, notMember)).toMatchObject({
      reason: 'email_mismatch',
      code: 'forbidden',
      detail: expect.stringMatching(/another email address than your token’s \(sam@example\.com\)/),
    });
    expect(decideAcceptance(row(), { email: null, emailVerified: false }, before, notMember)).toMatchObject({
      reason: 'email_mismatch',
      code: 'forbidden',
      detail: expect.stringMatching(/carries none/),
    });
  });

  it('refuses the invited address unverified with 403 saying so', () => {
    expect(decideAcceptance(row(), { ...person, emailVerified: false }, before, notMember)).toMatchObject({
      reason: 'email_unverified',
      code: 'forbidden',
      detail: expect.stringMatching(/not verified \(email_verified\)/),
    });
  });

  it('refuses a person who is a member of the workspace already with 409', () => {
    expect(decideAcceptance(row(), person, before, { alreadyMember: true })).toMatchObject({
      reason: 'already_member',
      code: 'conflict',
    });
  });

  it('says a used-up invitation is used up before judging the person', () => {
    const stranger = { email: 'sam@example.com', emailVerified: false };
    expect(decideAcceptance(row(), stranger, after, notMember)).toMatchObject({ reason: 'expired' });
    expect(
      decideAcceptance(row(), { ...stranger, email: person.email }, before, { alreadyMember: true }),
    ).toMatchObject({
      reason: 'email_unverified',
    });
  });
});

describe('the invitation request', () => {
  it('defaults the role and the expiry, and bounds the days 1 to 30', () => {
    expect(MemberInvitationCreateSchema.parse({ email: 'pat@example.com' })).toEqual({
      email: 'pat@example.com',
      role: 'member',
      expires_in_days: 7,
    });
    for (const days of [1, 30])
      expect(MemberInvitationCreateSchema.safeParse({ email: 'a@b.co', expires_in_days: days }).success).toBe(true);
    for (const days of [0, 31, 1.5])
      expect(MemberInvitationCreateSchema.safeParse({ email: 'a@b.co', expires_in_days: days }).success).toBe(false);
    expect(MemberInvitationCreateSchema.safeParse({ email: 'not an address' }).success).toBe(false);
    expect(MemberInvitationCreateSchema.safeParse({ email: 'a@b.co', role: 'owner' }).success).toBe(false);
  });

  it('takes a token of the secret’s shape only', () => {
    const token = generateInvitationToken();
    expect(token).toMatch(invitationTokenPattern);
    expect(InvitationAcceptSchema.safeParse({ token }).success).toBe(true);
    for (const bad of ['', token.slice(1), `${token}x`, `${token.slice(1)}=`])
      expect(InvitationAcceptSchema.safeParse({ token: bad }).success).toBe(false);
    expect(generateInvitationToken()).not.toBe(token);
    expect(hashInvitationToken(token)).toHaveLength(32);
    expect(hashInvitationToken(token).equals(hashInvitationToken(token))).toBe(true);
  });
});

describe('the invitation email', () => {
  it('names the workspace in its subject, and the workspace, role, inviter, expiry and link in its text', () => {
    const token = generateInvitationToken();
    const link = acceptLink('https://app.example/join?from=mail', token);
    expect(link).toBe(`https://app.example/join?from=mail&token=${token}`);
    const mail = invitationEmail({
      workspaceName: 'Acme\r\nBcc: x@evil.example',
      role: 'admin',
      inviterName: 'Alex Admin',
      email: 'pat@example.com',
      expiresAt,
      token,
      acceptUrl: link,
    });
    expect(mail.subject).toBe('Alex Admin invited you to the workspace Acme Bcc: x@evil.example');
    expect(mail.subject).not.toMatch(/[\r\n]/);
    expect(mail.text).toContain('join the workspace "Acme Bcc: x@evil.example" as an admin');
    expect(mail.text).toContain('Alex Admin invited you (pat@example.com)');
    expect(mail.text).toContain(`Token: ${token}`);
    expect(mail.text).toContain(`  ${link}`);
    // Without an app page, the token alone and how to send it.
    const bare = invitationEmail({
      workspaceName: 'Acme',
      role: 'member',
      inviterName: 'A',
      email: 'p@e.c',
      expiresAt,
      token,
      acceptUrl: null,
    });
    expect(bare.text).not.toMatch(/https?:/);
    expect(bare.text).toContain(`Token: ${token}`);
    expect(mail.text).toContain('expires at 2030-01-08T12:00:00.000Z');
    expect(mail.text).toContain('POST /invitations/accept/');
  });
});
