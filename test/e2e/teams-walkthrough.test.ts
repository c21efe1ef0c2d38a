/**
 * docs/teams-walkthrough.md, step by step, as a person runs it: `npm run oidc:local`,
 * `npm run smtp:local` and `npm start` in their own process groups (the three terminals), tokens
 * from `npm run --silent oidc:token`, invitation tokens read from the mail server's output
 * (terminal 2), and each curl of the document as one fetch whose status and facts are the ones
 * the document shows. Ctrl-C stops all three at the end, and nothing is left running.
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, expect, it } from 'vitest';
import { freePort } from '../../worker/ports.js';
import { projectRoot } from '../../worker/tools.js';
import { ctrlC, npmStart, processesUsing, startInGroup, type Running } from '../support/local-stack.js';

const execFileAsync = promisify(execFile);

const roots: string[] = [];
afterAll(() => roots.forEach((r) => rmSync(r, { recursive: true, force: true })));

/** `npm run --silent oidc:token -- --issuer … --sub … --email … --name …`, as the document signs people in. */
async function oidcToken(issuer: string, sub: string, email: string, name: string): Promise<string> {
  const { stdout } = await execFileAsync(
    'npm',
    ['run', '--silent', 'oidc:token', '--', '--issuer', issuer, '--sub', sub, '--email', email, '--name', name],
    { cwd: projectRoot, encoding: 'utf8' },
  );
  return stdout.trim();
}

interface Printed {
  from: string;
  to: string;
  subject: string;
  text: string;
  token: string;
}

/** The email to `address` as terminal 2 printed it (sim/smtp-sink-main.ts), once it has. */
async function emailIn(smtp: Running, address: string): Promise<Printed> {
  const find = () =>
    smtp
      .output()
      .split(/^--- \S+ ---$/m)
      .slice(1)
      .map((block) => {
        const line = (name: string) => new RegExp(`^${name}:\\s+(.*)$`, 'm').exec(block)?.[1] ?? '';
        return {
          from: line('From'),
          to: line('To'),
          subject: line('Subject'),
          text: block.slice(block.indexOf('\n\n') + 2),
          token: line('Token'),
        };
      })
      .find((email) => email.to === address && email.token !== '');
  await expect.poll(find, { timeout: 10_000 }).toBeDefined();
  return find()!;
}

it('runs docs/teams-walkthrough.md: sign-up, invitations, roles, removal', async () => {
  const root = mkdtempSync(join(tmpdir(), 'outreach-teams-'));
  chmodSync(root, 0o755);
  roots.push(root);
  const dataDir = join(root, 'data');
  const apiPort = await freePort(3600);
  const oidcPort = await freePort(9500, [apiPort]);
  const smtpPort = await freePort(2600, [apiPort, oidcPort]);

  const running: Running[] = [];
  let stopFailure: Error | undefined;
  try {
    // Terminals 1 and 2.
    const twins = await Promise.allSettled([
      startInGroup(
        ['run', 'oidc:local'],
        { OIDC_PORT: String(oidcPort), OIDC_AUDIENCE: `http://127.0.0.1:${apiPort}` },
        (output) => /^AUTH_JWT_AUDIENCE=\S+$/m.test(output),
        60_000,
      ),
      startInGroup(
        ['run', 'smtp:local'],
        { SMTP_SINK_PORT: String(smtpPort) },
        (output) => /^SMTP_URL=\S+$/m.test(output),
        60_000,
      ),
    ]);
    for (const t of twins) if (t.status === 'fulfilled') running.push(t.value);
    for (const t of twins) if (t.status === 'rejected') throw t.reason;
    const [oidc, smtp] = running as [Running, Running];
    const settings = Object.fromEntries(
      [...oidc.output().matchAll(/^(AUTH_JWKS_URL|AUTH_JWT_ISSUER|AUTH_JWT_AUDIENCE)=(\S+)$/gm)].map((m) => [
        m[1]!,
        m[2]!,
      ]),
    );
    expect(Object.keys(settings)).toHaveLength(3);
    const issuer = settings.AUTH_JWT_ISSUER!;
    const smtpUrl = /^SMTP_URL=(\S+)$/m.exec(smtp.output())![1]!;
    expect(smtpUrl).toBe(`smtp://127.0.0.1:${smtpPort}`);

    // Terminal 3.
    const stack = await npmStart(dataDir, apiPort, { ...settings, SMTP_URL: smtpUrl });
    running.push(stack);
    const api = async (
      method: string,
      path: string,
      auth: { bearer?: string; apiKey?: string; workspaceId?: string },
      body?: unknown,
    ) => {
      const headers: Record<string, string> = {};
      if (auth.bearer) headers.authorization = `Bearer ${auth.bearer}`;
      if (auth.apiKey) headers['x-api-key'] = auth.apiKey;
      if (auth.workspaceId) headers['x-workspace-id'] = auth.workspaceId;
      if (body !== undefined) headers['content-type'] = 'application/json';
      const response = await fetch(`${stack.apiUrl}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      // Read as `res.json()` is in the other tests, and asserted field by field below.
      return { status: response.status, body: text ? JSON.parse(text) : null };
    };

    // A referral code: the development workspace's.
    const referrals = await api('GET', '/referrals/', { apiKey: stack.devKey });
    expect(referrals.status).toBe(200);
    expect(referrals.body).toMatchObject({
      code: expect.any(String),
      reward: { referrer_credits: expect.any(Number), referred_credits: expect.any(Number) },
      referred_workspaces: 0,
    });
    const code: string = referrals.body.code;

    // Ada signs up.
    const ada = await oidcToken(issuer, 'ada', 'ada@acme.test', 'Ada');
    const signedUp = await api('POST', '/signup/', { bearer: ada }, { name: 'Acme', referral_code: code });
    expect(signedUp.status).toBe(201);
    expect(signedUp.body).toMatchObject({
      workspace: { name: 'Acme', plan: 'free' },
      member: { display_name: 'Ada', role: 'admin' },
    });
    const acmeId: string = signedUp.body.workspace.id;

    // Ada invites Bo; terminal 2 shows the email with its token.
    const boInvited = await api('POST', '/workspace/invitations/', { bearer: ada }, { email: 'bo@acme.test' });
    expect(boInvited.status).toBe(201);
    expect(boInvited.body).toMatchObject({ email: 'bo@acme.test', role: 'member', status: 'pending' });
    const boEmail = await emailIn(smtp, 'bo@acme.test');
    expect(boEmail.from).toBe('"Acme" <sequences@localhost>');
    expect(boEmail.subject).toBe('Ada invited you to the workspace Acme');
    expect(boEmail.text).toContain('Ada invited you (bo@acme.test) to join the workspace "Acme" as a member.');
    expect(boEmail.token).toMatch(/^[A-Za-z0-9_-]{43}$/);

    // Bo signs in and accepts; his token then reaches Acme.
    const bo = await oidcToken(issuer, 'bo', 'bo@acme.test', 'Bo');
    const boAccepted = await api('POST', '/invitations/accept/', { bearer: bo }, { token: boEmail.token });
    expect(boAccepted.status).toBe(200);
    expect(boAccepted.body).toMatchObject({
      workspace: { id: acmeId, name: 'Acme' },
      member: { display_name: 'Bo', role: 'member' },
    });
    const boCaller = await api('GET', '/workspace/', { bearer: bo });
    expect(boCaller.status).toBe(200);
    expect(boCaller.body).toMatchObject({
      workspace: { id: acmeId, name: 'Acme' },
      member: { display_name: 'Bo', role: 'member' },
      via: 'bearer',
    });

    // Ada makes Bo an admin, by the member id the list shows.
    const members = await api('GET', '/workspace/members/', { bearer: ada });
    expect(members.status).toBe(200);
    expect(members.body.members).toEqual([
      expect.objectContaining({ user_id: 'ada', display_name: 'Ada', role: 'admin' }),
      expect.objectContaining({ user_id: 'bo', display_name: 'Bo', role: 'member' }),
    ]);
    const boId: string = members.body.members.find((m: { user_id: string }) => m.user_id === 'bo').id;
    const promoted = await api('PATCH', `/workspace/members/${boId}/`, { bearer: ada }, { role: 'admin' });
    expect(promoted.status).toBe(200);
    expect(promoted.body).toMatchObject({ id: boId, display_name: 'Bo', role: 'admin' });

    // Cy joins as an admin and makes an API key.
    const cyInvited = await api(
      'POST',
      '/workspace/invitations/',
      { bearer: ada },
      { email: 'cy@acme.test', role: 'admin' },
    );
    expect(cyInvited.status).toBe(201);
    expect(cyInvited.body).toMatchObject({ email: 'cy@acme.test', role: 'admin', status: 'pending' });
    const cyEmail = await emailIn(smtp, 'cy@acme.test');
    expect(cyEmail.text).toContain('to join the workspace "Acme" as an admin');
    const cy = await oidcToken(issuer, 'cy', 'cy@acme.test', 'Cy');
    const cyAccepted = await api('POST', '/invitations/accept/', { bearer: cy }, { token: cyEmail.token });
    expect(cyAccepted.status).toBe(200);
    expect(cyAccepted.body).toMatchObject({
      workspace: { name: 'Acme' },
      member: { display_name: 'Cy', role: 'admin' },
    });
    const created = await api('POST', '/api-keys/', { bearer: cy }, { name: "Cy's key" });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: "Cy's key", scope: 'read', key: expect.stringMatching(/^owk_/) });
    const cyKey: string = created.body.key;
    const viaKey = await api('GET', '/workspace/', { apiKey: cyKey });
    expect(viaKey.status).toBe(200);
    expect(viaKey.body).toMatchObject({
      workspace: { name: 'Acme' },
      member: { display_name: 'Cy' },
      via: 'api_key',
      scope: 'read',
    });

    // Ada removes Cy: her key and her token stop at once.
    const listed = await api('GET', '/workspace/members/', { bearer: ada });
    const cyId: string = listed.body.members.find((m: { user_id: string }) => m.user_id === 'cy').id;
    const removed = await api('DELETE', `/workspace/members/${cyId}/`, { bearer: ada });
    expect(removed.status).toBe(204);
    const keyAfter = await api('GET', '/workspace/', { apiKey: cyKey });
    expect(keyAfter.status).toBe(401);
    expect(keyAfter.body.detail).toBe(
      'Missing or invalid credentials: send a valid X-API-Key header or Authorization: Bearer token.',
    );
    // Her token, with or without naming Acme, is told she was removed.
    for (const workspaceId of [undefined, acmeId]) {
      const tokenAfter = await api('GET', '/workspace/', { bearer: cy, workspaceId });
      expect(tokenAfter.status).toBe(403);
      expect(tokenAfter.body.detail).toBe('This user was removed from the workspace; an admin must invite them again.');
    }
  } finally {
    // Ctrl-C in each terminal, the service first (it may still send mail as it drains). A stop
    // that fails is reported only when the walk-through itself passed, so it hides no failure.
    for (const r of [...running].reverse()) {
      const failed = await ctrlC(r).then(
        () => undefined,
        (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
      );
      stopFailure ??= failed;
    }
  }
  if (stopFailure) throw stopFailure;
  await expect.poll(() => processesUsing(dataDir), { timeout: 30_000 }).toEqual([]);
  for (const r of running) await expect.poll(() => groupAlive(r.child.pid!), { timeout: 30_000 }).toBe(false);
}, 180_000);

/** Whether any process of the group is still running (signal 0 checks without sending). */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}
