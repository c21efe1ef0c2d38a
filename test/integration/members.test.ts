/**
 * Admins managing members: role changes both ways, removal and what it stops at once (bearer
 * tokens, API keys, connected AI apps), the last admin kept (also under concurrent requests),
 * who may do it, bad input, the events recorded and the audit list.
 */
import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { useTestStack, withKey, withToken, type TestWorkspace } from '../support/test-stack.js';

const { stack } = useTestStack({ workspaces: false });

type Headers = Record<string, string>;
const call = (method: 'GET' | 'PATCH' | 'DELETE' | 'POST', url: string, headers: Headers, payload?: object) =>
  stack.app.inject({ method, url, headers, ...(payload ? { payload } : {}) });
const setRole = (headers: Headers, memberId: string, role: string) =>
  call('PATCH', `/workspace/members/${memberId}/`, headers, { role });
const remove = (headers: Headers, memberId: string) => call('DELETE', `/workspace/members/${memberId}/`, headers);

/** The member id of an identity-provider user of the workspace. */
async function memberIdOf(ws: TestWorkspace, userId: string): Promise<string> {
  const { members } = (await call('GET', '/workspace/members/', withKey(ws.apiKey))).json<{
    members: { id: string; user_id: string }[];
  }>();
  return members.find((m) => m.user_id === userId)!.id;
}

/** A member added as an operator adds one: ids and a bearer token. */
async function addMember(ws: TestWorkspace, role: 'admin' | 'member') {
  const added = await stack.addMember(ws.workspaceId, role);
  return { ...added, id: await memberIdOf(ws, added.userId), headers: withToken(added.accessToken) };
}

const eventsOf = (workspaceId: string) =>
  stack.sql<{ type: string; payload: Record<string, unknown> }[]>`
    select type, payload from workspace_events where workspace_id = ${workspaceId} and type like 'member.%' order by seq`;

const adminsOf = async (workspaceId: string) =>
  (await stack.sql<{ id: string }[]>`select id from members where workspace_id = ${workspaceId} and role = 'admin'`)
    .length;

describe('changing a member’s role', () => {
  it('promotes and demotes, records each change as an event and in the audit, and ignores the same role', async () => {
    const ws = await stack.createWorkspace();
    const adminId = await memberIdOf(ws, ws.userId);
    const admin = withKey(ws.apiKey);
    const m = await addMember(ws, 'member');
    expect((await call('GET', '/workspace/audit/', m.headers)).statusCode).toBe(403);

    const promoted = await setRole(admin, m.id, 'admin');
    expect(promoted.statusCode, promoted.body).toBe(200);
    expect(promoted.json()).toMatchObject({ id: m.id, user_id: m.userId, role: 'admin' });
    // The next request of the promoted member is an admin's.
    expect((await call('GET', '/workspace/audit/', m.headers)).statusCode).toBe(200);

    const demoted = await setRole(admin, m.id, 'member');
    expect(demoted.json()).toMatchObject({ id: m.id, role: 'member' });
    expect((await call('GET', '/workspace/audit/', m.headers)).statusCode).toBe(403);
    // The role it already has: 200, nothing recorded.
    const same = await setRole(admin, m.id, 'member');
    expect(same.statusCode).toBe(200);
    expect(same.json()).toMatchObject({ role: 'member' });

    expect(await eventsOf(ws.workspaceId)).toEqual([
      {
        type: 'member.role_changed',
        payload: {
          member_id: m.id,
          user_id: m.userId,
          role_before: 'member',
          role_after: 'admin',
          changed_by_member_id: adminId,
        },
      },
      {
        type: 'member.role_changed',
        payload: {
          member_id: m.id,
          user_id: m.userId,
          role_before: 'admin',
          role_after: 'member',
          changed_by_member_id: adminId,
        },
      },
    ]);

    const audit = await call('GET', '/workspace/audit/', admin);
    expect(audit.statusCode).toBe(200);
    expect(audit.json()).toMatchObject({
      entries: [
        {
          action: 'role_changed',
          actor_member_id: adminId,
          target_member_id: m.id,
          target_user_id: m.userId,
          role_before: 'admin',
          role_after: 'member',
          created_at: expect.any(String),
        },
        { action: 'role_changed', actor_member_id: adminId, role_before: 'member', role_after: 'admin' },
      ],
      next_offset: null,
    });
    // Pages: limit and offset, newest first.
    const first = (await call('GET', '/workspace/audit/?limit=1', admin)).json();
    expect(first).toMatchObject({ entries: [{ role_after: 'member' }], next_offset: 1 });
    const second = (await call('GET', '/workspace/audit/?limit=1&offset=1', admin)).json();
    expect(second).toMatchObject({ entries: [{ role_after: 'admin' }], next_offset: null });
  });

  it('lets an admin step down while another admin remains', async () => {
    const ws = await stack.createWorkspace();
    const other = await addMember(ws, 'admin');
    const selfId = await memberIdOf(ws, ws.userId);
    const res = await setRole(withToken(ws.accessToken), selfId, 'member');
    expect(res.statusCode, res.body).toBe(200);
    expect((await call('GET', '/workspace/audit/', withToken(ws.accessToken))).statusCode).toBe(403);
    expect((await call('GET', '/workspace/audit/', other.headers)).json().entries).toHaveLength(1);
  });
});

describe('the last admin', () => {
  it('can be neither demoted nor removed (409 saying why), and nothing is recorded', async () => {
    const ws = await stack.createWorkspace();
    const adminId = await memberIdOf(ws, ws.userId);
    for (const res of [
      await setRole(withKey(ws.apiKey), adminId, 'member'),
      await remove(withKey(ws.apiKey), adminId),
    ]) {
      expect(res.statusCode).toBe(409);
      expect(res.json()).toEqual({ detail: expect.stringMatching(/last admin .*make another member an admin first/) });
    }
    expect(await adminsOf(ws.workspaceId)).toBe(1);
    expect(await eventsOf(ws.workspaceId)).toEqual([]);
    expect((await call('GET', '/workspace/audit/', withKey(ws.apiKey))).json()).toEqual({
      entries: [],
      next_offset: null,
    });
  });

  it('survives concurrent demotions and removals of the last two admins', async () => {
    for (let round = 0; round < 4; round++) {
      const ws = await stack.createWorkspace();
      const a1 = { id: await memberIdOf(ws, ws.userId), headers: withToken(ws.accessToken) };
      const a2 = await addMember(ws, 'admin');
      // Even rounds: each demotes the other. Odd rounds: each removes the other.
      const results = await Promise.all(
        round % 2 === 0
          ? [setRole(a1.headers, a2.id, 'member'), setRole(a2.headers, a1.id, 'member')]
          : [remove(a1.headers, a2.id), remove(a2.headers, a1.id)],
      );
      const statuses = results.map((r) => r.statusCode).sort();
      // One wins; the other finds, under the lock, that its actor is no longer an admin (403) or its
      // target is the last admin (409).
      expect(
        statuses.filter((s) => s === 200 || s === 204),
        JSON.stringify(statuses),
      ).toHaveLength(1);
      expect(
        statuses.filter((s) => s === 403 || s === 409),
        JSON.stringify(statuses),
      ).toHaveLength(1);
      expect(await adminsOf(ws.workspaceId)).toBe(1);
      expect(await eventsOf(ws.workspaceId)).toHaveLength(1);
    }
    // One admin demoting themselves and the other admin at once: one admin left as well.
    const ws = await stack.createWorkspace();
    const selfId = await memberIdOf(ws, ws.userId);
    const other = await addMember(ws, 'admin');
    const results = await Promise.all([
      setRole(withToken(ws.accessToken), selfId, 'member'),
      setRole(withToken(ws.accessToken), other.id, 'member'),
    ]);
    expect(results.filter((r) => r.statusCode === 200)).toHaveLength(1);
    expect(await adminsOf(ws.workspaceId)).toBe(1);
  });
});

describe('removing a member', () => {
  it('stops their bearer token, API keys and connected app at the next request, and keeps the removal', async () => {
    const ws = await stack.createWorkspace();
    const adminId = await memberIdOf(ws, ws.userId);
    const leaver = await addMember(ws, 'admin');
    const created = await call('POST', '/api-keys/', leaver.headers, { name: 'leaver key' });
    expect(created.statusCode, created.body).toBe(201);
    const leaverKey = created.json<{ id: string; key: string }>();
    expect((await call('GET', '/workspace/', withKey(leaverKey.key))).json().member.id).toBe(leaver.id);
    const mcpToken = await connectApp(ws, leaver.accessToken);
    expect((await mcp(mcpToken)).statusCode).toBe(200);

    const removed = await remove(withKey(ws.apiKey), leaver.id);
    expect(removed.statusCode, removed.body).toBe(204);
    expect(removed.body).toBe('');

    const bearer = await call('GET', '/workspace/', leaver.headers);
    expect(bearer.statusCode).toBe(403);
    expect(bearer.json()).toEqual({ detail: expect.stringMatching(/was removed from the workspace/) });
    const key = await call('GET', '/workspace/', withKey(leaverKey.key));
    expect(key.statusCode).toBe(401);
    expect((await mcp(mcpToken)).statusCode).toBe(401);
    // The remaining admin's own credentials go on working.
    expect((await call('GET', '/workspace/', withKey(ws.apiKey))).statusCode).toBe(200);

    expect((await call('GET', `/workspace/members/${leaver.id}/`, withKey(ws.apiKey))).statusCode).toBe(404);
    expect((await remove(withKey(ws.apiKey), leaver.id)).statusCode).toBe(404);
    const [keyRow] = await stack.sql<
      { deleted_at: Date | null }[]
    >`select deleted_at from api_keys where id = ${leaverKey.id}`;
    expect(keyRow!.deleted_at).not.toBeNull();
    // The record a future self-join path must respect: one per (workspace, identity-provider user).
    expect(
      await stack.sql`select member_id, removed_by from member_removals where workspace_id = ${ws.workspaceId} and idp_user_id = ${leaver.userId}`,
    ).toEqual([{ member_id: leaver.id, removed_by: adminId }]);

    expect(await eventsOf(ws.workspaceId)).toEqual([
      {
        type: 'member.removed',
        payload: {
          member_id: leaver.id,
          user_id: leaver.userId,
          email: expect.any(String),
          role_before: 'admin',
          removed_by_member_id: adminId,
          revoked_api_keys: 1,
        },
      },
    ]);
    expect((await call('GET', '/workspace/audit/', withKey(ws.apiKey))).json().entries).toEqual([
      {
        id: expect.any(Number),
        action: 'removed',
        actor_member_id: adminId,
        target_member_id: leaver.id,
        target_user_id: leaver.userId,
        target_email: expect.any(String),
        role_before: 'admin',
        role_after: null,
        joined_via: null,
        created_at: expect.any(String),
      },
    ]);
  });
});

describe('who may manage members, and what is refused', () => {
  it('answers 403 to a member on role changes, removals and the audit', async () => {
    const ws = await stack.createWorkspace();
    const adminId = await memberIdOf(ws, ws.userId);
    const m = await addMember(ws, 'member');
    const other = await addMember(ws, 'member');
    for (const res of [
      await setRole(m.headers, other.id, 'admin'),
      await setRole(m.headers, m.id, 'admin'),
      await remove(m.headers, adminId),
      await call('GET', '/workspace/audit/', m.headers),
    ]) {
      expect(res.statusCode).toBe(403);
      expect(res.json()).toEqual({ detail: 'Only a workspace admin may do this.' });
    }
    expect(await eventsOf(ws.workspaceId)).toEqual([]);
  });

  it('answers 422 with issues for bad input and 404 for an unknown member', async () => {
    const ws = await stack.createWorkspace();
    const admin = withKey(ws.apiKey);
    const m = await addMember(ws, 'member');
    for (const res of [
      await setRole(admin, m.id, 'owner'),
      await call('PATCH', `/workspace/members/${m.id}/`, admin, {}),
      await setRole(admin, 'not-a-uuid', 'admin'),
      await remove(admin, 'not-a-uuid'),
      await call('GET', '/workspace/audit/?limit=0', admin),
      await call('GET', '/workspace/audit/?offset=-1', admin),
    ]) {
      expect(res.statusCode, res.body).toBe(422);
      expect(res.json()).toMatchObject({
        detail: expect.any(String),
        issues: [expect.objectContaining({ loc: expect.any(Array) })],
      });
    }
    const unknown = crypto.randomUUID();
    for (const res of [await setRole(admin, unknown, 'admin'), await remove(admin, unknown)]) {
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ detail: 'Member not found.' });
    }
    expect((await call('GET', `/workspace/members/${m.id}/`, admin)).json().role).toBe('member');
  });
});

/** A connected AI app approved by the person behind `token`: its access token, from the real OAuth flow. */
async function connectApp(ws: TestWorkspace, token: string): Promise<string> {
  const redirect = 'https://app.example/callback';
  const client = (
    await stack.app.inject({
      method: 'POST',
      url: '/oauth/register',
      payload: { client_name: 'Leaver app', redirect_uris: [redirect] },
    })
  ).json<{ client_id: string }>();
  const { resource } = (
    await stack.app.inject({ method: 'GET', url: '/.well-known/oauth-protected-resource/mcp' })
  ).json<{ resource: string }>();
  const verifier = randomBytes(32).toString('base64url');
  const authorize = await stack.app.inject({
    method: 'GET',
    url: `/oauth/authorize?${new URLSearchParams({
      response_type: 'code',
      client_id: client.client_id,
      redirect_uri: redirect,
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
      resource,
    })}`,
  });
  const consentId = String(authorize.headers.location).split('/').pop()!;
  const approved = await call('POST', `/connected-apps/consent-requests/${consentId}/approve/`, withToken(token), {
    workspace_id: ws.workspaceId,
    access: 'read',
  });
  expect(approved.statusCode, approved.body).toBe(200);
  const code = new URL(approved.json<{ redirect_url: string }>().redirect_url).searchParams.get('code')!;
  const issued = await stack.app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      client_id: client.client_id,
      redirect_uri: redirect,
      code_verifier: verifier,
      resource,
    }).toString(),
  });
  expect(issued.statusCode, issued.body).toBe(200);
  return issued.json<{ access_token: string }>().access_token;
}

const mcp = (accessToken: string) =>
  stack.app.inject({
    method: 'POST',
    url: '/mcp',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${accessToken}`,
    },
    payload: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
  });
