import { describe, expect, it } from 'vitest';
import { runAdmin } from '../support/admin.js';
import { useTestStack, withKey, withToken } from '../support/test-stack.js';

const { stack } = useTestStack({ workspaces: false });

// Without AUTH_JWT_SECRET: the command line reads the service's signing secret from the database.
const admin = (...args: string[]) => runAdmin(args, { DATABASE_URL: stack.databaseUrl, AUTH_JWT_SECRET: undefined });

// Each test starts the command line two to four times as separate processes; on a loaded two-core
// machine one start has taken 16 s, so a test gets more than the suite's 60 s.
describe('the admin command line', { timeout: 180_000 }, () => {
  it('creates a workspace whose key and 24-hour token work against the service', async () => {
    const out = await admin('create-workspace', '--name', 'Acme', '--plan', 'free', '--email', 'ops@acme.test');
    expect(out.code).toBe(0);
    const lines = out.stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    const created = JSON.parse(lines[0]!);
    expect(Object.keys(created).sort()).toEqual(['access_token', 'api_key', 'user_id', 'workspace_id']);

    const viaKey = await stack.app.inject({ method: 'GET', url: '/workspace/', headers: withKey(created.api_key) });
    expect(viaKey.json()).toMatchObject({
      workspace: { id: created.workspace_id, name: 'Acme', plan: 'free' },
      scope: 'read',
    });
    const viaToken = await stack.app.inject({
      method: 'GET',
      url: '/workspace/',
      headers: withToken(created.access_token),
    });
    expect(viaToken.json()).toMatchObject({
      member: { user_id: created.user_id, email: 'ops@acme.test', role: 'admin' },
      via: 'bearer',
    });
    const payload = JSON.parse(Buffer.from(created.access_token.split('.')[1], 'base64url').toString());
    expect(payload.exp - payload.iat).toBe(24 * 3600);
  });

  it('maps an existing workspace to a provider organisation, and its admin to their provider user id', async () => {
    const made = JSON.parse(
      (await admin('create-workspace', '--name', 'Before SSO', '--plan', 'free', '--email', 'boss@sso.test')).stdout,
    );
    const org = `org_later_${Date.now()}`;
    const mapped = await admin('map-org', '--workspace', made.workspace_id, '--org', org);
    expect(mapped.code, mapped.stderr).toBe(0);
    expect(JSON.parse(mapped.stdout)).toEqual({ workspace_id: made.workspace_id, org_id: org, previous_org_id: null });

    // Before the re-key, the admin's provider identity is a stranger holding a member's email.
    const providerToken = await stack.mintToken({ sub: 'idp_boss', org_id: org, email: 'boss@sso.test' });
    const stranger = await stack.app.inject({ method: 'GET', url: '/workspace/', headers: withToken(providerToken) });
    expect(stranger.statusCode).toBe(409);
    const rekeyed = await admin(
      'set-member-user',
      '--workspace',
      made.workspace_id,
      '--email',
      'BOSS@sso.test',
      '--user',
      'idp_boss',
    );
    expect(rekeyed.code, rekeyed.stderr).toBe(0);
    expect(JSON.parse(rekeyed.stdout)).toMatchObject({ user_id: 'idp_boss', previous_user_id: made.user_id });
    const boss = await stack.app.inject({ method: 'GET', url: '/workspace/', headers: withToken(providerToken) });
    expect(boss.json()).toMatchObject({
      workspace: { id: made.workspace_id },
      member: { role: 'admin', email: 'boss@sso.test' },
    });
    // A colleague of the organisation joins on first use.
    const colleague = await stack.mintToken({ sub: 'idp_rep', org_id: org, email: 'rep@sso.test' });
    const joined = await stack.app.inject({ method: 'GET', url: '/workspace/', headers: withToken(colleague) });
    expect(joined.json()).toMatchObject({ workspace: { id: made.workspace_id }, member: { role: 'member' } });

    // Another organisation needs --replace; an organisation mapped elsewhere and an unknown email are refused.
    const other = await admin('map-org', '--workspace', made.workspace_id, '--org', `${org}_b`);
    expect([other.code, other.stderr]).toEqual([1, expect.stringMatching(/--replace true/)]);
    const second = JSON.parse((await admin('create-workspace', '--name', 'Second', '--plan', 'free')).stdout);
    const taken = await admin('map-org', '--workspace', second.workspace_id, '--org', org);
    expect([taken.code, taken.stderr]).toEqual([
      1,
      expect.stringContaining(`mapped to workspace ${made.workspace_id}`),
    ]);
    const nobody = await admin(
      'set-member-user',
      '--workspace',
      made.workspace_id,
      '--email',
      'no@sso.test',
      '--user',
      'x',
    );
    expect([nobody.code, nobody.stderr]).toEqual([1, expect.stringMatching(/No member/)]);
    const replaced = await admin('map-org', '--workspace', made.workspace_id, '--org', `${org}_b`, '--replace', 'true');
    expect(JSON.parse(replaced.stdout)).toMatchObject({ org_id: `${org}_b`, previous_org_id: org });
    const gone = await stack.mintToken({ sub: 'idp_new', org_id: org, email: 'new@sso.test' });
    expect((await stack.app.inject({ method: 'GET', url: '/workspace/', headers: withToken(gone) })).statusCode).toBe(
      403,
    );
  });

  it('maps an identity-provider organisation and admin to a new workspace, once', async () => {
    const org = `org_cli_${Date.now()}`;
    const out = await admin(
      'create-workspace',
      '--name',
      'Mapped',
      '--plan',
      'free',
      '--org',
      org,
      '--user',
      'user_ops',
    );
    expect(out.code, out.stderr).toBe(0);
    const created = JSON.parse(out.stdout);
    expect(created.user_id).toBe('user_ops');
    // A person of that organisation joins on first use.
    const token = await stack.mintToken({ sub: 'user_rep', org_id: org, email: 'rep@mapped.test' });
    const joined = await stack.app.inject({ method: 'GET', url: '/workspace/', headers: withToken(token) });
    expect(joined.json()).toMatchObject({ workspace: { id: created.workspace_id }, member: { role: 'member' } });
    const again = await admin('create-workspace', '--name', 'Twin', '--plan', 'free', '--org', org);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toMatch(/already has a workspace/);
  });

  it('adds a member and grants credits, printing the new balance', async () => {
    const created = JSON.parse((await admin('create-workspace', '--name', 'Beta', '--plan', 'paid')).stdout);
    expect(
      (await stack.app.inject({ method: 'GET', url: '/workspace/', headers: withKey(created.api_key) })).json().scope,
    ).toBe('write');
    const member = await admin(
      'add-member',
      '--workspace',
      created.workspace_id,
      '--email',
      'rep@beta.test',
      '--role',
      'member',
    );
    expect(member.code).toBe(0);
    const added = JSON.parse(member.stdout);
    expect(Object.keys(added).sort()).toEqual(['access_token', 'user_id']);
    const asMember = await stack.app.inject({
      method: 'GET',
      url: '/workspace/',
      headers: withToken(added.access_token),
    });
    expect(asMember.json().member).toMatchObject({ role: 'member', email: 'rep@beta.test' });

    expect((await admin('grant-credits', '--workspace', created.workspace_id, '--amount', '250')).stdout.trim()).toBe(
      '250',
    );
    expect((await admin('grant-credits', '--workspace', created.workspace_id, '--amount', '50')).stdout.trim()).toBe(
      '300',
    );
    const balance = await stack.app.inject({ method: 'GET', url: '/credits/', headers: withKey(created.api_key) });
    expect(balance.json()).toEqual({ available: 300, held: 0, spent: 0 });
  });

  it('pauses unattended sending everywhere and resumes it', async () => {
    const on = await admin('pause-everywhere', '--paused', 'true');
    expect(JSON.parse(on.stdout)).toEqual({ paused_everywhere: true });
    const ws = await stack.createWorkspace('paid');
    const read = async () =>
      (await stack.app.inject({ method: 'GET', url: '/pnet/agent-sending/', headers: withKey(ws.apiKey) })).json();
    expect((await read()).paused_everywhere).toBe(true);
    expect(JSON.parse((await admin('pause-everywhere', '--paused', 'false')).stdout)).toEqual({
      paused_everywhere: false,
    });
    expect((await read()).paused_everywhere).toBe(false);
    expect((await admin('pause-everywhere', '--paused', 'maybe')).code).toBe(2);
  });

  it('refuses bad input with a message and a non-zero exit, writing nothing', async () => {
    const before = (await stack.sql`select count(*)::int as n from workspaces`)[0]!.n;
    const badPlan = await admin('create-workspace', '--name', 'X', '--plan', 'gold');
    expect(badPlan.code).toBe(2);
    expect(badPlan.stderr).toMatch(/--plan/);
    const unknown = await admin(
      'grant-credits',
      '--workspace',
      '00000000-0000-4000-8000-000000000000',
      '--amount',
      '5',
    );
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/not found/);
    expect(
      (await admin('grant-credits', '--workspace', '00000000-0000-4000-8000-000000000000', '--amount', '0')).code,
    ).toBe(2);
    expect((await stack.sql`select count(*)::int as n from workspaces`)[0]!.n).toBe(before);
  });
});
