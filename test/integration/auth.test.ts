import { describe, expect, it } from 'vitest';
import { generateApiKeySecret } from '../../domain/platform/api-key-secret.js';
import { startTestStack, useTestStack, withKey, withToken } from '../support/test-stack.js';
import { testIntegrations } from '../support/integrations.js';

// The API's clock (its once-a-minute last_used_at write reads it): real time, unless a test holds it.
let heldAt: number | null = null;
const { stack, paid, free } = useTestStack({ now: () => heldAt ?? Date.now() });

const unauthorizedDetail =
  'Missing or invalid credentials: send a valid X-API-Key header or Authorization: Bearer token.';

async function get(headers: Record<string, string>, url = '/workspace/') {
  return stack.app.inject({ method: 'GET', url, headers });
}

describe('authentication matrix', () => {
  it('answers 401 with a detail body when no credential is sent', async () => {
    const res = await get({});
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ detail: unauthorizedDetail });
  });

  it('answers the same 401 for a malformed key, a key with a bad checksum and an unknown key', async () => {
    const unknown = generateApiKeySecret();
    const badChecksum = paid.apiKey.slice(0, -1) + (paid.apiKey.endsWith('A') ? 'B' : 'A');
    for (const key of ['nonsense', badChecksum, unknown]) {
      const res = await get(withKey(key));
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ detail: unauthorizedDetail });
    }
  });

  it('accepts a live key and a bearer token of a member', async () => {
    expect((await get(withKey(paid.apiKey))).statusCode).toBe(200);
    const res = await get(withToken(paid.accessToken));
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      workspace: { id: paid.workspaceId },
      via: 'bearer',
      member: { user_id: paid.userId, role: 'admin' },
    });
  });

  it('refuses an expired key and a deleted key with the same 401', async () => {
    const created = await stack.app.inject({
      method: 'POST',
      url: '/api-keys/',
      headers: withKey(paid.apiKey),
      payload: { name: 'soon expired', expire_at: new Date(Date.now() + 60_000).toISOString() },
    });
    const key = created.json();
    expect((await get(withKey(key.key))).statusCode).toBe(200);
    await stack.sql`update api_keys set expire_at = now() - interval '1 second' where id = ${key.id}`;
    expect((await get(withKey(key.key))).json()).toEqual({ detail: unauthorizedDetail });

    const other = (
      await stack.app.inject({
        method: 'POST',
        url: '/api-keys/',
        headers: withKey(paid.apiKey),
        payload: { name: 'to delete' },
      })
    ).json();
    expect((await get(withKey(other.key))).statusCode).toBe(200);
    const del = await stack.app.inject({
      method: 'DELETE',
      url: `/api-keys/${other.id}/`,
      headers: withKey(paid.apiKey),
    });
    expect(del.statusCode).toBe(204);
    const after = await get(withKey(other.key));
    expect(after.statusCode).toBe(401);
    expect(after.json()).toEqual({ detail: unauthorizedDetail });
  });

  it('lets a read key read but answers 403 on a write operation', async () => {
    const readKey = free.apiKey; // a free workspace's admin key has read scope
    expect((await get(withKey(readKey), '/api-keys/')).statusCode).toBe(200);
    const res = await stack.app.inject({
      method: 'POST',
      url: '/api-keys/',
      headers: withKey(readKey),
      payload: { name: 'x' },
    });
    expect(res.statusCode).toBe(403);
    expect(res.json().detail).toMatch(/read scope/);
  });

  it('refuses a bearer token with a bad signature or an expired lifetime; one with no org_id reaches its only workspace', async () => {
    const [header, payload] = paid.accessToken.split('.');
    const forged = `${header}.${payload}.${'A'.repeat(43)}`;
    expect((await get(withToken(forged))).statusCode).toBe(401);
    const { SignJWT } = await import('jose');
    const secret = (
      await stack.sql<{ value: string }[]>`select value from service_settings where key = 'dev_jwt_secret'`
    )[0]!.value;
    const key = new TextEncoder().encode(secret);
    const noOrg = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject(paid.userId)
      .setExpirationTime('1h')
      .sign(key);
    // No organisation: the one workspace the person is a member of; a stranger is told how to get one.
    const reached = await get(withToken(noOrg), '/workspace/');
    expect(reached.statusCode, reached.body).toBe(200);
    expect(reached.json().workspace.id).toBe(paid.workspaceId);
    const stranger = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject(`stranger-${paid.userId}`)
      .setExpirationTime('1h')
      .sign(key);
    const refused = await get(withToken(stranger), '/workspace/');
    expect(refused.statusCode).toBe(403);
    expect(refused.json().detail).toMatch(/sign up with POST \/signup\//);
    const expired = await new SignJWT({ org_id: paid.workspaceId })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject(paid.userId)
      .setExpirationTime(Math.floor(Date.now() / 1000) - 10)
      .sign(key);
    expect((await get(withToken(expired))).statusCode).toBe(401);
  });

  it('answers 403 to a valid token whose user is not a member of the named workspace', async () => {
    const token = await stack.mintToken({ sub: paid.userId, org_id: free.workspaceId });
    const res = await get(withToken(token));
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ detail: expect.any(String) });
  });

  it('answers 403 to a member on an admin-only operation and lets an admin do it', async () => {
    const member = await stack.addMember(paid.workspaceId, 'member');
    const asMember = await stack.app.inject({
      method: 'POST',
      url: '/api-keys/',
      headers: withToken(member.accessToken),
      payload: { name: 'by member' },
    });
    expect(asMember.statusCode).toBe(403);
    expect(asMember.json().detail).toMatch(/admin/);
    expect((await get(withToken(member.accessToken), '/api-keys/')).statusCode).toBe(200);
    const asAdmin = await stack.app.inject({
      method: 'POST',
      url: '/api-keys/',
      headers: withToken(paid.accessToken),
      payload: { name: 'by admin' },
    });
    expect(asAdmin.statusCode).toBe(201);
  });

  it('never shows another workspace its resources: another workspace key id is 404', async () => {
    const [mine] = (await get(withKey(paid.apiKey), '/api-keys/')).json().api_keys;
    const res = await get(withKey(free.apiKey), `/api-keys/${mine.id}/`);
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ detail: 'API key not found.' });
  });
});

describe('last_used_at', () => {
  it('records use to the minute and writes at most once per key per minute', async () => {
    const ws = await stack.createWorkspace('paid');
    const lastUsed = async () =>
      (
        await stack.sql<
          { last_used_at: Date | null }[]
        >`select last_used_at from api_keys where workspace_id = ${ws.workspaceId}`
      )[0]!.last_used_at;
    expect(await lastUsed()).toBeNull();
    // The API's minute is held for the whole test, so "the same minute" does not depend on when it runs.
    heldAt = Date.now();
    try {
      await get(withKey(ws.apiKey));
      await expect.poll(lastUsed).not.toBeNull();
      const recorded = (await lastUsed())!;
      expect(recorded.getSeconds()).toBe(0);
      expect(recorded.getMilliseconds()).toBe(0);
      expect(Date.now() - recorded.getTime()).toBeLessThan(120_000);
      const read = (await get(withKey(ws.apiKey), '/api-keys/')).json().api_keys[0];
      expect(read.last_used_at).toBe(recorded.toISOString());

      // Move the stored value back: more requests in the same minute must not write it again.
      const marker = new Date('2020-01-01T00:00:00Z');
      await stack.sql`update api_keys set last_used_at = ${marker} where workspace_id = ${ws.workspaceId}`;
      for (let i = 0; i < 5; i += 1) expect((await get(withKey(ws.apiKey))).statusCode).toBe(200);
      await new Promise((r) => setTimeout(r, 300));
      expect((await lastUsed())!.toISOString()).toBe(marker.toISOString());

      // The first request of the next minute writes it again.
      heldAt += 60_000;
      expect((await get(withKey(ws.apiKey))).statusCode).toBe(200);
      await expect.poll(async () => (await lastUsed())!.toISOString()).not.toBe(marker.toISOString());
      expect(Date.now() - (await lastUsed())!.getTime()).toBeLessThan(120_000);
    } finally {
      heldAt = null;
    }
  });
});

describe('rate limits', () => {
  it('answers 429 with Retry-After once a key has used its allowance, per key', async () => {
    // The limiter's clock stands still unless the test moves it: no refill between requests, however slow.
    let at = Date.now();
    const limited = await startTestStack({ rateLimit: 3, now: () => at });
    try {
      const a = await limited.createWorkspace();
      const b = await limited.createWorkspace();
      const statuses: number[] = [];
      for (let i = 0; i < 4; i += 1)
        statuses.push(
          (await limited.app.inject({ method: 'GET', url: '/credits/', headers: withKey(a.apiKey) })).statusCode,
        );
      expect(statuses).toEqual([200, 200, 200, 429]);
      const refused = await limited.app.inject({ method: 'GET', url: '/credits/', headers: withKey(a.apiKey) });
      expect(refused.statusCode).toBe(429);
      // Three a minute: one request back every 20 seconds.
      expect(refused.headers['retry-after']).toBe('20');
      expect(refused.json()).toEqual({ detail: 'Too many requests; retry in 20 s.' });
      at += 19_000;
      expect(
        (await limited.app.inject({ method: 'GET', url: '/credits/', headers: withKey(a.apiKey) })).statusCode,
      ).toBe(429);
      at += 1_000;
      expect(
        (await limited.app.inject({ method: 'GET', url: '/credits/', headers: withKey(a.apiKey) })).statusCode,
      ).toBe(200);
      // Another credential has its own allowance.
      expect(
        (await limited.app.inject({ method: 'GET', url: '/credits/', headers: withKey(b.apiKey) })).statusCode,
      ).toBe(200);
      expect(
        (await limited.app.inject({ method: 'GET', url: '/credits/', headers: withToken(a.accessToken) })).statusCode,
      ).toBe(200);
    } finally {
      await limited.close();
    }
  });
});

describe('bearer tokens from an identity provider (AUTH_JWKS_URL)', () => {
  it('verifies RS256 tokens against the provider JWKS, with its issuer and audience', async () => {
    const { SignJWT, exportJWK, generateKeyPair } = await import('jose');
    const { createServer } = await import('node:http');
    const { buildApp } = await import('../../api/app.js');
    const { createTokenVerifier } = await import('../../services/platform/tokens.js');
    const provider = await generateKeyPair('RS256');
    const stranger = await generateKeyPair('RS256');
    const jwk = { ...(await exportJWK(provider.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    const server = createServer((_req, res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/.well-known/jwks.json`;
    const app = await buildApp({
      sql: stack.sql,
      temporal: { client: stack.client, taskQueue: stack.taskQueue },
      verifyToken: createTokenVerifier({ kind: 'jwks', url, issuer: 'https://idp.test/', audience: 'outreach' }),
      rateLimit: { limit: 0, windowSeconds: 60 },
      integrations: testIntegrations(),
    });
    // The provider names the organisation by its own id, mapped to the workspace.
    const orgId = `org_${paid.workspaceId.slice(0, 8)}`;
    await stack.sql`update workspaces set external_org_id = ${orgId} where id = ${paid.workspaceId}`;
    const sign = (key: CryptoKey, claims: { iss?: string; aud?: string; org?: string } = {}) =>
      new SignJWT({ org_id: claims.org ?? orgId })
        .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
        .setSubject(paid.userId)
        .setIssuer(claims.iss ?? 'https://idp.test/')
        .setAudience(claims.aud ?? 'outreach')
        .setExpirationTime('5m')
        .sign(key);
    try {
      const call = async (token: string) =>
        (await app.inject({ method: 'GET', url: '/workspace/', headers: withToken(token) })).statusCode;
      expect(await call(await sign(provider.privateKey))).toBe(200);
      expect(await call(await sign(stranger.privateKey))).toBe(401);
      expect(await call(await sign(provider.privateKey, { iss: 'https://evil.test/' }))).toBe(401);
      expect(await call(await sign(provider.privateKey, { aud: 'someone-else' }))).toBe(401);
      // An outside provider's org id that looks like a workspace id reaches nothing it was not mapped to.
      expect(await call(await sign(provider.privateKey, { org: paid.workspaceId }))).toBe(403);
      // The development HS256 token is not accepted once an identity provider is configured.
      expect(await call(paid.accessToken)).toBe(401);
    } finally {
      await app.close();
      server.close();
    }
  });
});
