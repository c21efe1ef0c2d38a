/**
 * The service against a real OpenID provider (sim/oidc-provider.ts, the local twin on the
 * `oidc-provider` package): the app's verifier is built from exactly the AUTH_* variables an
 * operator sets (readAuthSettings → resolveTokenConfig), and every genuine token comes through the
 * provider's authorization-code flow. test/integration/sign-up.test.ts covers the same rules with
 * development tokens; this file is about what changes with a provider: its ids, its claim names,
 * its keys and the tokens it would never issue.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { SignJWT, decodeProtectedHeader, generateKeyPair, type JWTPayload } from 'jose';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/app.js';
import { readAuthSettings } from '../../integrations/config.js';
import { createTokenVerifier } from '../../services/platform/tokens.js';
import { startOidcProvider, type OidcTwin, type OidcUser } from '../../sim/oidc-provider.js';
import { createApiKey } from '../../store/platform/api-keys.js';
import { resolveTokenConfig } from '../../worker/auth-config.js';
import { freePort } from '../../worker/ports.js';
import { useTestStack, withKey, withToken } from '../support/test-stack.js';

const { stack } = useTestStack({ workspaces: false });

type App = Awaited<ReturnType<typeof buildApp>>;

const unauthorized = {
  detail: 'Missing or invalid credentials: send a valid X-API-Key header or Authorization: Bearer token.',
};

/**
 * How long after a JWKS fetch a token naming an unknown key waits for the next one. Production
 * keeps tokens.ts's 5 s; resolveTokenConfig passes no cooldown, so the main app sets this one
 * value by hand: the rotation test follows a new kid, and sees a retired key dropped, within a
 * fraction of a second instead of sleeping through 5 s windows.
 */
const jwksCooldownMs = 100;

/** An app whose verifier comes from these AUTH_* variables, beside the test stack. */
async function appWith(env: Record<string, string>, options: { jwksCooldownMs?: number } = {}): Promise<App> {
  const config = await resolveTokenConfig(stack.sql, readAuthSettings(env));
  if (config.kind !== 'jwks') throw new Error('AUTH_JWKS_URL must make a JWKS verifier');
  const app = await buildApp({
    sql: stack.sql,
    temporal: { client: stack.client, taskQueue: stack.taskQueue },
    verifyToken: createTokenVerifier({ ...config, ...options }),
    rateLimit: { limit: 0, windowSeconds: 60 },
    logger: pino({ level: 'error' }),
    integrations: stack.integrations,
  });
  await app.ready();
  return app;
}

const providerEnv = (twin: OidcTwin) => ({
  AUTH_JWKS_URL: twin.jwksUrl,
  AUTH_JWT_ISSUER: twin.issuer,
  AUTH_JWT_AUDIENCE: twin.audience,
});

/** Provider-style ids (Clerk's `user_2…`/`org_2…`), unique per run. */
const providerId = (kind: 'user' | 'org') => `${kind}_2${randomBytes(10).toString('base64url').replace(/[-_]/g, 'x')}`;

/** A twin user, registered at the twin, with their email derived from the id. */
function person(twin: OidcTwin, user: Partial<OidcUser> = {}): string {
  const sub = providerId('user');
  twin.setUser(sub, {
    email: `${sub.toLowerCase()}@example.com`,
    email_verified: true,
    name: `Person ${sub}`,
    ...user,
  });
  return sub;
}

/** Each user's access token, through the code flow once and reused (the flow costs several round trips). */
const tokens = new Map<string, Promise<string>>();
function tokenOf(twin: OidcTwin, sub: string): Promise<string> {
  const key = `${twin.issuer} ${sub}`;
  if (!tokens.has(key)) tokens.set(key, twin.accessToken(sub));
  return tokens.get(key)!;
}

const signUp = (app: App, token: string, name: string) =>
  app.inject({ method: 'POST', url: '/signup/', headers: withToken(token), payload: { name } });
const reach = (app: App, headers: Record<string, string>) => app.inject({ method: 'GET', url: '/workspace/', headers });

async function externalOrgId(workspaceId: string): Promise<string | null> {
  const [row] = await stack.sql<{ external_org_id: string | null }[]>`
    select external_org_id from workspaces where id = ${workspaceId}`;
  return row!.external_org_id;
}

async function counts(): Promise<{ workspaces: number; members: number }> {
  const [row] = await stack.sql<{ workspaces: number; members: number }[]>`
    select (select count(*)::int from workspaces) as workspaces, (select count(*)::int from members) as members`;
  return row!;
}

let twin: OidcTwin;
let app: App;

beforeAll(async () => {
  twin = await startOidcProvider({ audience: 'https://api.outreach.test' });
  app = await appWith(providerEnv(twin), { jwksCooldownMs });
});
afterAll(async () => {
  await app?.close();
  await twin?.close();
});

describe('signing up and joining with the provider’s tokens', () => {
  it('a new organisation’s first person signs up as its admin; colleagues join on first use with the role their org role maps to', async () => {
    const org = providerId('org');
    const founder = person(twin, { org_id: org, org_name: 'Acme', org_role: 'org:member' });
    const created = await signUp(app, await tokenOf(twin, founder), 'Acme');
    expect(created.statusCode, created.body).toBe(201);
    const { workspace, member } = created.json();
    // The founder is the admin whatever their organisation role says.
    expect(member).toMatchObject({ user_id: founder, role: 'admin', email: `${founder.toLowerCase()}@example.com` });
    // The workspace stands for the provider's organisation, by the provider's own id.
    expect(await externalOrgId(workspace.id)).toBe(org);

    const boss = person(twin, { org_id: org, org_role: 'org:admin' });
    const colleague = person(twin, { org_id: org, org_role: 'org:member' });
    for (const [sub, role] of [
      [founder, 'admin'],
      [boss, 'admin'],
      [colleague, 'member'],
    ] as const) {
      const res = await reach(app, withToken(await tokenOf(twin, sub)));
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({
        workspace: { id: workspace.id },
        member: { user_id: sub, role },
        via: 'bearer',
      });
    }
    const joined = await stack.sql`
      select target_user_id, joined_via from member_audit
      where workspace_id = ${workspace.id} and action = 'joined' order by id`;
    expect(joined.map((r) => [r.target_user_id, r.joined_via])).toEqual([
      [founder, 'sign_up'],
      [boss, 'first_use'],
      [colleague, 'first_use'],
    ]);
  });

  it('a person of no organisation is told to sign up, then reaches their own workspace and no other', async () => {
    const solo = person(twin, { org_id: null });
    const token = await tokenOf(twin, solo);
    const before = await reach(app, withToken(token));
    expect(before.statusCode).toBe(403);
    expect(before.json().detail).toMatch(/POST \/signup\//);

    const created = await signUp(app, token, 'Solo');
    expect(created.statusCode, created.body).toBe(201);
    const own = created.json().workspace.id as string;
    expect(await externalOrgId(own)).toBeNull();
    expect((await reach(app, withToken(token))).json()).toMatchObject({
      workspace: { id: own },
      member: { role: 'admin' },
    });

    const other = await stack.createWorkspace();
    const elsewhere = await reach(app, { ...withToken(token), 'x-workspace-id': other.workspaceId });
    expect(elsewhere.statusCode).toBe(403);
    expect(elsewhere.json().detail).toMatch(/not a member/);
  });
});

describe('claims under the names the operator configures (AUTH_CLAIM_*, AUTH_ADMIN_ROLES)', () => {
  let named: OidcTwin;
  let namedApp: App;
  beforeAll(async () => {
    // A provider that namespaces its custom claims, and an operator who says where they are.
    named = await startOidcProvider({
      audience: 'https://api.outreach.test',
      claimNames: {
        org_id: 'https://example.com/org_id',
        org_role: 'https://example.com/org_role',
        org_name: 'https://example.com/org_name',
      },
    });
    namedApp = await appWith({
      ...providerEnv(named),
      AUTH_CLAIM_ORG_ID: 'https://example.com/org_id',
      AUTH_CLAIM_ORG_ROLE: 'https://example.com/org_role',
      AUTH_CLAIM_ORG_NAME: 'https://example.com/org_name',
      AUTH_ADMIN_ROLES: 'owner',
    });
  });
  afterAll(async () => {
    await namedApp?.close();
    await named?.close();
  });

  it('maps the organisation from the configured claim and makes admins only of the configured roles', async () => {
    const org = providerId('org');
    const founder = person(named, { org_id: org, org_name: 'Namespaced Ltd', org_role: 'owner' });
    const created = await signUp(namedApp, await tokenOf(named, founder), 'Namespaced');
    expect(created.statusCode, created.body).toBe(201);
    const workspaceId = created.json().workspace.id as string;
    expect(await externalOrgId(workspaceId)).toBe(org);

    // `org:admin` is an admin role by default, but not here: only `owner` is (AUTH_ADMIN_ROLES).
    const owner = person(named, { org_id: org, org_role: ['billing', 'owner'] });
    const orgAdmin = person(named, { org_id: org, org_role: 'org:admin' });
    for (const [sub, role] of [
      [owner, 'admin'],
      [orgAdmin, 'member'],
    ] as const) {
      const res = await reach(namedApp, withToken(await tokenOf(named, sub)));
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({ workspace: { id: workspaceId }, member: { user_id: sub, role } });
    }
  });
});

describe('tokens the service refuses', () => {
  it('answers 401 with a detail to forged, misdirected, stale and malformed tokens, and 403 to a valid token where its holder is no member, creating nothing', async () => {
    // Workspace B, of the provider's organisation B; workspace A, provisioned by an operator.
    const orgB = providerId('org');
    const ofB = person(twin, { org_id: orgB, org_role: 'org:admin' });
    const tokenB = await tokenOf(twin, ofB);
    expect((await signUp(app, tokenB, 'B')).statusCode).toBe(201);
    const a = await stack.createWorkspace();
    const kid = decodeProtectedHeader(tokenB).kid!;

    // Every bad token names a person of a new organisation: had one passed, POST /signup/ would
    // have made a workspace and a member.
    const now = Math.floor(Date.now() / 1000);
    const claims = (over: JWTPayload = {}): JWTPayload => {
      const sub = providerId('user');
      return {
        sub,
        iss: twin.issuer,
        aud: twin.audience,
        iat: now,
        exp: now + 3600,
        email: `${sub.toLowerCase()}@example.com`,
        email_verified: true,
        org_id: providerId('org'),
        org_role: 'org:admin',
        ...over,
      };
    };
    const stranger = await generateKeyPair('RS256');
    const published = await (await fetch(twin.jwksUrl)).text();
    const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const bad: Record<string, string> = {
      'another issuer': await twin.signWithCurrentKey(claims({ iss: 'https://another-issuer.example' })),
      'another audience': await twin.signWithCurrentKey(claims({ aud: 'https://another-api.example' })),
      'no audience': await twin.signWithCurrentKey(claims({ aud: undefined })),
      expired: await twin.signWithCurrentKey(claims({ iat: now - 7200, exp: now - 60 })),
      'not yet valid': await twin.signWithCurrentKey(claims({ nbf: now + 3600, exp: now + 7200 })),
      'a key id the JWKS does not hold': await new SignJWT(claims())
        .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: randomBytes(8).toString('hex') })
        .sign(stranger.privateKey),
      'another key under the provider’s key id': await new SignJWT(claims())
        .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid })
        .sign(stranger.privateKey),
      // The algorithm-confusion forgery: HMAC keyed with the provider's public JWKS.
      HS256: await new SignJWT(claims())
        .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid })
        .sign(new TextEncoder().encode(published)),
      none: `${b64({ alg: 'none', typ: 'at+jwt' })}.${b64(claims())}.`,
      garbage: 'not-a-token',
      'three garbage parts': 'a.b.c',
    };

    // The control: the same forgery with nothing wrong passes, so each refusal below is for the one thing changed.
    const control = await signUp(app, await twin.signWithCurrentKey(claims()), 'Control');
    expect(control.statusCode, control.body).toBe(201);

    const before = await counts();
    for (const [what, token] of Object.entries(bad)) {
      for (const res of [await signUp(app, token, 'Forged'), await reach(app, withToken(token))]) {
        expect(res.statusCode, `${what}: ${res.body}`).toBe(401);
        expect(res.json(), what).toEqual(unauthorized);
      }
    }

    // Valid tokens, not allowed there. A member of B names workspace A:
    const named = await reach(app, { ...withToken(tokenB), 'x-workspace-id': a.workspaceId });
    expect(named.statusCode).toBe(403);
    expect(named.json().detail).toMatch(/not a member of the workspace/);
    // A provider's org id that happens to be workspace A's id maps to nothing: only development
    // tokens name a workspace as their organisation (orgMayBeWorkspaceId in domain/platform/identity.ts).
    const lookalike = await reach(app, withToken(await tokenOf(twin, person(twin, { org_id: a.workspaceId }))));
    expect(lookalike.statusCode).toBe(403);
    expect(lookalike.json().detail).toMatch(/no workspace here yet/);
    expect(await counts()).toEqual(before);

    // B's token still works: nothing above spoiled the verifier's JWKS.
    expect((await reach(app, withToken(tokenB))).statusCode).toBe(200);
  });

  it('refuses a genuine token to a service configured for another issuer or audience', async () => {
    const sub = person(twin, { org_id: null });
    const token = await tokenOf(twin, sub);
    const before = await counts();
    for (const env of [
      { ...providerEnv(twin), AUTH_JWT_ISSUER: 'https://another-issuer.example' },
      { ...providerEnv(twin), AUTH_JWT_AUDIENCE: 'https://another-api.example' },
    ]) {
      const elsewhere = await appWith(env);
      try {
        const res = await signUp(elsewhere, token, 'Misdirected');
        expect(res.statusCode, res.body).toBe(401);
        expect(res.json()).toEqual(unauthorized);
      } finally {
        await elsewhere.close();
      }
    }
    expect(await counts()).toEqual(before);
  });
});

describe('members the service lets go, and members arriving at once', () => {
  it('a removed member’s next token is refused and does not join again; their API key stops working', async () => {
    const org = providerId('org');
    const admin = person(twin, { org_id: org, org_role: 'org:admin' });
    const adminToken = await tokenOf(twin, admin);
    const workspaceId = (await signUp(app, adminToken, 'Removals')).json().workspace.id as string;
    const leaver = person(twin, { org_id: org, org_role: 'org:member' });
    const joined = await reach(app, withToken(await tokenOf(twin, leaver)));
    expect(joined.statusCode, joined.body).toBe(200);
    const memberId = joined.json().member.id as string;
    // Only admins create keys over HTTP (operationId createApiKey): the store makes the member's own.
    const key = await createApiKey(stack.sql, {
      workspaceId,
      createdBy: memberId,
      name: 'leaver’s key',
      scope: 'write',
      expireAt: null,
    });
    expect((await reach(app, withKey(key.key))).json()).toMatchObject({
      workspace: { id: workspaceId },
      via: 'api_key',
    });

    const removed = await app.inject({
      method: 'DELETE',
      url: `/workspace/members/${memberId}/`,
      headers: withToken(adminToken),
    });
    expect(removed.statusCode, removed.body).toBe(204);

    // They sign in at the provider again: still of the organisation the workspace stands for.
    const again = await twin.accessToken(leaver);
    const refused = await reach(app, withToken(again));
    expect(refused.statusCode).toBe(403);
    expect(refused.json().detail).toMatch(/removed from the workspace/);
    const [members] = await stack.sql`select count(*)::int as n from members where workspace_id = ${workspaceId}`;
    expect(members!.n).toBe(1);
    const byKey = await reach(app, withKey(key.key));
    expect(byKey.statusCode).toBe(401);
    expect(byKey.json()).toEqual(unauthorized);
  });

  it('makes one member of a new colleague’s concurrent first requests', async () => {
    const org = providerId('org');
    const founder = person(twin, { org_id: org, org_role: 'org:admin' });
    const workspaceId = (await signUp(app, await tokenOf(twin, founder), 'Race')).json().workspace.id as string;
    const newcomer = withToken(await tokenOf(twin, person(twin, { org_id: org, org_role: 'org:member' })));
    const answers = await Promise.all(Array.from({ length: 6 }, () => reach(app, newcomer)));
    expect(answers.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(new Set(answers.map((r) => r.json().member.id)).size).toBe(1);
    const [members] = await stack.sql`select count(*)::int as n from members where workspace_id = ${workspaceId}`;
    expect(members!.n).toBe(2);
  });
});

// Last: it retires the key every token fetched above was signed with.
describe('the provider rotating its keys, without a restart', () => {
  it('keeps old tokens working, follows the new key at once, and refuses old tokens once the retired key is gone', async () => {
    const sub = person(twin, { org_id: null });
    const before = await twin.accessToken(sub);
    expect((await signUp(app, before, 'Rotation')).statusCode).toBe(201);

    const { kid } = await twin.rotateKeys();
    const after = await twin.accessToken(sub);
    expect(decodeProtectedHeader(after).kid).toBe(kid);
    // The verifier may have fetched the JWKS moments ago (the tests above); past the cooldown, a
    // token naming a key it has not seen makes it fetch the JWKS again.
    await sleep(jwksCooldownMs + 50);
    expect((await reach(app, withToken(after))).statusCode).toBe(200);
    expect((await reach(app, withToken(before))).statusCode).toBe(200);

    await twin.retireOldKeys();
    // The verifier keeps the JWKS it holds (up to tokens.ts's cacheMaxAge) until a token names a
    // key it does not know: until then the retired key still verifies.
    expect((await reach(app, withToken(before))).statusCode).toBe(200);
    await sleep(jwksCooldownMs + 50);
    const unknownKid = await twin.signWithCurrentKey(
      { sub, iss: twin.issuer, aud: twin.audience, exp: Math.floor(Date.now() / 1000) + 60 },
      { kid: 'not-published' },
    );
    expect((await reach(app, withToken(unknownKid))).statusCode).toBe(401);

    const refused = await reach(app, withToken(before));
    expect(refused.statusCode).toBe(401);
    expect(refused.json()).toEqual(unauthorized);
    expect((await reach(app, withToken(after))).statusCode).toBe(200);
  });
});

describe('an identity provider that cannot be reached', () => {
  it('answers 503 saying so, not 401: the caller should retry, not sign in again', async () => {
    const port = await freePort(9470);
    const verify = createTokenVerifier({ kind: 'jwks', url: `http://127.0.0.1:${port}/jwks` });
    const error = await verify(await tokenOf(twin, person(twin, {}))).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ status: 503, detail: expect.stringMatching(/AUTH_JWKS_URL/) });
  });
});
