import { describe, expect, it } from 'vitest';
import {
  decideSignIn,
  defaultAdminRoles,
  defaultClaimNames,
  identityFromClaims,
  type Identity,
  type SignInFacts,
} from '../../domain/platform/identity.js';

const read = (payload: Record<string, unknown>, claims = defaultClaimNames) =>
  identityFromClaims(payload, { claims, adminRoles: defaultAdminRoles, orgMayBeWorkspaceId: false });

describe('reading a provider token’s claims', () => {
  it('reads the default claim names and maps an admin organisation role', () => {
    expect(
      read({
        sub: 'user_1',
        org_id: 'org_2ab',
        org_role: 'org:admin',
        org_name: 'Acme',
        email: 'Ada@Example.com',
        email_verified: true,
        name: 'Ada',
      }),
    ).toEqual({
      userId: 'user_1',
      orgId: 'org_2ab',
      orgName: 'Acme',
      joinRole: 'admin',
      email: 'ada@example.com',
      emailVerified: true,
      name: 'Ada',
      orgMayBeWorkspaceId: false,
    });
  });

  it('reads namespaced claims as one key and dotted paths as nesting, and a role array', () => {
    const claims = { ...defaultClaimNames, orgId: 'https://example.com/org_id', orgRole: 'o.rol' };
    const identity = read({ sub: 'u', 'https://example.com/org_id': 'org_x', o: { rol: ['viewer', 'owner'] } }, claims);
    expect(identity).toMatchObject({ orgId: 'org_x', joinRole: 'admin' });
  });

  it('maps any other role, or none, to member, and an unverified email stays unverified', () => {
    expect(read({ sub: 'u', org_role: 'org:member', email: 'a@b.c' })).toMatchObject({
      joinRole: 'member',
      emailVerified: false,
    });
    expect(read({ sub: 'u' })).toMatchObject({ orgId: null, email: null, joinRole: 'member' });
  });

  it('names no one without a subject', () => {
    expect(read({ org_id: 'org_1' })).toBeUndefined();
    expect(read({ sub: '  ' })).toBeUndefined();
  });
});

describe('deciding a sign-in', () => {
  const person: Identity = {
    userId: 'u',
    orgId: 'org_1',
    orgName: null,
    joinRole: 'member',
    email: 'u@example.com',
    emailVerified: true,
    name: null,
    orgMayBeWorkspaceId: false,
  };
  const facts = (over: Partial<SignInFacts> = {}): SignInFacts => ({
    workspace: { id: 'w', mappedFromOrg: true },
    named: false,
    memberships: 0,
    member: false,
    removed: false,
    ...over,
  });
  const off = { provisionOnFirstUse: false };

  it('lets a member in and joins a person of the mapped organisation with their mapped role', () => {
    expect(decideSignIn(person, facts({ member: true }), off)).toEqual({ outcome: 'member' });
    expect(decideSignIn({ ...person, joinRole: 'admin' }, facts(), off)).toEqual({ outcome: 'join', role: 'admin' });
  });

  it('does not re-add a removed person, nor join a workspace the organisation is not mapped to', () => {
    expect(decideSignIn(person, facts({ removed: true }), off)).toMatchObject({
      outcome: 'refused',
      status: 'forbidden',
    });
    expect(decideSignIn(person, facts({ workspace: { id: 'w', mappedFromOrg: false } }), off)).toMatchObject({
      outcome: 'refused',
      detail: expect.stringMatching(/not a member/),
    });
  });

  it('needs an email to join', () => {
    expect(decideSignIn({ ...person, email: null }, facts(), off)).toMatchObject({
      outcome: 'refused',
      detail: expect.stringMatching(/AUTH_CLAIM_EMAIL/),
    });
  });

  it('provisions an unknown organisation only when the policy says so', () => {
    expect(decideSignIn(person, facts({ workspace: null }), { provisionOnFirstUse: true })).toEqual({
      outcome: 'provision',
    });
    expect(decideSignIn(person, facts({ workspace: null }), off)).toMatchObject({
      outcome: 'refused',
      detail: expect.stringMatching(/signUp/),
    });
  });

  it('sends a person of no organisation to sign up, and asks a member of several to name one', () => {
    const noOrg = { ...person, orgId: null };
    expect(decideSignIn(noOrg, facts({ workspace: null }), { provisionOnFirstUse: true })).toMatchObject({
      status: 'forbidden',
      detail: expect.stringMatching(/invitation/),
    });
    expect(decideSignIn(noOrg, facts({ workspace: null, memberships: 2 }), off)).toMatchObject({
      status: 'bad_request',
      detail: expect.stringMatching(/X-Workspace-Id/),
    });
    expect(decideSignIn(person, facts({ workspace: null, named: true }), off)).toMatchObject({
      status: 'forbidden',
      detail: expect.stringMatching(/X-Workspace-Id/),
    });
  });
});
