// The local OpenID Connect twin (sim/oidc-provider.ts) on the real oidc-provider: its access tokens,
// obtained through the authorization-code flow over HTTP, verify against its JWKS with its issuer
// and audience, carry the user's claims, and keep verifying across a key rotation until the old
// key is retired. No database: the twin is all this file needs.
import { createRemoteJWKSet, decodeProtectedHeader, errors, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTokenVerifier } from '../../services/platform/tokens.js';
import { startOidcProvider, type OidcTwin } from '../../sim/oidc-provider.js';
import { oidcToken } from '../../sim/oidc-token.js';

const audience = 'http://127.0.0.1:3000';
let twin: OidcTwin;

beforeAll(async () => {
  twin = await startOidcProvider({
    audience,
    users: {
      alice: {
        email: 'alice@example.com',
        email_verified: true,
        name: 'Alice',
        org_id: 'org_2abc',
        org_name: 'Acme',
        org_role: 'admin',
      },
      bob: { email: 'bob@example.com', org_id: null },
    },
  });
});
afterAll(() => twin?.close());

/** Verifies against a JWKS fetched afresh, as a service that has not seen the token's key yet would. */
const verify = (token: string) =>
  jwtVerify(token, createRemoteJWKSet(new URL(twin.jwksUrl)), { issuer: twin.issuer, audience });

describe('the OIDC twin', () => {
  it('issues JWT access tokens for the audience, with the org and person claims', async () => {
    const token = await twin.accessToken('alice');
    const { payload, protectedHeader } = await verify(token);
    expect(protectedHeader).toMatchObject({ alg: 'RS256', typ: 'at+jwt' });
    expect(payload).toMatchObject({
      iss: twin.issuer,
      aud: audience,
      sub: 'alice',
      org_id: 'org_2abc',
      org_name: 'Acme',
      org_role: 'admin',
      email: 'alice@example.com',
      email_verified: true,
      name: 'Alice',
      scope: 'api',
    });
    expect(twin.issuer).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  it('gives a user without an organisation no org claims', async () => {
    const { payload } = await verify(await twin.accessToken('bob'));
    expect(payload.sub).toBe('bob');
    expect(payload.email).toBe('bob@example.com');
    expect(payload).not.toHaveProperty('org_id');
    expect(payload).not.toHaveProperty('org_name');
    expect(payload).not.toHaveProperty('org_role');
  });

  it('is accepted by the service verifier configured as AUTH_JWKS_URL, AUTH_JWT_ISSUER and AUTH_JWT_AUDIENCE', async () => {
    const verifyToken = createTokenVerifier({ kind: 'jwks', url: twin.jwksUrl, issuer: twin.issuer, audience });
    expect(await verifyToken(await twin.accessToken('alice'))).toMatchObject({
      userId: 'alice',
      orgId: 'org_2abc',
      orgName: 'Acme',
      joinRole: 'admin',
      email: 'alice@example.com',
      emailVerified: true,
      name: 'Alice',
    });
    const elsewhere = createTokenVerifier({ kind: 'jwks', url: twin.jwksUrl, issuer: twin.issuer, audience: 'other' });
    expect(await elsewhere(await twin.accessToken('alice'))).toBeUndefined();
  });

  it('lets no unknown user sign in', async () => {
    await expect(twin.accessToken('mallory')).rejects.toThrow(/refused the login of "mallory" \(401\)/);
  });

  it('reads users added at run time', async () => {
    twin.setUser('carol', { email: 'carol@example.com', org_id: 'org_9', org_role: ['member', 'billing'] });
    const { payload } = await verify(await twin.accessToken('carol'));
    expect(payload).toMatchObject({ sub: 'carol', org_id: 'org_9', org_role: ['member', 'billing'] });
  });

  it('rotates its signing key with both keys published, then retires the old one', async () => {
    const before = await twin.accessToken('alice');
    const oldKid = decodeProtectedHeader(before).kid;
    const issuer = twin.issuer;

    const { kid } = await twin.rotateKeys();
    const after = await twin.accessToken('alice');
    expect(decodeProtectedHeader(after).kid).toBe(kid);
    expect(kid).not.toBe(oldKid);
    expect(twin.issuer).toBe(issuer);
    await expect(verify(before)).resolves.toBeDefined();
    await expect(verify(after)).resolves.toBeDefined();
    const published = (await (await fetch(twin.jwksUrl)).json()) as { keys: { kid: string; d?: string }[] };
    expect(published.keys.map((k) => k.kid).sort()).toEqual([kid, oldKid].sort());
    expect(published.keys.every((k) => k.d === undefined)).toBe(true);

    await twin.retireOldKeys();
    await expect(verify(before)).rejects.toBeInstanceOf(errors.JWKSNoMatchingKey);
    await expect(verify(after)).resolves.toBeDefined();
    await expect(verify(await twin.accessToken('alice'))).resolves.toBeDefined();
  });

  it('serves `npm run oidc:token`: registers the user through the dev endpoint and prints their token', async () => {
    const token = await oidcToken([
      ...['--issuer', `${twin.issuer}/`, '--sub', 'dave', '--email', 'dave@example.com', '--name', 'Dave'],
      ...['--org', 'org_2abc', '--org-name', 'Acme', '--org-role', 'admin'],
    ]);
    const { payload } = await verify(token);
    expect(payload).toMatchObject({
      sub: 'dave',
      email: 'dave@example.com',
      email_verified: true,
      name: 'Dave',
      org_id: 'org_2abc',
      org_name: 'Acme',
      org_role: 'admin',
    });

    // Running it again updates the user: now of no organisation.
    const again = await oidcToken(['--issuer', twin.issuer, '--sub', 'dave', '--email', 'dave@example.com']);
    expect((await verify(again)).payload).not.toHaveProperty('org_id');
  });

  it('puts the org claims under the names given as claimNames, and no others', async () => {
    const named = await startOidcProvider({
      audience,
      claimNames: { org_id: 'https://example.com/org_id', org_role: 'https://example.com/org_role' },
      users: { erin: { email: 'erin@example.com', org_id: 'org_7', org_name: 'Seven', org_role: 'owner' } },
    });
    try {
      const { payload } = await jwtVerify(await named.accessToken('erin'), createRemoteJWKSet(new URL(named.jwksUrl)), {
        issuer: named.issuer,
        audience,
      });
      expect(payload).toMatchObject({
        'https://example.com/org_id': 'org_7',
        'https://example.com/org_role': 'owner',
        org_name: 'Seven',
      });
      expect(payload).not.toHaveProperty('org_id');
      expect(payload).not.toHaveProperty('org_role');
    } finally {
      await named.close();
    }
  });

  it('signs arbitrary claims with its current key for negative tests, under the published kid', async () => {
    const now = Math.floor(Date.now() / 1000);
    const forged = await twin.signWithCurrentKey({ sub: 'alice', iss: twin.issuer, aud: audience, exp: now + 60 });
    const { payload, protectedHeader } = await verify(forged);
    expect(payload).toEqual({ sub: 'alice', iss: twin.issuer, aud: audience, exp: now + 60 });
    const published = (await (await fetch(twin.jwksUrl)).json()) as { keys: { kid: string }[] };
    expect(protectedHeader).toMatchObject({ alg: 'RS256', typ: 'at+jwt' });
    expect(published.keys.map((k) => k.kid)).toContain(protectedHeader.kid);
    const expired = await twin.signWithCurrentKey({ sub: 'alice', iss: twin.issuer, aud: audience, exp: now - 60 });
    await expect(verify(expired)).rejects.toBeInstanceOf(errors.JWTExpired);
    const otherKid = await twin.signWithCurrentKey({ sub: 'alice', iss: twin.issuer, aud: audience }, { kid: 'nope' });
    await expect(verify(otherKid)).rejects.toBeInstanceOf(errors.JWKSNoMatchingKey);
  });

  it('refuses a malformed user at the dev endpoint', async () => {
    const res = await fetch(`${twin.issuer}/dev/users/eve`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Eve' }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe('invalid_user');
    await expect(twin.accessToken('eve')).rejects.toThrow(/refused the login/);
  });
});
