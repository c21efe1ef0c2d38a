/**
 * Admins inviting teammates by email (operationIds inviteMember, listInvitations,
 * revokeInvitation, acceptInvitation) against the real SMTP sink: the email and its token, the
 * invited person accepting with a token of the identity provider, every refusal (used, expired,
 * revoked, another or unverified address, a member's credential, an API key), replacement,
 * concurrent acceptances, a removed member coming back, a failing or missing mail server, and the
 * bounds of the request.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smtpMailer, type Mailer, type OutboundEmail } from '../../integrations/mailer.js';
import { startSmtpSink, type SmtpSink } from '../../sim/smtp-sink.js';
import { useTestStack, withKey, withToken, type TestWorkspace } from '../support/test-stack.js';

const { stack } = useTestStack({ workspaces: false });

let sink: SmtpSink;
/**
 * What the service handed the mail server, by Message-ID: the sink records a message's headers
 * only, so the text (its role, token and link) is read here and the sink says the server took it.
 */
const sent = new Map<string, OutboundEmail>();
let mailer: Mailer;
const acceptPage = 'https://app.outreach.example/join';

beforeAll(async () => {
  sink = await startSmtpSink();
  const smtp = smtpMailer(sink.url, { from: 'team@outreach.example' });
  mailer = {
    defaultFrom: smtp.defaultFrom,
    domain: smtp.domain,
    async send(mail) {
      const answer = await smtp.send(mail);
      sent.set(mail.messageId, mail);
      return answer;
    },
  };
  stack.integrations.mailer = mailer;
  stack.integrations.invitationAcceptUrl = acceptPage;
});
afterAll(() => sink?.close());

type Headers = Record<string, string>;
const call = (method: 'GET' | 'POST' | 'DELETE', url: string, headers: Headers, payload?: object) =>
  stack.app.inject({ method, url, headers, ...(payload ? { payload } : {}) });

const newEmail = (who = 'invitee') => `${who}-${randomUUID().slice(0, 8)}@example.com`;

/** A dev token of the identity provider for a person with no organisation. */
async function personToken(email: string, options: { verified?: boolean; sub?: string } = {}) {
  const sub = options.sub ?? `person-${randomUUID()}`;
  const token = await stack.mintToken({ sub, email, email_verified: options.verified ?? true, name: 'Pat Invitee' });
  return { sub, headers: withToken(token) };
}

interface Invited {
  id: string;
  status: string;
  role: string;
  email: string;
  created_at: string;
  expires_at: string;
}

/** Invites `email` as the workspace's admin key; answers the invitation and the token its email carried. */
async function invite(ws: TestWorkspace, email: string, body: object = {}) {
  const res = await call('POST', '/workspace/invitations/', withKey(ws.apiKey), { email, ...body });
  expect(res.statusCode, res.body).toBe(201);
  const invitation = res.json<Invited>();
  const mail = sent.get(`<invitation.${invitation.id}@outreach.example>`);
  expect(mail, 'the invitation email was sent').toBeDefined();
  const token = /^Token: (\S+)$/m.exec(mail!.text)![1]!;
  return { invitation, token, mail: mail! };
}

const accept = (headers: Headers, token: string) => call('POST', '/invitations/accept/', headers, { token });

const eventsOf = (workspaceId: string) =>
  stack.sql<{ type: string; payload: Record<string, unknown> }[]>`
    select type, payload from workspace_events where workspace_id = ${workspaceId} and type like 'member.%' order by seq`;

const invitationsOf = (workspaceId: string) =>
  stack.sql<
    { id: string; email: string }[]
  >`select id, email from member_invitations where workspace_id = ${workspaceId}`;

async function workspaceName(ws: TestWorkspace) {
  return (await call('GET', '/workspace/', withKey(ws.apiKey))).json<{ workspace: { name: string } }>().workspace.name;
}

async function adminMemberId(ws: TestWorkspace) {
  return (await call('GET', '/workspace/', withKey(ws.apiKey))).json<{ member: { id: string } }>().member.id;
}

describe('inviting and accepting', () => {
  it('emails the token, and the invited person joins with the role, in the audit and the events', async () => {
    const ws = await stack.createWorkspace();
    const name = await workspaceName(ws);
    const adminId = await adminMemberId(ws);
    const email = newEmail();
    const { invitation, token, mail } = await invite(ws, email, { role: 'admin', expires_in_days: 3 });
    expect(invitation).toEqual({
      id: expect.any(String),
      email,
      role: 'admin',
      status: 'pending',
      invited_by_member_id: adminId,
      created_at: expect.any(String),
      expires_at: expect.any(String),
      accepted_at: null,
      accepted_by_member_id: null,
      revoked_at: null,
      revoked_by_member_id: null,
    });
    const days = (Date.parse(invitation.expires_at) - Date.parse(invitation.created_at)) / 86_400_000;
    expect(days).toBe(3);
    expect(JSON.stringify(invitation)).not.toContain(token);

    // The mail server took it: the sink has it by its Message-ID, to the invited address, its subject naming the workspace.
    const received = sink.messages.find((m) => m.messageId === `<invitation.${invitation.id}@outreach.example>`);
    expect(received).toMatchObject({ to: [email], subject: expect.stringContaining(name) });
    expect(mail.subject).toContain(name);
    expect(mail.text).toContain(`join the workspace "${name}" as an admin`);
    expect(mail.text).toContain(invitation.expires_at);
    expect(mail.text).toContain(`${acceptPage}?token=${token}`);
    // Only the hash is stored.
    const [stored] = await stack.sql<{ token_hash: Buffer }[]>`
      select token_hash from member_invitations where id = ${invitation.id}`;
    expect(stored!.token_hash.toString('latin1')).not.toContain(token);

    const person = await personToken(email);
    const accepted = await accept(person.headers, token);
    expect(accepted.statusCode, accepted.body).toBe(200);
    const { workspace, member } = accepted.json<{ workspace: { id: string }; member: { id: string } }>();
    expect(workspace).toMatchObject({ id: ws.workspaceId, name });
    expect(member).toMatchObject({ user_id: person.sub, email, role: 'admin', display_name: 'Pat Invitee' });

    // Their token, with no organisation, now reaches the workspace, as an admin.
    const caller = await call('GET', '/workspace/', person.headers);
    expect(caller.statusCode, caller.body).toBe(200);
    expect(caller.json()).toMatchObject({
      workspace: { id: ws.workspaceId },
      member: { id: member.id, role: 'admin' },
    });
    expect((await call('GET', '/workspace/invitations/', person.headers)).statusCode).toBe(200);

    const audit = (await call('GET', '/workspace/audit/', withKey(ws.apiKey))).json().entries;
    expect(audit).toEqual([
      expect.objectContaining({
        action: 'joined',
        joined_via: 'invitation',
        target_member_id: member.id,
        role_after: 'admin',
      }),
    ]);
    expect(await eventsOf(ws.workspaceId)).toEqual([
      {
        type: 'member.invited',
        payload: {
          invitation_id: invitation.id,
          email,
          role: 'admin',
          invited_by_member_id: adminId,
          expires_at: invitation.expires_at,
        },
      },
      {
        type: 'member.joined',
        payload: {
          member_id: member.id,
          user_id: person.sub,
          email,
          role: 'admin',
          via: 'invitation',
          invitation_id: invitation.id,
        },
      },
    ]);

    const listed = (await call('GET', '/workspace/invitations/', withKey(ws.apiKey))).json();
    expect(listed).toEqual({
      invitations: [
        expect.objectContaining({
          id: invitation.id,
          status: 'accepted',
          accepted_by_member_id: member.id,
          accepted_at: expect.any(String),
        }),
      ],
      next_offset: null,
    });

    // Used once: a second acceptance is a 409, and revoking it now too.
    const again = await accept(person.headers, token);
    expect(again.statusCode).toBe(409);
    expect(again.json().detail).toMatch(/already accepted/);
    const revokeUsed = await call('DELETE', `/workspace/invitations/${invitation.id}/`, withKey(ws.apiKey));
    expect(revokeUsed.statusCode).toBe(409);
    expect(revokeUsed.json().detail).toMatch(/accepted: only a pending invitation/);
  });

  it('joins with the member role unless said, and compares the address in any case', async () => {
    const ws = await stack.createWorkspace();
    const email = newEmail();
    const { invitation, token, mail } = await invite(ws, email.toUpperCase());
    expect(invitation).toMatchObject({ email, role: 'member', status: 'pending' });
    expect(mail.text).toContain('as a member.');
    const days = (Date.parse(invitation.expires_at) - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(6.9);
    expect(days).toBeLessThanOrEqual(7);
    const res = await accept((await personToken(email)).headers, token);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().member).toMatchObject({ role: 'member', email });
  });
});

describe('what acceptance refuses', () => {
  it('refuses an expired invitation, at its expiry', async () => {
    const ws = await stack.createWorkspace();
    const email = newEmail();
    const { invitation, token } = await invite(ws, email);
    await stack.sql`
      update member_invitations set created_at = now() - interval '8 days', expires_at = now() - interval '1 second'
      where id = ${invitation.id}`;
    const res = await accept((await personToken(email)).headers, token);
    expect(res.statusCode).toBe(409);
    expect(res.json().detail).toMatch(/expired at/);
    const listed = (await call('GET', '/workspace/invitations/', withKey(ws.apiKey))).json();
    expect(listed.invitations).toEqual([expect.objectContaining({ id: invitation.id, status: 'expired' })]);
    const revoke = await call('DELETE', `/workspace/invitations/${invitation.id}/`, withKey(ws.apiKey));
    expect(revoke.statusCode).toBe(409);
    expect(revoke.json().detail).toMatch(/expired/);
    expect(
      await stack.sql`select 1 from members where workspace_id = ${ws.workspaceId} and email = ${email}`,
    ).toHaveLength(0);
  });

  it('refuses a revoked invitation, and revoking answers 204 once, 404 for unknown or other workspaces’ ids', async () => {
    const ws = await stack.createWorkspace();
    const other = await stack.createWorkspace();
    const adminId = await adminMemberId(ws);
    const email = newEmail();
    const { invitation, token } = await invite(ws, email);
    const elsewhere = await call('DELETE', `/workspace/invitations/${invitation.id}/`, withKey(other.apiKey));
    expect(elsewhere.statusCode).toBe(404);
    expect(elsewhere.json()).toEqual({ detail: 'Invitation not found.' });
    expect((await call('DELETE', `/workspace/invitations/${randomUUID()}/`, withKey(ws.apiKey))).statusCode).toBe(404);

    const revoked = await call('DELETE', `/workspace/invitations/${invitation.id}/`, withToken(ws.accessToken));
    expect(revoked.statusCode, revoked.body).toBe(204);
    expect(revoked.body).toBe('');
    expect((await call('DELETE', `/workspace/invitations/${invitation.id}/`, withKey(ws.apiKey))).statusCode).toBe(409);

    const res = await accept((await personToken(email)).headers, token);
    expect(res.statusCode).toBe(409);
    expect(res.json().detail).toMatch(/revoked/);
    const listed = (await call('GET', '/workspace/invitations/', withKey(ws.apiKey))).json();
    expect(listed.invitations).toEqual([
      expect.objectContaining({ status: 'revoked', revoked_by_member_id: adminId, revoked_at: expect.any(String) }),
    ]);
    expect((await eventsOf(ws.workspaceId)).map((e) => e.type)).toEqual([
      'member.invited',
      'member.invitation_revoked',
    ]);
    expect((await eventsOf(ws.workspaceId))[1]!.payload).toEqual({
      invitation_id: invitation.id,
      email,
      revoked_by_member_id: adminId,
    });
  });

  it('refuses another address, an unverified one and an unknown token, and changes nothing', async () => {
    const ws = await stack.createWorkspace();
    const email = newEmail();
    const { invitation, token } = await invite(ws, email);

    const stranger = await accept((await personToken(newEmail('stranger'))).headers, token);
    expect(stranger.statusCode).toBe(403);
    expect(stranger.json().detail).toMatch(/another email address than your token’s/);
    const unverified = await accept((await personToken(email, { verified: false })).headers, token);
    expect(unverified.statusCode).toBe(403);
    expect(unverified.json().detail).toMatch(/is not verified \(email_verified\)/);
    const unknown = await accept((await personToken(email)).headers, 'A'.repeat(43));
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().detail).toMatch(/No invitation has this token/);

    const listed = (await call('GET', '/workspace/invitations/', withKey(ws.apiKey))).json();
    expect(listed.invitations).toEqual([expect.objectContaining({ id: invitation.id, status: 'pending' })]);
    expect((await eventsOf(ws.workspaceId)).map((e) => e.type)).toEqual(['member.invited']);
    // Still good for the right person.
    expect((await accept((await personToken(email)).headers, token)).statusCode).toBe(200);
  });

  it('takes only a bearer token of the identity provider: an API key is a 403, none a 401', async () => {
    const ws = await stack.createWorkspace();
    const { token } = await invite(ws, newEmail());
    const byKey = await accept(withKey(ws.apiKey), token);
    expect(byKey.statusCode).toBe(403);
    expect(byKey.json().detail).toMatch(/an API key stands for no person/);
    expect((await accept({}, token)).statusCode).toBe(401);
  });

  it('refuses a person who became a member meanwhile, and inviting a member’s address', async () => {
    const ws = await stack.createWorkspace();
    const email = newEmail();
    const { invitation, token } = await invite(ws, email);
    // They join on first use of their organisation's token (the workspace's own id, for dev tokens) before accepting.
    const sub = `person-${randomUUID()}`;
    const orgToken = await stack.mintToken({ sub, org_id: ws.workspaceId, email, email_verified: true });
    expect((await call('GET', '/workspace/', withToken(orgToken))).statusCode).toBe(200);
    const res = await accept((await personToken(email, { sub })).headers, token);
    expect(res.statusCode).toBe(409);
    expect(res.json().detail).toBe('You are already a member of this workspace.');
    const listed = (await call('GET', '/workspace/invitations/', withKey(ws.apiKey))).json();
    expect(listed.invitations).toEqual([expect.objectContaining({ id: invitation.id, status: 'pending' })]);

    const again = await call('POST', '/workspace/invitations/', withKey(ws.apiKey), { email: email.toUpperCase() });
    expect(again.statusCode).toBe(409);
    expect(again.json().detail).toMatch(/already the address of a member/);
  });
});

describe('who may invite', () => {
  it('refuses a member’s bearer token and write key with 403, and stores nothing', async () => {
    const ws = await stack.createWorkspace();
    const m = await stack.addMember(ws.workspaceId, 'member');
    for (const [method, url, body] of [
      ['POST', '/workspace/invitations/', { email: newEmail() }],
      ['GET', '/workspace/invitations/', undefined],
      ['DELETE', `/workspace/invitations/${randomUUID()}/`, undefined],
    ] as const) {
      const res = await call(method, url, withToken(m.accessToken), body);
      expect(res.statusCode, `${method} ${url}`).toBe(403);
      expect(res.json()).toEqual({ detail: 'Only a workspace admin may do this.' });
    }
    expect(await invitationsOf(ws.workspaceId)).toEqual([]);
  });
});

describe('inviting again', () => {
  it('revokes and replaces the pending invitation of the same address', async () => {
    const ws = await stack.createWorkspace();
    const adminId = await adminMemberId(ws);
    const email = newEmail();
    const first = await invite(ws, email);
    const second = await invite(ws, email, { role: 'admin' });
    expect(second.token).not.toBe(first.token);
    const person = await personToken(email);
    const old = await accept(person.headers, first.token);
    expect(old.statusCode).toBe(409);
    expect(old.json().detail).toMatch(/revoked by an admin, or replaced/);

    const listed = (await call('GET', '/workspace/invitations/', withKey(ws.apiKey))).json();
    expect(listed.invitations).toEqual([
      expect.objectContaining({ id: second.invitation.id, status: 'pending', role: 'admin' }),
      expect.objectContaining({ id: first.invitation.id, status: 'revoked', revoked_by_member_id: adminId }),
    ]);
    expect((await eventsOf(ws.workspaceId)).map((e) => [e.type, e.payload.invitation_id])).toEqual([
      ['member.invited', first.invitation.id],
      ['member.invitation_revoked', first.invitation.id],
      ['member.invited', second.invitation.id],
    ]);
    const res = await accept(person.headers, second.token);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().member.role).toBe('admin');
  });

  it('keeps one pending invitation of an address invited twice at once', async () => {
    const ws = await stack.createWorkspace();
    const email = newEmail();
    const results = await Promise.all(
      [1, 2].map(() => call('POST', '/workspace/invitations/', withKey(ws.apiKey), { email })),
    );
    // Either the second replaces the first (201, 201) or meets it uncommitted and is refused (201, 409).
    const statuses = results.map((r) => r.statusCode).sort();
    expect([
      [201, 201],
      [201, 409],
    ]).toContainEqual(statuses);
    const listed = (await call('GET', '/workspace/invitations/', withKey(ws.apiKey))).json();
    expect(listed.invitations.filter((i: Invited) => i.status === 'pending')).toHaveLength(1);
  });

  it('closes an expired invitation of the same address without announcing a revocation', async () => {
    const ws = await stack.createWorkspace();
    const email = newEmail();
    const first = await invite(ws, email);
    await stack.sql`
      update member_invitations set created_at = now() - interval '8 days', expires_at = now() - interval '1 day'
      where id = ${first.invitation.id}`;
    const second = await invite(ws, email);
    const listed = (await call('GET', '/workspace/invitations/', withKey(ws.apiKey))).json();
    expect(listed.invitations.map((i: Invited) => [i.id, i.status])).toEqual([
      [second.invitation.id, 'pending'],
      [first.invitation.id, 'expired'],
    ]);
    expect((await eventsOf(ws.workspaceId)).map((e) => e.type)).toEqual(['member.invited', 'member.invited']);
  });

  it('lists pending first, then the rest newest first, in pages', async () => {
    const ws = await stack.createWorkspace();
    const a = await invite(ws, newEmail('a'));
    const b = await invite(ws, newEmail('b'));
    const c = await invite(ws, newEmail('c'));
    expect((await call('DELETE', `/workspace/invitations/${c.invitation.id}/`, withKey(ws.apiKey))).statusCode).toBe(
      204,
    );
    const all = (await call('GET', '/workspace/invitations/', withKey(ws.apiKey))).json();
    expect(all.invitations.map((i: Invited) => i.id)).toEqual([b.invitation.id, a.invitation.id, c.invitation.id]);
    const page1 = (await call('GET', '/workspace/invitations/?limit=2', withKey(ws.apiKey))).json();
    expect(page1.invitations.map((i: Invited) => i.id)).toEqual([b.invitation.id, a.invitation.id]);
    expect(page1.next_offset).toBe(2);
    const page2 = (await call('GET', '/workspace/invitations/?limit=2&offset=2', withKey(ws.apiKey))).json();
    expect(page2).toEqual({
      invitations: [expect.objectContaining({ id: c.invitation.id, status: 'revoked' })],
      next_offset: null,
    });
  });
});

describe('concurrency and coming back', () => {
  it('makes one member of two concurrent acceptances of one invitation; the other is a 409', async () => {
    for (let round = 0; round < 3; round++) {
      const ws = await stack.createWorkspace();
      const email = newEmail();
      const { token } = await invite(ws, email);
      const person = await personToken(email);
      const results = await Promise.all([accept(person.headers, token), accept(person.headers, token)]);
      expect(results.map((r) => r.statusCode).sort()).toEqual([200, 409]);
      const members =
        await stack.sql`select id from members where workspace_id = ${ws.workspaceId} and email = ${email}`;
      expect(members).toHaveLength(1);
      expect((await eventsOf(ws.workspaceId)).filter((e) => e.type === 'member.joined')).toHaveLength(1);
    }
  });

  it('lets a removed member accept a new invitation and be a member again', async () => {
    const ws = await stack.createWorkspace();
    const added = await stack.addMember(ws.workspaceId, 'member');
    const [row] = await stack.sql<{ id: string; email: string }[]>`
      select id, email from members where workspace_id = ${ws.workspaceId} and idp_user_id = ${added.userId}`;
    expect((await call('DELETE', `/workspace/members/${row!.id}/`, withKey(ws.apiKey))).statusCode).toBe(204);
    const person = await personToken(row!.email, { sub: added.userId });
    expect((await call('GET', '/workspace/', person.headers)).statusCode).toBe(403);

    const { token } = await invite(ws, row!.email);
    const res = await accept(person.headers, token);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().member).toMatchObject({ user_id: added.userId, role: 'member' });
    expect(res.json().member.id).not.toBe(row!.id);
    const caller = await call('GET', '/workspace/', person.headers);
    expect(caller.statusCode, caller.body).toBe(200);
    expect(caller.json().workspace.id).toBe(ws.workspaceId);
    expect(
      await stack.sql`select 1 from member_removals where workspace_id = ${ws.workspaceId} and idp_user_id = ${added.userId}`,
    ).toHaveLength(0);
  });
});

describe('the mail server', () => {
  it('answers 502 and stores nothing when it does not take the email', async () => {
    const ws = await stack.createWorkspace();
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    stack.integrations.mailer = smtpMailer(`smtp://127.0.0.1:${port}`, { from: 'team@outreach.example' });
    try {
      const res = await call('POST', '/workspace/invitations/', withKey(ws.apiKey), { email: newEmail() });
      expect(res.statusCode, res.body).toBe(502);
      expect(res.json().detail).toMatch(/did not take the invitation email, so no invitation was stored/);
    } finally {
      stack.integrations.mailer = mailer;
    }
    expect(await invitationsOf(ws.workspaceId)).toEqual([]);
    expect(await eventsOf(ws.workspaceId)).toEqual([]);
  });

  it('answers 503 naming SMTP_URL when none is configured, and stores nothing', async () => {
    const ws = await stack.createWorkspace();
    stack.integrations.mailer = null;
    try {
      const res = await call('POST', '/workspace/invitations/', withKey(ws.apiKey), { email: newEmail() });
      expect(res.statusCode).toBe(503);
      expect(res.json().detail).toMatch(/SMTP_URL/);
    } finally {
      stack.integrations.mailer = mailer;
    }
    expect(await invitationsOf(ws.workspaceId)).toEqual([]);
  });
});

describe('bad input', () => {
  it('answers 422 with issues, and takes 30 days but not 31', async () => {
    const ws = await stack.createWorkspace();
    const admin = withKey(ws.apiKey);
    for (const res of [
      await call('POST', '/workspace/invitations/', admin, {}),
      await call('POST', '/workspace/invitations/', admin, { email: 'not an address' }),
      await call('POST', '/workspace/invitations/', admin, { email: newEmail(), role: 'owner' }),
      await call('POST', '/workspace/invitations/', admin, { email: newEmail(), expires_in_days: 0 }),
      await call('POST', '/workspace/invitations/', admin, { email: newEmail(), expires_in_days: 31 }),
      await call('GET', '/workspace/invitations/?limit=0', admin),
      await call('GET', '/workspace/invitations/?offset=-1', admin),
      await call('DELETE', '/workspace/invitations/not-a-uuid/', admin),
      await accept((await personToken(newEmail())).headers, 'short'),
      await call('POST', '/invitations/accept/', (await personToken(newEmail())).headers, {}),
    ]) {
      expect(res.statusCode, res.body).toBe(422);
      expect(res.json()).toMatchObject({
        detail: expect.any(String),
        issues: [expect.objectContaining({ loc: expect.any(Array) })],
      });
    }
    expect(await invitationsOf(ws.workspaceId)).toEqual([]);
    const { invitation } = await invite(ws, newEmail(), { expires_in_days: 30 });
    expect((Date.parse(invitation.expires_at) - Date.parse(invitation.created_at)) / 86_400_000).toBe(30);
  });
});

describe('the document', () => {
  it('lists the four operations with their access, and the accept body’s pattern', async () => {
    const doc = (await stack.app.inject({ method: 'GET', url: '/openapi.json' })).json<{
      paths: Record<string, Record<string, { operationId: string; 'x-access': string; 'x-admin-only'?: boolean }>>;
      components: { schemas: Record<string, { properties: Record<string, { pattern?: string }> }> };
    }>();
    const op = (path: string, method: string) => doc.paths[path]![method]!;
    expect(op('/workspace/invitations/', 'post')).toMatchObject({ operationId: 'inviteMember', 'x-admin-only': true });
    expect(op('/workspace/invitations/', 'get')).toMatchObject({
      operationId: 'listInvitations',
      'x-admin-only': true,
    });
    expect(op('/workspace/invitations/{invitation_id}/', 'delete')).toMatchObject({
      operationId: 'revokeInvitation',
      'x-admin-only': true,
    });
    expect(op('/invitations/accept/', 'post')).toMatchObject({
      operationId: 'acceptInvitation',
      'x-access': 'identity',
    });
    expect(doc.components.schemas.InvitationAccept!.properties.token!.pattern).toBe('^[A-Za-z0-9_-]{43}$');
  });
});
