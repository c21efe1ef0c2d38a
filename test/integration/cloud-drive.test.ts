/**
 * The cloud-drive connection against the local twin (sim/drive-server.ts): connect, the callback,
 * the state; reading files (download, export, 403, 404, 429); a refresh after a 401; a revoked
 * grant; the tokens encrypted at rest; disconnect; 503 without configuration; bad states.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCloudDriveClient } from '../../integrations/cloud-drive/drive-client.js';
import { CloudDriveReadError, readDriveFile } from '../../services/cloud-drive/drive.js';
import { startDriveSim, driveSimConfig, type DriveSim } from '../../sim/drive-server.js';
import { connectDrive, forbiddenDriveFile, putDriveFiles } from '../support/cloud-drive.js';
import { useTestStack, withKey, withToken } from '../support/test-stack.js';
import { pino } from 'pino';
import { Writable } from 'node:stream';
import { buildApp } from '../../api/app.js';
import { createTokenVerifier } from '../../services/platform/tokens.js';
import { resolveTokenConfig } from '../../worker/auth-config.js';

const { stack, paid, free } = useTestStack();
let sim: DriveSim;

beforeAll(async () => {
  sim = await startDriveSim();
  putDriveFiles(
    sim,
    {
      id: 'pdf_1',
      name: 'Deck.pdf',
      mimeType: 'application/pdf',
      content: Buffer.from('%PDF-1.4 deck bytes'),
    },
    {
      id: 'doc_1',
      name: 'Pricing',
      mimeType: 'application/vnd.google-apps.document',
      content: 'Our prices: 10 a seat.',
    },
    {
      id: 'sheet_1',
      name: 'Plans',
      mimeType: 'application/vnd.google-apps.spreadsheet',
      content: 'plan,price\nteam,10\n',
    },
    {
      id: 'folder_1',
      name: 'Shared',
      mimeType: 'application/vnd.google-apps.folder',
      content: '',
    },
    forbiddenDriveFile,
  );
});
afterAll(() => sim?.close());

const configure = () => {
  stack.integrations.cloudDrive = createCloudDriveClient(driveSimConfig(sim));
};
const unconfigure = () => {
  stack.integrations.cloudDrive = { missing: ['DRIVE_CLIENT_ID', 'DRIVE_REDIRECT_URL (or PUBLIC_BASE_URL)'] };
};

const connect = (apiKey: string) => connectDrive(stack, sim, apiKey);

async function readError(workspaceId: string, fileId: string): Promise<CloudDriveReadError> {
  try {
    await readDriveFile(stack.sql, stack.integrations, workspaceId, fileId);
  } catch (error) {
    if (error instanceof CloudDriveReadError) return error;
    throw error;
  }
  throw new Error(`reading ${fileId} succeeded`);
}

describe('cloud drive', () => {
  it('answers 503 naming the variables when the drive is not configured, and still disconnects', async () => {
    unconfigure();
    for (const [method, url] of [
      ['GET', '/cloud-drive/'],
      ['POST', '/cloud-drive/connect/'],
      ['GET', '/cloud-drive/callback/?code=a&state=b'],
    ] as const) {
      const res = await stack.app.inject({ method, url, headers: withKey(paid.apiKey) });
      expect(res.statusCode, url).toBe(503);
      expect(res.json().detail).toMatch(/DRIVE_CLIENT_ID/);
      expect(res.json().detail).toMatch(/DRIVE_REDIRECT_URL/);
    }
    const removed = await stack.app.inject({ method: 'DELETE', url: '/cloud-drive/', headers: withKey(paid.apiKey) });
    expect(removed.statusCode).toBe(200);
    expect(removed.json().detail).toMatch(/No cloud drive was connected/);
    expect((await readError(paid.workspaceId, 'pdf_1')).reason).toBe('not_configured');
  });

  it('bounds the callback at a 2,048-character code and a 1,024-character scope', async () => {
    configure();
    const callback = (code: string, scope: string) =>
      stack.app.inject({
        method: 'GET',
        url: `/cloud-drive/callback/?${new URLSearchParams({ code, scope, state: 'not-a-state' })}`,
      });
    // At the bounds the schema takes it, and the unknown state is what is refused.
    const at = await callback('c'.repeat(2048), 's'.repeat(1024));
    expect(at.statusCode).toBe(422);
    expect(at.json().detail).toMatch(/authorization is unknown/);
    for (const [code, scope, field] of [
      ['c'.repeat(2049), 's', 'code'],
      ['c', 's'.repeat(1025), 'scope'],
    ] as const) {
      const past = await callback(code, scope);
      expect(past.statusCode, past.body).toBe(422);
      expect(past.json().detail).toMatch(new RegExp(`Invalid query field "${field}": Too big`));
    }
  });

  it('connects with PKCE, shows its state without tokens, and keeps the tokens encrypted at rest', async () => {
    configure();
    const before = await stack.app.inject({ method: 'GET', url: '/cloud-drive/', headers: withKey(paid.apiKey) });
    expect(before.json()).toEqual({
      connected: false,
      account_email: null,
      scopes: [],
      connected_at: null,
      status: null,
      last_error: null,
    });

    const started = await stack.app.inject({
      method: 'POST',
      url: '/cloud-drive/connect/',
      headers: withKey(paid.apiKey),
    });
    expect(started.statusCode).toBe(200);
    const authorize = new URL(started.json().authorize_url);
    expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorize.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(authorize.searchParams.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const back = await sim.consent(authorize.toString());
    const done = await stack.app.inject({ method: 'GET', url: `/cloud-drive/callback/${back.search}` });
    expect(done.statusCode, done.body).toBe(200);
    expect(done.json()).toMatchObject({ connected: true, account_email: sim.accountEmail });

    const state = await stack.app.inject({ method: 'GET', url: '/cloud-drive/', headers: withKey(paid.apiKey) });
    expect(state.json()).toMatchObject({
      connected: true,
      account_email: sim.accountEmail,
      status: 'connected',
      last_error: null,
      scopes: ['https://www.googleapis.com/auth/drive.readonly'],
    });
    for (const token of [...sim.issued.access, ...sim.issued.refresh]) {
      expect(state.body).not.toContain(token);
      expect(done.body).not.toContain(token);
    }

    // At rest: neither token, nor the PKCE verifier, is stored as itself.
    const [row] = await stack.sql<{ access_token_sealed: string; refresh_token_sealed: string }[]>`
      select access_token_sealed, refresh_token_sealed from cloud_drive_connections where workspace_id = ${paid.workspaceId}`;
    const [raw] = await stack.sql<
      { everything: string }[]
    >`select t::text as everything from cloud_drive_connections t where workspace_id = ${paid.workspaceId}`;
    expect(row!.access_token_sealed).toMatch(/^s1\.[0-9a-f]{16}\./);
    expect(row!.refresh_token_sealed).toMatch(/^s1\.[0-9a-f]{16}\./);
    for (const token of [...sim.issued.access, ...sim.issued.refresh]) expect(raw!.everything).not.toContain(token);
    // The authorization was used once and is gone.
    const [{ pending }] = (await stack.sql<
      { pending: number }[]
    >`select count(*)::int as pending from cloud_drive_authorizations where workspace_id = ${paid.workspaceId}`) as unknown as [
      { pending: number },
    ];
    expect(pending).toBe(0);
    // The same redirect a second time finds no authorization.
    const replay = await stack.app.inject({ method: 'GET', url: `/cloud-drive/callback/${back.search}` });
    expect(replay.statusCode).toBe(422);
    expect(replay.json().detail).toMatch(/unknown or was already used/);
  });

  it('reads files: bytes downloaded, native documents exported as text, and refusals with reasons', async () => {
    configure();
    const pdf = await readDriveFile(stack.sql, stack.integrations, paid.workspaceId, 'pdf_1');
    expect(pdf).toMatchObject({
      id: 'pdf_1',
      name: 'Deck.pdf',
      mimeType: 'application/pdf',
      contentType: 'application/pdf',
      webViewLink: expect.stringContaining('pdf_1'),
    });
    expect(pdf.content.toString()).toBe('%PDF-1.4 deck bytes');
    const doc = await readDriveFile(stack.sql, stack.integrations, paid.workspaceId, 'doc_1');
    expect(doc).toMatchObject({ mimeType: 'application/vnd.google-apps.document', contentType: 'text/plain' });
    expect(doc.content.toString()).toBe('Our prices: 10 a seat.');
    expect((await readDriveFile(stack.sql, stack.integrations, paid.workspaceId, 'sheet_1')).contentType).toBe(
      'text/csv',
    );
    expect(sim.http.requests.some((r) => r.path.startsWith('/drive/v3/files/doc_1/export?mimeType=text%2Fplain'))).toBe(
      true,
    );
    expect(
      sim.http.requests.some((r) =>
        r.path.startsWith('/drive/v3/files/pdf_1?fields=id%2Cname%2CmimeType%2CwebViewLink%2Csize'),
      ),
    ).toBe(true);

    const forbidden = await readError(paid.workspaceId, 'secret_1');
    expect(forbidden.reason).toBe('forbidden');
    expect(forbidden.message).toMatch(/may not read file secret_1.*Share the file/);
    const missing = await readError(paid.workspaceId, 'nope_1');
    expect(missing.reason).toBe('not_found');
    expect(missing.message).toMatch(/no file nope_1/);
    expect((await readError(paid.workspaceId, 'folder_1')).reason).toBe('unsupported');
    expect((await readError(paid.workspaceId, '../etc')).reason).toBe('not_found');
    await expect(
      readDriveFile(stack.sql, stack.integrations, paid.workspaceId, 'pdf_1', { maxBytes: 5 }),
    ).rejects.toMatchObject({ reason: 'too_large' });
    // Another workspace has no connection of its own.
    expect((await readError(free.workspaceId, 'pdf_1')).reason).toBe('not_connected');
  });

  it('waits out a short 429 once, and reports a long one with its Retry-After', async () => {
    configure();
    sim.rateLimitNext(1, 0);
    expect((await readDriveFile(stack.sql, stack.integrations, paid.workspaceId, 'doc_1')).name).toBe('Pricing');
    sim.rateLimitNext(2, 120);
    const limited = await readError(paid.workspaceId, 'doc_1');
    expect(limited).toMatchObject({ reason: 'rate_limited', retryAfterSeconds: 120 });
    sim.rateLimitNext(0, 0);
  });

  it('refreshes an expired access token once and retries, storing the new one sealed', async () => {
    configure();
    const [before] = await stack.sql<
      { access_token_sealed: string }[]
    >`select access_token_sealed from cloud_drive_connections where workspace_id = ${paid.workspaceId}`;
    const refreshes = sim.grants.refresh_token;
    sim.expireAccessTokens();
    const doc = await readDriveFile(stack.sql, stack.integrations, paid.workspaceId, 'doc_1');
    expect(doc.content.toString()).toBe('Our prices: 10 a seat.');
    expect(sim.grants.refresh_token).toBe(refreshes + 1);
    const [after] = await stack.sql<{ access_token_sealed: string; refresh_token_sealed: string }[]>`
      select access_token_sealed, refresh_token_sealed from cloud_drive_connections where workspace_id = ${paid.workspaceId}`;
    expect(after!.access_token_sealed).not.toBe(before!.access_token_sealed);
    expect(after!.access_token_sealed).not.toContain(sim.issued.access.at(-1)!);
    expect(after!.refresh_token_sealed).toMatch(/^s1\./); // a refresh that does not rotate it keeps the stored one
    // The next read uses the refreshed token without another refresh.
    await readDriveFile(stack.sql, stack.integrations, paid.workspaceId, 'pdf_1');
    expect(sim.grants.refresh_token).toBe(refreshes + 1);
  });

  it('a revoked grant (invalid_grant) leaves the connection needing reconnection, and a reconnect fixes it', async () => {
    configure();
    sim.expireAccessTokens();
    sim.revokeGrants();
    const revoked = await readError(paid.workspaceId, 'doc_1');
    expect(revoked.reason).toBe('reconnect_required');
    expect(revoked.message).toMatch(/connect the drive again/);
    const state = await stack.app.inject({ method: 'GET', url: '/cloud-drive/', headers: withKey(paid.apiKey) });
    expect(state.json()).toMatchObject({
      connected: true,
      status: 'reconnect_required',
      last_error: expect.stringMatching(/revoked or expired/),
    });
    // Nothing more is asked of the drive until someone reconnects.
    const refreshes = sim.grants.refresh_token;
    expect((await readError(paid.workspaceId, 'doc_1')).reason).toBe('reconnect_required');
    expect(sim.grants.refresh_token).toBe(refreshes);

    expect((await connect(paid.apiKey)).statusCode).toBe(200);
    const again = await stack.app.inject({ method: 'GET', url: '/cloud-drive/', headers: withKey(paid.apiKey) });
    expect(again.json()).toMatchObject({ status: 'connected', last_error: null });
    expect((await readDriveFile(stack.sql, stack.integrations, paid.workspaceId, 'doc_1')).name).toBe('Pricing');
  });

  it('refuses a bad, missing, expired or refused state with a detail, and a member may not connect', async () => {
    configure();
    const bad = await stack.app.inject({ method: 'GET', url: '/cloud-drive/callback/?code=abc&state=not-a-state' });
    expect(bad.statusCode).toBe(422);
    expect(bad.json().detail).toMatch(/unknown or was already used/);
    const none = await stack.app.inject({ method: 'GET', url: '/cloud-drive/callback/?code=abc' });
    expect(none.statusCode).toBe(422);
    expect(none.json().detail).toMatch(/no `state`/);

    const started = await stack.app.inject({
      method: 'POST',
      url: '/cloud-drive/connect/',
      headers: withToken(free.accessToken),
    });
    const back = await sim.consent(started.json().authorize_url);
    await stack.sql`update cloud_drive_authorizations set expires_at = now() - interval '1 second' where workspace_id = ${free.workspaceId}`;
    const expired = await stack.app.inject({ method: 'GET', url: `/cloud-drive/callback/${back.search}` });
    expect(expired.statusCode).toBe(422);
    expect(expired.json().detail).toMatch(/expired/);

    const denied = await stack.app.inject({
      method: 'POST',
      url: '/cloud-drive/connect/',
      headers: withToken(free.accessToken),
    });
    const deniedState = new URL(denied.json().authorize_url).searchParams.get('state')!;
    const refused = await stack.app.inject({
      method: 'GET',
      url: `/cloud-drive/callback/?error=access_denied&state=${deniedState}`,
    });
    expect(refused.statusCode).toBe(422);
    expect(refused.json().detail).toMatch(/access_denied/);
    expect(
      (await stack.app.inject({ method: 'GET', url: '/cloud-drive/', headers: withKey(free.apiKey) })).json().connected,
    ).toBe(false);

    const member = await stack.addMember(free.workspaceId, 'member');
    const asMember = await stack.app.inject({
      method: 'POST',
      url: '/cloud-drive/connect/',
      headers: withToken(member.accessToken),
    });
    expect(asMember.statusCode).toBe(403);
    expect(
      (await stack.app.inject({ method: 'GET', url: '/cloud-drive/', headers: withToken(member.accessToken) }))
        .statusCode,
    ).toBe(200);
  });

  it('with a drive that rotates refresh tokens, refreshes in turn and two refreshes at once leave it connected', async () => {
    const rotating = await startDriveSim({ rotateRefreshTokens: true });
    rotating.files.set('doc_9', {
      id: 'doc_9',
      name: 'Notes',
      mimeType: 'application/vnd.google-apps.document',
      content: 'notes',
    });
    stack.integrations.cloudDrive = createCloudDriveClient(driveSimConfig(rotating));
    try {
      const ws = await stack.createWorkspace('paid');
      const started = await stack.app.inject({
        method: 'POST',
        url: '/cloud-drive/connect/',
        headers: withKey(ws.apiKey),
      });
      const back = await rotating.consent(started.json().authorize_url);
      expect((await stack.app.inject({ method: 'GET', url: `/cloud-drive/callback/${back.search}` })).statusCode).toBe(
        200,
      );
      for (let i = 0; i < 2; i += 1) {
        rotating.expireAccessTokens();
        expect((await readDriveFile(stack.sql, stack.integrations, ws.workspaceId, 'doc_9')).content.toString()).toBe(
          'notes',
        );
      }
      expect(rotating.grants.refresh_token).toBe(2);
      rotating.expireAccessTokens();
      await Promise.allSettled(
        [1, 2, 3].map(() => readDriveFile(stack.sql, stack.integrations, ws.workspaceId, 'doc_9')),
      );
      const state = await stack.app.inject({ method: 'GET', url: '/cloud-drive/', headers: withKey(ws.apiKey) });
      expect(state.json()).toMatchObject({ status: 'connected', last_error: null });
      expect((await readDriveFile(stack.sql, stack.integrations, ws.workspaceId, 'doc_9')).name).toBe('Notes');
    } finally {
      await rotating.close();
      configure();
    }
  });

  it('never writes a token to a log line, at the most verbose level, through connect, refresh, refusals and a revoked grant', async () => {
    const lines: string[] = [];
    const logger = pino(
      { level: 'trace' },
      new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(chunk.toString()), done()) }),
    );
    const operations = stack.integrations.operations; // buildApp points the shared integrations at its own app: put it back after
    const app = await buildApp({
      sql: stack.sql,
      temporal: { client: stack.client, taskQueue: stack.taskQueue },
      verifyToken: createTokenVerifier(await resolveTokenConfig(stack.sql, {})),
      rateLimit: { limit: 0, windowSeconds: 60 },
      logger,
      integrations: stack.integrations,
    });
    try {
      configure();
      const ws = await stack.createWorkspace('paid');
      const started = await app.inject({ method: 'POST', url: '/cloud-drive/connect/', headers: withKey(ws.apiKey) });
      const back = await sim.consent(started.json().authorize_url);
      expect((await app.inject({ method: 'GET', url: `/cloud-drive/callback/${back.search}` })).statusCode).toBe(200);
      expect((await app.inject({ method: 'GET', url: `/cloud-drive/callback/${back.search}` })).statusCode).toBe(422);
      await app.inject({ method: 'GET', url: '/cloud-drive/', headers: withKey(ws.apiKey) });
      sim.expireAccessTokens();
      await readDriveFile(stack.sql, stack.integrations, ws.workspaceId, 'doc_1');
      await readError(ws.workspaceId, 'secret_1');
      const [row] = await stack.sql<
        { access_token_sealed: string }[]
      >`select access_token_sealed from cloud_drive_connections where workspace_id = ${ws.workspaceId}`;
      expect(lines.length).toBeGreaterThan(3);
      const logged = lines.join('');
      for (const token of [...sim.issued.access, ...sim.issued.refresh]) expect(logged).not.toContain(token);
      expect(logged).not.toContain(row!.access_token_sealed);
    } finally {
      await app.close();
      stack.integrations.operations = operations;
    }
  });

  it('disconnects: the tokens are deleted and reads say the drive is not connected', async () => {
    configure();
    const removed = await stack.app.inject({ method: 'DELETE', url: '/cloud-drive/', headers: withKey(paid.apiKey) });
    expect(removed.statusCode).toBe(200);
    expect(removed.json().detail).toMatch(/disconnected/);
    expect(
      (await stack.app.inject({ method: 'GET', url: '/cloud-drive/', headers: withKey(paid.apiKey) })).json().connected,
    ).toBe(false);
    expect(
      await stack.sql`select 1 from cloud_drive_connections where workspace_id = ${paid.workspaceId}`,
    ).toHaveLength(0);
    expect((await readError(paid.workspaceId, 'doc_1')).reason).toBe('not_connected');
  });
});
