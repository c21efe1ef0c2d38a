/**
 * Signing up and joining through bearer tokens (docs/teams.md): a new person signs up a workspace
 * with a referral code, people of its organisation join on first use with the role their claim
 * maps to, an unknown organisation is provisioned only when the policy says so, a person of several
 * workspaces names one, and concurrent first requests make one workspace and one member each.
 */
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/app.js';
import { createTokenVerifier } from '../../services/platform/tokens.js';
import { resolveTokenConfig } from '../../worker/auth-config.js';
import type { DevelopmentClaims } from '../../services/platform/tokens.js';
import { useTestStack, withKey, withToken } from '../support/test-stack.js';

const { stack } = useTestStack({ workspaces: false });

type App = Awaited<ReturnType<typeof buildApp>>;
const person = (over: Partial<DevelopmentClaims> = {}): DevelopmentClaims => {
  const id = randomUUID().slice(0, 8);
  return { sub: `user_${id}`, email: `p-${id}@example.com`, email_verified: true, name: `Person ${id}`, ...over };
};
const asPerson = async (claims: DevelopmentClaims, extra: Record<string, string> = {}) => ({
  ...withToken(await stack.mintToken(claims)),
  ...extra,
});
const signUp = async (app: App, headers: Record<string, string>, payload: object) =>
  app.inject({ method: 'POST', url: '/signup/', headers, payload });
const caller = (app: App, headers: Record<string, string>) =>
  app.inject({ method: 'GET', url: '/workspace/', headers });

describe('signing up', () => {
  it('makes a workspace with the person its admin, attributed to the referrer, reached by their token', async () => {
    const referrer = await stack.createWorkspace();
    const { referral_code } = (
      await stack.sql<{ referral_code: string }[]>`
        select referral_code from billing_accounts where workspace_id = ${referrer.workspaceId}`
    )[0]!;
    const ada = person();
    const headers = await asPerson(ada);
    const res = await signUp(stack.app, headers, { name: 'Ada’s team', referral_code });
    expect(res.statusCode, res.body).toBe(201);
    const { workspace, member } = res.json();
    expect(workspace).toMatchObject({ name: 'Ada’s team', plan: 'free' });
    expect(member).toMatchObject({ user_id: ada.sub, email: ada.email, role: 'admin', display_name: ada.name });
    const [account] = await stack.sql`select referred_by from billing_accounts where workspace_id = ${workspace.id}`;
    expect(account!.referred_by).toBe(referrer.workspaceId);
    const [audit] =
      await stack.sql`select action, joined_via, role_after from member_audit where workspace_id = ${workspace.id}`;
    expect(audit).toMatchObject({ action: 'joined', joined_via: 'sign_up', role_after: 'admin' });
    const [event] = await stack.sql`select type, payload from workspace_events where workspace_id = ${workspace.id}`;
    expect(event).toMatchObject({ type: 'member.joined', payload: { via: 'sign_up', role: 'admin' } });

    // No organisation claim: the token reaches the person's only workspace.
    const reached = await caller(stack.app, headers);
    expect(reached.statusCode, reached.body).toBe(200);
    expect(reached.json()).toMatchObject({ workspace: { id: workspace.id }, member: { role: 'admin' }, via: 'bearer' });
    // A second sign-up of their own is refused, and nothing is made.
    const again = await signUp(stack.app, headers, { name: 'Twin' });
    expect(again.statusCode).toBe(409);
    expect(again.json().detail).toMatch(/already signed up/);
  });

  it('refuses an unknown referral code, an API key, a token with no email and bad names, creating nothing', async () => {
    const headers = await asPerson(person());
    const before = (await stack.sql`select count(*)::int as n from workspaces`)[0]!.n as number;
    const unknown = await signUp(stack.app, headers, { name: 'X', referral_code: 'no-such-code' });
    expect(unknown.statusCode).toBe(422);
    expect(unknown.json().issues[0]).toMatchObject({
      loc: ['body', 'referral_code'],
      msg: expect.stringMatching(/referral code/),
    });
    const click = await signUp(stack.app, headers, { name: 'X', affiliate_click_id: randomUUID() });
    expect(click.statusCode, click.body).toBe(422);
    expect(click.json().issues[0].loc).toEqual(['body', 'affiliate_click_id']);
    const key = await stack.createWorkspace();
    const byKey = await signUp(stack.app, withKey(key.apiKey), { name: 'X' });
    expect(byKey.statusCode).toBe(403);
    expect(byKey.json().detail).toMatch(/bearer token/);
    const noEmail = await signUp(stack.app, await asPerson({ sub: `user_${randomUUID()}` }), { name: 'X' });
    expect(noEmail.statusCode).toBe(403);
    expect(noEmail.json().detail).toMatch(/email claim/);
    for (const name of ['', 'x'.repeat(256), 'a\u0000b']) {
      const bad = await signUp(stack.app, headers, { name });
      expect(bad.statusCode, bad.body).toBe(422);
      expect(bad.json().issues[0].loc).toEqual(['body', 'name']);
    }
    expect((await signUp(stack.app, await asPerson({ sub: 'x' }), {})).statusCode).toBe(422);
    expect((await stack.sql`select count(*)::int as n from workspaces`)[0]!.n).toBe(before + 1);
    // The longest name fits.
    expect((await signUp(stack.app, headers, { name: 'n'.repeat(255) })).statusCode).toBe(201);
  });

  it('signs up an organisation once; its people join on first use with the role their claim maps to', async () => {
    const org = `org_${randomUUID().slice(0, 12)}`;
    const founder = person({ org_id: org, org_role: 'org:member' });
    const res = await signUp(stack.app, await asPerson(founder), { name: 'Acme' });
    expect(res.statusCode, res.body).toBe(201);
    const workspaceId = res.json().workspace.id as string;
    // The founder is the admin whatever their organisation role says.
    expect(res.json().member.role).toBe('admin');
    const second = await signUp(stack.app, await asPerson(person({ org_id: org })), { name: 'Acme again' });
    expect(second.statusCode).toBe(409);
    expect(second.json().detail).toMatch(/organisation/);

    const colleague = await caller(stack.app, await asPerson(person({ org_id: org, org_role: 'org:member' })));
    expect(colleague.statusCode, colleague.body).toBe(200);
    expect(colleague.json()).toMatchObject({ workspace: { id: workspaceId }, member: { role: 'member' } });
    const boss = await caller(stack.app, await asPerson(person({ org_id: org, org_role: 'org:admin' })));
    expect(boss.json()).toMatchObject({ member: { role: 'admin' } });
    const joined = await stack.sql`
      select joined_via from member_audit where workspace_id = ${workspaceId} and action = 'joined' order by id`;
    expect(joined.map((r) => r.joined_via)).toEqual(['sign_up', 'first_use', 'first_use']);
  });

  it('answers an unknown organisation with the way to sign up, and creates nothing', async () => {
    const res = await caller(stack.app, await asPerson(person({ org_id: `org_${randomUUID()}` })));
    expect(res.statusCode).toBe(403);
    expect(res.json().detail).toMatch(/POST \/signup\//);
  });

  it('asks a member of several workspaces to name one in X-Workspace-Id, and keeps others out', async () => {
    const p = person();
    const own = (await signUp(stack.app, await asPerson(p), { name: 'Own' })).json().workspace.id as string;
    const org = `org_${randomUUID().slice(0, 12)}`;
    const other = (await signUp(stack.app, await asPerson(person({ org_id: org })), { name: 'Other' })).json().workspace
      .id as string;
    // The person joins the other organisation's workspace with a token of that organisation.
    expect((await caller(stack.app, await asPerson({ ...p, org_id: org }))).statusCode).toBe(200);
    const unnamed = await caller(stack.app, await asPerson(p));
    expect(unnamed.statusCode).toBe(400);
    expect(unnamed.json().detail).toMatch(/X-Workspace-Id/);
    for (const id of [own, other]) {
      const named = await caller(stack.app, await asPerson(p, { 'x-workspace-id': id }));
      expect(named.json().workspace.id).toBe(id);
    }
    const stranger = await stack.createWorkspace();
    const elsewhere = await caller(stack.app, await asPerson(p, { 'x-workspace-id': stranger.workspaceId }));
    expect(elsewhere.statusCode).toBe(403);
    expect((await caller(stack.app, await asPerson(p, { 'x-workspace-id': 'not-a-uuid' }))).statusCode).toBe(403);
  });

  it('makes one workspace of concurrent sign-ups and one member of concurrent first requests', async () => {
    const p = person();
    const headers = await asPerson(p);
    const codes = (
      await Promise.all(Array.from({ length: 6 }, () => signUp(stack.app, headers, { name: 'Race' })))
    ).map((r) => r.statusCode);
    expect(codes.sort()).toEqual([201, 409, 409, 409, 409, 409]);
    const org = `org_${randomUUID().slice(0, 12)}`;
    const workspaceId = (await signUp(stack.app, await asPerson(person({ org_id: org })), { name: 'Org' })).json()
      .workspace.id as string;
    const newcomer = await asPerson(person({ org_id: org }));
    const answers = await Promise.all(Array.from({ length: 6 }, () => caller(stack.app, newcomer)));
    expect(answers.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(new Set(answers.map((r) => r.json().member.id)).size).toBe(1);
    const [count] = await stack.sql`select count(*)::int as n from members where workspace_id = ${workspaceId}`;
    expect(count!.n).toBe(2);
  });
});

describe('provisioning on first use (AUTH_PROVISION_ON_FIRST_USE)', () => {
  let app: App;
  beforeAll(async () => {
    const config = await resolveTokenConfig(stack.sql, { provisionOnFirstUse: true });
    app = await buildApp({
      sql: stack.sql,
      temporal: { client: stack.client, taskQueue: stack.taskQueue },
      verifyToken: createTokenVerifier(config),
      rateLimit: { limit: 0, windowSeconds: 60 },
      logger: pino({ level: 'error' }),
      integrations: stack.integrations,
    });
    await app.ready();
  });
  afterAll(() => app?.close());

  it('creates one workspace for concurrent first tokens of a new organisation, its first person the admin', async () => {
    const org = `org_${randomUUID().slice(0, 12)}`;
    const people = Array.from({ length: 5 }, () => person({ org_id: org, org_name: 'Provisioned Ltd' }));
    const answers = await Promise.all(people.map(async (p) => caller(app, await asPerson(p))));
    expect(answers.map((r) => r.statusCode)).toEqual([200, 200, 200, 200, 200]);
    const workspaces = new Set(answers.map((r) => r.json().workspace.id));
    expect(workspaces.size).toBe(1);
    const [workspace] = await stack.sql`select name from workspaces where external_org_id = ${org}`;
    expect(workspace!.name).toBe('Provisioned Ltd');
    const roles = answers.map((r) => r.json().member.role as string).sort();
    expect(roles).toEqual(['admin', 'member', 'member', 'member', 'member']);
  });
});
