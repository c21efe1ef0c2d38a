/**
 * Connected AI apps end to end over real HTTP: the MCP SDK's own client and OAuth provider against
 * the service (discovery, dynamic registration, PKCE, consent through the JSON routes, token, tools,
 * calls, refresh, revoke), and the authorization server's refusals (PKCE, resource, a reused code,
 * an expired token, a revoked app, a downgraded plan, the bounds of the consent routes).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { useTestStack, withKey, withToken } from '../support/test-stack.js';
import { authorizeAndConnect, connectMcp, consentIdOf, MemoryOAuthProvider } from '../support/connected-apps.js';
import { serveHttp } from '../../sim/local-http.js';

const { stack, paid, free } = useTestStack();
let base: string;
let mcpUrl: URL;
const redirect = 'http://127.0.0.1:4599/callback';

beforeAll(async () => {
  await stack.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(stack.app.server.address() as AddressInfo).port}`;
  mcpUrl = new URL(`${base}/mcp`);
});

/** The person's consent through the JSON routes (what the page does), answering the redirect. */
const approveAs = (token: string, workspaceId: string, access: 'read' | 'write') => async (consentId: string) => {
  const res = await stack.app.inject({
    method: 'POST',
    url: `/connected-apps/consent-requests/${consentId}/approve/`,
    headers: withToken(token),
    payload: { workspace_id: workspaceId, access },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().redirect_url as string;
};

const form = (values: Record<string, string>) => ({
  method: 'POST',
  headers: { 'content-type': 'application/x-www-form-urlencoded' },
  body: new URLSearchParams(values).toString(),
});

async function register(name = 'Raw client', uris = [redirect]) {
  const res = await fetch(`${base}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: name, redirect_uris: uris }),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as { client_id: string; token_endpoint_auth_method: string };
}

function pkce() {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

function authorizeUrl(clientId: string, challenge: string, extra: Record<string, string> = {}) {
  const url = new URL(`${base}/oauth/authorize`);
  const params = {
    response_type: 'code',
    client_id: clientId,
    redirect_uri: redirect,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    resource: `${base}/mcp`,
    state: 'xyz',
    ...extra,
  };
  for (const [k, v] of Object.entries(params)) if (v !== '') url.searchParams.set(k, v);
  return url;
}

/** A raw code for a fresh client approved into `workspaceId`. */
async function rawCode(workspaceId: string, token: string, access: 'read' | 'write' = 'read') {
  const { client_id } = await register();
  const { verifier, challenge } = pkce();
  const consentId = await consentIdOf(authorizeUrl(client_id, challenge));
  const redirected = new URL(await approveAs(token, workspaceId, access)(consentId));
  return { client_id, verifier, code: redirected.searchParams.get('code')!, redirected };
}

const token = (values: Record<string, string>) => fetch(`${base}/oauth/token`, form(values));

/** Exchanges a raw code at the token endpoint with its own verifier, `extra` overriding or adding fields. */
const redeem = (raw: { client_id: string; verifier: string; code: string }, extra: Record<string, string> = {}) =>
  token({
    grant_type: 'authorization_code',
    code: raw.code,
    client_id: raw.client_id,
    redirect_uri: redirect,
    code_verifier: raw.verifier,
    ...extra,
  });

/** A fresh client approved into `workspaceId` and its code exchanged: the raw code and the issued tokens. */
async function issuedTokens(workspaceId: string, accessToken: string, access: 'read' | 'write' = 'read') {
  const raw = await rawCode(workspaceId, accessToken, access);
  return { ...raw, issued: await (await redeem(raw)).json() };
}

async function mcpPost(accessToken: string | null, body: unknown) {
  return fetch(mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(accessToken ? { authorization: `Bearer ${accessToken}` } : {}),
    },
    body: JSON.stringify(body),
  });
}
const listTools = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
const callTool = (name: string, args: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id: 2,
  method: 'tools/call',
  params: { name, arguments: args },
});

describe('discovery', () => {
  it('answers 401 with the resource metadata address, and both metadata documents', async () => {
    const res = await mcpPost(null, listTools);
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(
      `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp", scope="read write"`,
    );
    const prm = await (await fetch(`${base}/.well-known/oauth-protected-resource/mcp`)).json();
    expect(prm).toMatchObject({
      resource: `${base}/mcp`,
      authorization_servers: [base],
      scopes_supported: ['read', 'write'],
    });
    const as = await (await fetch(`${base}/.well-known/oauth-authorization-server`)).json();
    expect(as).toMatchObject({
      issuer: base,
      code_challenge_methods_supported: ['S256'],
      client_id_metadata_document_supported: true,
      registration_endpoint: `${base}/oauth/register`,
      revocation_endpoint: `${base}/oauth/revoke`,
    });
  });
});

describe('the MCP endpoint', () => {
  it('refuses a DNS-rebound page (its origin names the host it called, not this service), and GET is 405', async () => {
    const { port } = stack.app.server.address() as AddressInfo;
    const rebound = (publicBaseUrl: string | undefined) => {
      stack.integrations.publicBaseUrl = publicBaseUrl;
      return stack.app.inject({
        method: 'POST',
        url: '/mcp',
        headers: {
          host: `rebound.example:${port}`,
          origin: `http://rebound.example:${port}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        payload: listTools,
      });
    };
    const saved = stack.integrations.publicBaseUrl;
    try {
      expect((await rebound(base)).statusCode).toBe(403);
      // Without a public address that host is the service's own, so this check lets it by (the token's
      // audience refuses a token issued for the real address: see the audience test below).
      expect((await rebound(undefined)).statusCode).toBe(401);
    } finally {
      stack.integrations.publicBaseUrl = saved;
    }
    expect((await fetch(mcpUrl, { method: 'GET' })).status).toBe(405);
  });
});

describe('cross-origin use (CORS)', () => {
  const page = 'http://localhost:6274';
  const preflight = (url: string, method = 'POST') =>
    stack.app.inject({
      method: 'OPTIONS',
      url,
      headers: {
        origin: page,
        'access-control-request-method': method,
        'access-control-request-headers': 'authorization, content-type, mcp-protocol-version, mcp-session-id',
      },
    });
  const listed = (value: string | number | string[] | undefined) =>
    String(value ?? '')
      .split(/,\s*/)
      .map((h) => h.toLowerCase());

  it('answers the preflight of /mcp with the methods and the MCP headers', async () => {
    const res = await preflight('/mcp');
    expect(res.statusCode).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(listed(res.headers['access-control-allow-methods'])).toEqual(
      expect.arrayContaining(['get', 'post', 'delete']),
    );
    expect(listed(res.headers['access-control-allow-headers'])).toEqual(
      expect.arrayContaining([
        'authorization',
        'content-type',
        'mcp-session-id',
        'mcp-protocol-version',
        'last-event-id',
      ]),
    );
    expect(Number(res.headers['access-control-max-age'])).toBeGreaterThan(0);
  });

  it('lets a page of another origin read the metadata, register, exchange a code and read the challenge of /mcp', async () => {
    for (const path of [
      '/.well-known/oauth-protected-resource/mcp',
      '/.well-known/oauth-protected-resource',
      '/.well-known/oauth-authorization-server',
      '/.well-known/openid-configuration',
    ]) {
      const before = await preflight(path, 'GET');
      expect([path, before.statusCode, before.headers['access-control-allow-origin']]).toEqual([path, 204, '*']);
      expect(listed(before.headers['access-control-allow-methods'])).toContain('get');
      const res = await stack.app.inject({ method: 'GET', url: path, headers: { origin: page } });
      expect([path, res.statusCode, res.headers['access-control-allow-origin']]).toEqual([path, 200, '*']);
    }
    for (const path of ['/oauth/register', '/oauth/token']) {
      const before = await preflight(path);
      expect([path, before.statusCode, before.headers['access-control-allow-origin']]).toEqual([path, 204, '*']);
      expect(listed(before.headers['access-control-allow-methods'])).toContain('post');
    }
    const refused = await stack.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { origin: page, 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'grant_type=authorization_code&code=oac_unknown',
    });
    expect(refused.statusCode).toBeGreaterThanOrEqual(400);
    expect(refused.headers['access-control-allow-origin']).toBe('*');
    const challenged = await stack.app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { origin: page, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      payload: listTools,
    });
    expect(challenged.statusCode).toBe(401);
    expect(challenged.headers['access-control-allow-origin']).toBe('*');
    expect(listed(challenged.headers['access-control-expose-headers'])).toEqual(
      expect.arrayContaining(['www-authenticate', 'mcp-session-id']),
    );
  });

  it('gives no other route CORS: not the API, the consent page, the consent routes or the authorization endpoint', async () => {
    const tables = await stack.app.inject({
      method: 'GET',
      url: '/tables/',
      headers: { origin: page, ...withKey(paid.apiKey) },
    });
    expect(tables.statusCode).toBe(200);
    expect(tables.headers['access-control-allow-origin']).toBeUndefined();
    const consentId = '00000000-0000-4000-8000-000000000000';
    for (const path of [
      '/tables/',
      '/connected-apps/',
      `/connected-apps/consent-requests/${consentId}/approve/`,
      `/oauth/consent/${consentId}`,
      '/oauth/authorize',
      '/oauth/revoke',
    ]) {
      const res = await preflight(path);
      expect([path, res.headers['access-control-allow-origin']]).toEqual([path, undefined]);
      expect(res.statusCode, path).not.toBe(204);
    }
    for (const url of [`/oauth/consent/${consentId}`, '/oauth/authorize?client_id=unknown']) {
      const res = await stack.app.inject({ method: 'GET', url, headers: { origin: page } });
      expect([url, res.headers['access-control-allow-origin']]).toEqual([url, undefined]);
    }
  });
});

describe('the SDK client end to end', () => {
  it('registers, gets consent, lists read tools on a free workspace, reads, is refused a write, refreshes and is cut off by a revoke', async () => {
    const provider = new MemoryOAuthProvider(redirect, 'Free assistant');
    // The person chooses write; the free plan reads as read.
    const { client } = await authorizeAndConnect(
      mcpUrl,
      provider,
      approveAs(free.accessToken, free.workspaceId, 'write'),
    );
    expect(provider.client?.client_id).toMatch(/^mcp_/);
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    expect(names).toContain('listTables');
    expect(names).not.toContain('createTable');
    expect(names.some((n) => /ConnectedApp|ConsentRequest/.test(n))).toBe(false);
    expect(tools.every((t) => t.inputSchema.type === 'object')).toBe(true);

    expect(
      (
        await stack.app.inject({
          method: 'POST',
          url: '/tables/',
          headers: withToken(free.accessToken),
          payload: { name: 'Read me' },
        })
      ).statusCode,
    ).toBe(201);
    const read = await client.callTool({ name: 'listTables', arguments: {} });
    expect(read.isError).toBe(false);
    expect(JSON.stringify(read.structuredContent)).toContain('Read me');

    const refused = await client
      .callTool({ name: 'createTable', arguments: { body: { name: 'Nope' } } })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StreamableHTTPError);
    expect((refused as StreamableHTTPError).code).toBe(403);

    // The raw refusal: 403 insufficient_scope naming the scope and the metadata.
    const raw = await mcpPost(provider.saved!.access_token, callTool('createTable', { body: { name: 'Nope' } }));
    expect(raw.status).toBe(403);
    expect(raw.headers.get('www-authenticate')).toMatch(/error="insufficient_scope", scope="read write"/);
    expect((await raw.json()).detail).toMatch(/not on the paid plan/);

    // Refresh rotates: the new refresh token works once, the old one is refused.
    const before = provider.saved!;
    const rotated = await (
      await token({
        grant_type: 'refresh_token',
        refresh_token: before.refresh_token!,
        client_id: provider.client!.client_id,
        resource: `${base}/mcp`,
      })
    ).json();
    expect(rotated.access_token).toMatch(/^oat_/);
    expect(rotated.refresh_token).not.toBe(before.refresh_token);
    provider.saved = rotated;
    const again = await connectMcp(mcpUrl, provider);
    expect((await again.client.listTools()).tools.length).toBeGreaterThan(0);

    // Revoking the app kills its tokens at once.
    const list = await stack.app.inject({ method: 'GET', url: '/connected-apps/', headers: withKey(free.apiKey) });
    const app = list.json().data.find((a: { app_name: string }) => a.app_name === 'Free assistant');
    expect(app).toMatchObject({
      brand: 'other',
      redirect_host: '127.0.0.1:4599',
      access: 'write',
      user_id: free.userId,
      last_used_at: expect.stringMatching(/:00(\.000)?Z$/),
    });
    const revoked = await stack.app.inject({
      method: 'DELETE',
      url: `/connected-apps/${app.id}/`,
      headers: withToken(free.accessToken),
    });
    expect(revoked.statusCode).toBe(204);
    const dead = await mcpPost(rotated.access_token, listTools);
    expect(dead.status).toBe(401);
    expect(dead.headers.get('www-authenticate')).toMatch(/error="invalid_token"/);
    const noRefresh = await token({
      grant_type: 'refresh_token',
      refresh_token: rotated.refresh_token,
      client_id: provider.client!.client_id,
    });
    expect(noRefresh.status).toBe(400);
    expect((await noRefresh.json()).error).toBe('invalid_grant');
  });

  it('writes on a paid workspace, and the next call after a downgrade reads only', async () => {
    const provider = new MemoryOAuthProvider(redirect, 'Paid assistant');
    const { client } = await authorizeAndConnect(
      mcpUrl,
      provider,
      approveAs(paid.accessToken, paid.workspaceId, 'write'),
    );
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('createTable');
    const made = await client.callTool({ name: 'createTable', arguments: { body: { name: 'Made by an app' } } });
    expect(made.isError).toBe(false);
    expect(made.structuredContent).toMatchObject({ status: 201, body: { name: 'Made by an app' } });

    // Resources: the workspace's tables (and sequences), read as the member; another workspace's is not found.
    const tableId = (made.structuredContent as { body: { id: string } }).body.id;
    const { resources } = await client.listResources();
    expect(resources).toContainEqual(
      expect.objectContaining({ uri: `workspace://tables/${tableId}`, name: 'Made by an app' }),
    );
    const content = await client.readResource({ uri: `workspace://tables/${tableId}` });
    expect(JSON.parse(String((content.contents[0] as { text: string }).text))).toMatchObject({
      id: tableId,
      name: 'Made by an app',
    });
    const foreign = (
      await stack.app.inject({
        method: 'POST',
        url: '/tables/',
        headers: withToken(free.accessToken),
        payload: { name: 'Not yours' },
      })
    ).json();
    await expect(client.readResource({ uri: `workspace://tables/${foreign.id}` })).rejects.toThrow(/No resource/);
    expect((await client.listResources()).resources.map((r) => r.name)).not.toContain('Not yours');

    await stack.sql`update workspaces set plan = 'free' where id = ${paid.workspaceId}`;
    try {
      const raw = await mcpPost(
        provider.saved!.access_token,
        callTool('createTable', { body: { name: 'After downgrade' } }),
      );
      expect(raw.status).toBe(403);
      const tools = await (await mcpPost(provider.saved!.access_token, listTools)).json();
      expect(tools.result.tools.map((t: { name: string }) => t.name)).not.toContain('createTable');
    } finally {
      await stack.sql`update workspaces set plan = 'paid' where id = ${paid.workspaceId}`;
    }
    const back = await mcpPost(
      provider.saved!.access_token,
      callTool('createTable', { body: { name: 'Upgraded again' } }),
    );
    expect(back.status).toBe(200);
  });

  it('raises an assistant card for a write the grant rule would ask about, says so, and runs it once approved', async () => {
    const provider = new MemoryOAuthProvider(redirect, 'Careful assistant');
    const { client } = await authorizeAndConnect(
      mcpUrl,
      provider,
      approveAs(paid.accessToken, paid.workspaceId, 'write'),
    );
    const settings = await stack.app.inject({
      method: 'PATCH',
      url: '/assistant/settings/',
      headers: withKey(paid.apiKey),
      payload: { approval_threshold_credits: 0 },
    });
    expect(settings.statusCode).toBe(200);
    try {
      const asked = await client.callTool({ name: 'createTable', arguments: { body: { name: 'Over the threshold' } } });
      expect(asked.isError).toBe(false);
      expect(asked.structuredContent).toMatchObject({
        status: 'awaiting_approval',
        approval_threshold_credits: 0,
        card_id: expect.any(String),
      });
      expect(String((asked.content as { text: string }[])[0]!.text)).toMatch(/needs a person's approval/);
      const cardId = (asked.structuredContent as { card_id: string }).card_id;
      const tables = () =>
        stack.app.inject({ method: 'GET', url: '/tables/', headers: withKey(paid.apiKey) }).then((r) => r.body);
      expect(await tables()).not.toContain('Over the threshold');
      const card = (
        await stack.app.inject({ method: 'GET', url: `/assistant/actions/${cardId}/`, headers: withKey(paid.apiKey) })
      ).json();
      expect(card).toMatchObject({
        origin: 'api',
        kind: 'tool',
        verb: 'createTable',
        status: 'pending',
        conversation_id: expect.any(String),
      });
      expect(card.detail.lines[0]).toBe('Asked by Careful assistant');
      const approved = await stack.app.inject({
        method: 'POST',
        url: `/assistant/actions/${cardId}/approve/`,
        headers: withKey(paid.apiKey),
        payload: { scope: 'once' },
      });
      expect(approved.statusCode, approved.body).toBe(200);
      expect(approved.json().status).toBe('applied');
      expect(await tables()).toContain('Over the threshold');
      // A destructive call asks too, whatever the threshold.
      await stack.app.inject({
        method: 'PATCH',
        url: '/assistant/settings/',
        headers: withKey(paid.apiKey),
        payload: { approval_threshold_credits: 25 },
      });
      const table = JSON.parse(await tables()).tables.find((t: { name: string }) => t.name === 'Over the threshold');
      const destroy = await client.callTool({ name: 'deleteTable', arguments: { table_id: table.id } });
      expect(destroy.structuredContent).toMatchObject({ status: 'awaiting_approval' });
      expect(await tables()).toContain('Over the threshold');
    } finally {
      await stack.app.inject({
        method: 'PATCH',
        url: '/assistant/settings/',
        headers: withKey(paid.apiKey),
        payload: { approval_threshold_credits: 25 },
      });
    }
  });
});

describe('the token endpoint', () => {
  it('refuses a wrong verifier, and the code it burned cannot be used after', async () => {
    const raw = await rawCode(paid.workspaceId, paid.accessToken);
    const wrong = await redeem(raw, { code_verifier: pkce().verifier });
    expect(wrong.status).toBe(400);
    expect(await wrong.json()).toMatchObject({
      error: 'invalid_grant',
      error_description: expect.stringMatching(/code_verifier/),
    });
    const late = await redeem(raw);
    expect(late.status).toBe(400);
  });

  it('refuses the plain method and a missing challenge at the authorization endpoint, back at the redirect', async () => {
    const { client_id } = await register();
    for (const extra of [
      { code_challenge_method: 'plain' },
      { code_challenge: '' },
      { code_challenge_method: '' },
    ] as Record<string, string>[]) {
      const res = await fetch(authorizeUrl(client_id, pkce().challenge, extra), { redirect: 'manual' });
      expect(res.status).toBe(302);
      const back = new URL(res.headers.get('location')!);
      expect(`${back.origin}${back.pathname}`).toBe(redirect);
      expect(back.searchParams.get('error')).toBe('invalid_request');
      expect(back.searchParams.get('state')).toBe('xyz');
    }
  });

  it('requires the resource and refuses another one, at authorization and at the token endpoint', async () => {
    const { client_id } = await register();
    for (const resource of ['', 'https://elsewhere.example/mcp', `${base}/other`]) {
      const res = await fetch(authorizeUrl(client_id, pkce().challenge, { resource }), { redirect: 'manual' });
      expect(new URL(res.headers.get('location')!).searchParams.get('error'), resource).toBe('invalid_target');
    }
    const other = await redeem(await rawCode(paid.workspaceId, paid.accessToken), {
      resource: 'https://elsewhere.example/mcp',
    });
    expect(other.status).toBe(400);
    expect((await other.json()).error).toBe('invalid_target');
  });

  it('answers an unknown client and an unregistered redirect on the page, never at the redirect', async () => {
    const unknown = await fetch(authorizeUrl('mcp_unknown', pkce().challenge), { redirect: 'manual' });
    expect(unknown.status).toBe(400);
    expect(await unknown.text()).toMatch(/invalid_client/);
    const { client_id } = await register();
    const stray = await fetch(
      authorizeUrl(client_id, pkce().challenge, { redirect_uri: 'https://attacker.example/cb' }),
      { redirect: 'manual' },
    );
    expect(stray.status).toBe(400);
    expect(stray.headers.get('location')).toBeNull();
  });

  it('refuses a stolen code used again and revokes the tokens its first use issued', async () => {
    const raw = await rawCode(paid.workspaceId, paid.accessToken);
    const { client_id } = raw;
    const first = await redeem(raw, { resource: `${base}/mcp` });
    expect(first.status).toBe(200);
    const issued = await first.json();
    expect(issued).toMatchObject({ token_type: 'Bearer', expires_in: 900, scope: 'read' });
    expect((await mcpPost(issued.access_token, listTools)).status).toBe(200);
    const second = await redeem(raw);
    expect(second.status).toBe(400);
    expect((await second.json()).error_description).toMatch(/already used/);
    expect((await mcpPost(issued.access_token, listTools)).status).toBe(401);
    const refresh = await token({ grant_type: 'refresh_token', refresh_token: issued.refresh_token, client_id });
    expect(refresh.status).toBe(400);
  });

  it('revokes the whole grant when a spent refresh token comes back', async () => {
    const { client_id, issued } = await issuedTokens(paid.workspaceId, paid.accessToken);
    const rotated = await (
      await token({ grant_type: 'refresh_token', refresh_token: issued.refresh_token, client_id })
    ).json();
    expect(rotated.access_token).toBeDefined();
    const replay = await token({ grant_type: 'refresh_token', refresh_token: issued.refresh_token, client_id });
    expect(replay.status).toBe(400);
    expect((await mcpPost(rotated.access_token, listTools)).status).toBe(401);
  });

  it('refuses an expired token and an expired code', async () => {
    const { issued } = await issuedTokens(paid.workspaceId, paid.accessToken);
    const hash = createHash('sha256').update(issued.access_token).digest();
    // At the bound: a token expiring a second from now works; one expired a second ago does not.
    await stack.sql`update oauth_tokens set expires_at = now() + interval '1 second' where token_hash = ${hash}`;
    expect((await mcpPost(issued.access_token, listTools)).status).toBe(200);
    await stack.sql`update oauth_tokens set expires_at = now() - interval '1 second' where token_hash = ${hash}`;
    const expired = await mcpPost(issued.access_token, listTools);
    expect(expired.status).toBe(401);
    expect(expired.headers.get('www-authenticate')).toMatch(/invalid_token/);

    const late = await rawCode(paid.workspaceId, paid.accessToken);
    await stack.sql`update oauth_authorization_codes set expires_at = now() - interval '1 second' where code_hash = ${createHash('sha256').update(late.code).digest()}`;
    const res = await redeem(late);
    expect((await res.json()).error_description).toMatch(/expired/);
  });

  it('revokes a token at the revocation endpoint (RFC 7009)', async () => {
    const { client_id, issued } = await issuedTokens(paid.workspaceId, paid.accessToken);
    const res = await fetch(`${base}/oauth/revoke`, form({ token: issued.refresh_token, client_id }));
    expect(res.status).toBe(200);
    expect((await mcpPost(issued.access_token, listTools)).status).toBe(401);
    expect((await fetch(`${base}/oauth/revoke`, form({ token: 'unknown', client_id }))).status).toBe(200);
  });

  it('checks the audience: a token used at another address of the service is refused', async () => {
    const { issued } = await issuedTokens(paid.workspaceId, paid.accessToken);
    const elsewhere = await fetch(mcpUrl.href.replace('127.0.0.1', 'localhost'), {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${issued.access_token}`,
      },
      body: JSON.stringify(listTools),
    });
    expect(elsewhere.status).toBe(401);
    expect(await elsewhere.text()).toMatch(/issued for/);
  });

  it('offers a member’s app no admin-only tool, and offers it once the member is made admin', async () => {
    const member = await stack.addMember(paid.workspaceId, 'member');
    const { issued } = await issuedTokens(paid.workspaceId, member.accessToken, 'write');
    const toolNames = async () =>
      ((await (await mcpPost(issued.access_token, listTools)).json()).result.tools as { name: string }[]).map(
        (t) => t.name,
      );
    const asMember = await toolNames();
    expect(asMember).toContain('createTable');
    expect(asMember).not.toContain('createWebhookEndpoint');
    const refused = await (
      await mcpPost(
        issued.access_token,
        callTool('createWebhookEndpoint', {
          body: { url: 'https://example.com/hook', event_types: ['member.joined'] },
        }),
      )
    ).json();
    expect(refused.error.message).toMatch(/no tool named createWebhookEndpoint/);
    expect(await stack.sql`select 1 from webhook_endpoints where url = 'https://example.com/hook'`).toHaveLength(0);

    await stack.sql`update members set role = 'admin' where workspace_id = ${paid.workspaceId} and idp_user_id = ${member.userId}`;
    expect(await toolNames()).toContain('createWebhookEndpoint');
  });

  it('refuses a member who left the workspace on the next call', async () => {
    const member = await stack.addMember(paid.workspaceId, 'member');
    const { issued } = await issuedTokens(paid.workspaceId, member.accessToken);
    expect((await mcpPost(issued.access_token, listTools)).status).toBe(200);
    await stack.sql`delete from members where workspace_id = ${paid.workspaceId} and idp_user_id = ${member.userId}`;
    expect((await mcpPost(issued.access_token, listTools)).status).toBe(401);
  });
});

describe('registration', () => {
  it('marks a loopback redirect local, takes any port, and refuses plain http elsewhere and fragments', async () => {
    const { client_id } = await register('Local app', ['http://localhost:1/cb']);
    const consentId = await consentIdOf(
      authorizeUrl(client_id, pkce().challenge, { redirect_uri: 'http://localhost:53111/cb' }),
    );
    const read = await stack.app.inject({
      method: 'GET',
      url: `/connected-apps/consent-requests/${consentId}/`,
      headers: withToken(paid.accessToken),
    });
    expect(read.json()).toMatchObject({
      app_name: 'Local app',
      is_local: true,
      recognised: false,
      brand: 'other',
      redirect_host: 'localhost:53111',
    });
    for (const uris of [['http://app.example/cb'], ['https://app.example/cb#x'], ['myapp://cb'], []]) {
      const res = await fetch(`${base}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ redirect_uris: uris }),
      });
      expect(res.status, JSON.stringify(uris)).toBe(400);
    }
    // The longest name (255) and one more; the longest state (2048) and one more.
    const named = (client_name: string) =>
      fetch(`${base}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ client_name, redirect_uris: [redirect] }),
      });
    expect((await named('n'.repeat(255))).status).toBe(201);
    expect((await named('n'.repeat(256))).status).toBe(400);
    const { client_id: stateClient } = await register();
    expect(
      (
        await fetch(authorizeUrl(stateClient, pkce().challenge, { state: 's'.repeat(2048) }), { redirect: 'manual' })
      ).headers.get('location'),
    ).toMatch(/\/oauth\/consent\//);
    const longState = await fetch(authorizeUrl(stateClient, pkce().challenge, { state: 's'.repeat(2049) }), {
      redirect: 'manual',
    });
    expect(new URL(longState.headers.get('location')!).searchParams.get('error')).toBe('invalid_request');
    // The most redirects a client may register (20), and one more.
    const at = await fetch(`${base}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ redirect_uris: Array.from({ length: 20 }, (_, i) => `https://app.example/cb${i}`) }),
    });
    expect(at.status).toBe(201);
    const past = await fetch(`${base}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ redirect_uris: Array.from({ length: 21 }, (_, i) => `https://app.example/cb${i}`) }),
    });
    expect(past.status).toBe(400);
  });

  it('reads a client metadata document, and recognises a known app by its host', async () => {
    const sim = await serveHttp((req, res) => {
      const port = (req.socket.address() as AddressInfo).port;
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          client_id: `http://127.0.0.1:${port}/client.json`,
          client_name: 'Assistant A desktop',
          redirect_uris: [`http://127.0.0.1:${port}/cb`],
        }),
      );
    });
    const reader = stack.integrations.connectedApps;
    const saved = { ...reader };
    const { clientMetadataReader } = await import('../../integrations/connected-apps/client-metadata.js');
    stack.integrations.connectedApps.clientMetadata = clientMetadataReader({ allowPrivateNetworks: true });
    stack.integrations.connectedApps.known = { assistant_a: ['127.0.0.1'] };
    try {
      const clientId = `${sim.url}/client.json`;
      const consentId = await consentIdOf(authorizeUrl(clientId, pkce().challenge, { redirect_uri: `${sim.url}/cb` }));
      const read = await stack.app.inject({
        method: 'GET',
        url: `/connected-apps/consent-requests/${consentId}/`,
        headers: withToken(paid.accessToken),
      });
      expect(read.json()).toMatchObject({ app_name: 'Assistant A desktop', brand: 'assistant_a', recognised: true });
    } finally {
      Object.assign(stack.integrations.connectedApps, saved);
      await sim.close();
    }
  });
});

describe('the consent routes', () => {
  it("lists the person's workspaces with can_write, and takes workspace_id of 1 to 255 characters", async () => {
    const { client_id } = await register();
    const consentId = await consentIdOf(authorizeUrl(client_id, pkce().challenge));
    const read = await stack.app.inject({
      method: 'GET',
      url: `/connected-apps/consent-requests/${consentId}/`,
      headers: withToken(free.accessToken),
    });
    expect(read.statusCode).toBe(200);
    expect(read.json().workspaces).toEqual([
      { workspace_id: free.workspaceId, name: expect.any(String), can_write: false },
    ]);
    const approve = (workspace_id: unknown) =>
      stack.app.inject({
        method: 'POST',
        url: `/connected-apps/consent-requests/${consentId}/approve/`,
        headers: withToken(free.accessToken),
        payload: { workspace_id, access: 'read' },
      });
    expect((await approve('')).statusCode).toBe(422);
    expect((await approve('x'.repeat(256))).statusCode).toBe(422);
    expect((await approve('x')).statusCode).toBe(404);
    expect((await approve('x'.repeat(255))).statusCode).toBe(404);
    expect((await approve(paid.workspaceId)).statusCode).toBe(404);
    const bad = await stack.app.inject({
      method: 'POST',
      url: `/connected-apps/consent-requests/${consentId}/approve/`,
      headers: withToken(free.accessToken),
      payload: { workspace_id: free.workspaceId, access: 'admin' },
    });
    expect(bad.statusCode).toBe(422);
    const ok = await approve(free.workspaceId);
    expect(ok.statusCode).toBe(200);
    expect(new URL(ok.json().redirect_url).searchParams.get('state')).toBe('xyz');
    expect((await approve(free.workspaceId)).statusCode).toBe(409);
  });

  it('denies with access_denied, refuses API keys, and refuses an expired request', async () => {
    const { client_id } = await register();
    const consentId = await consentIdOf(authorizeUrl(client_id, pkce().challenge));
    const byKey = await stack.app.inject({
      method: 'GET',
      url: `/connected-apps/consent-requests/${consentId}/`,
      headers: withKey(paid.apiKey),
    });
    expect(byKey.statusCode).toBe(403);
    const denied = await stack.app.inject({
      method: 'POST',
      url: `/connected-apps/consent-requests/${consentId}/deny/`,
      headers: withToken(paid.accessToken),
    });
    expect(new URL(denied.json().redirect_url).searchParams.get('error')).toBe('access_denied');
    const consent2 = await consentIdOf(authorizeUrl(client_id, pkce().challenge));
    await stack.sql`update oauth_authorization_requests set expires_at = now() - interval '1 second' where id = ${consent2}`;
    const late = await stack.app.inject({
      method: 'GET',
      url: `/connected-apps/consent-requests/${consent2}/`,
      headers: withToken(paid.accessToken),
    });
    expect(late.statusCode).toBe(409);
    expect(late.json().detail).toMatch(/expired/);
  });

  it('lists apps newest first with last_used_at to the minute, and only the connecting member or an admin revokes', async () => {
    const member = await stack.addMember(paid.workspaceId, 'member');
    const other = await stack.addMember(paid.workspaceId, 'member');
    const first = await rawCode(paid.workspaceId, member.accessToken);
    const second = await rawCode(paid.workspaceId, member.accessToken);
    const issued = await (await redeem(second)).json();
    await mcpPost(issued.access_token, listTools);
    await mcpPost(issued.access_token, listTools);
    const list = (
      await stack.app.inject({ method: 'GET', url: '/connected-apps/', headers: withKey(paid.apiKey) })
    ).json().data as {
      id: string;
      user_id: string;
      last_used_at: string | null;
      created_at: string;
      person_email: string;
    }[];
    const mine = list.filter((a) => a.user_id === member.userId);
    expect(mine).toHaveLength(2);
    expect(mine[0]!.created_at >= mine[1]!.created_at).toBe(true);
    await expect
      .poll(async () => {
        const now = (await stack.app.inject({ method: 'GET', url: '/connected-apps/', headers: withKey(paid.apiKey) }))
          .json()
          .data.find((a: { id: string }) => a.id === mine[0]!.id);
        return now.last_used_at;
      })
      .toMatch(/:00(\.000)?Z$/);
    expect(mine[0]!.person_email).toMatch(/@example.com$/);
    void first;
    const byOther = await stack.app.inject({
      method: 'DELETE',
      url: `/connected-apps/${mine[0]!.id}/`,
      headers: withToken(other.accessToken),
    });
    expect(byOther.statusCode).toBe(403);
    const byAdmin = await stack.app.inject({
      method: 'DELETE',
      url: `/connected-apps/${mine[0]!.id}/`,
      headers: withKey(paid.apiKey),
    });
    expect(byAdmin.statusCode).toBe(204);
    expect(
      (
        await stack.app.inject({
          method: 'DELETE',
          url: `/connected-apps/${mine[0]!.id}/`,
          headers: withKey(paid.apiKey),
        })
      ).statusCode,
    ).toBe(404);
  });
});

afterAll(async () => {
  // The stack closes the app (and its listener).
});

describe('racing decisions', () => {
  it('approves a consent request once when two approvals race, leaving one app', async () => {
    const { client_id } = await register('Raced app');
    const consentId = await consentIdOf(authorizeUrl(client_id, pkce().challenge));
    const approve = () =>
      stack.app.inject({
        method: 'POST',
        url: `/connected-apps/consent-requests/${consentId}/approve/`,
        headers: withToken(paid.accessToken),
        payload: { workspace_id: paid.workspaceId, access: 'read' },
      });
    const answers = await Promise.all([approve(), approve(), approve()]);
    expect(answers.map((a) => a.statusCode).sort()).toEqual([200, 409, 409]);
    const apps = (
      await stack.app.inject({ method: 'GET', url: '/connected-apps/', headers: withToken(paid.accessToken) })
    ).json().data;
    expect(apps.filter((a: { app_name: string }) => a.app_name === 'Raced app')).toHaveLength(1);
  });
});

describe('housekeeping', () => {
  it('forgets lapsed access tokens and unapproved requests, keeping what a replay check needs', async () => {
    const { client_id, issued } = await issuedTokens(paid.workspaceId, paid.accessToken);
    const accessHash = createHash('sha256').update(issued.access_token).digest();
    await stack.sql`update oauth_tokens set expires_at = now() - interval '61 minutes' where token_hash = ${accessHash}`;
    const stale = await consentIdOf(authorizeUrl(client_id, pkce().challenge));
    await stack.sql`update oauth_authorization_requests set expires_at = now() - interval '25 hours' where id = ${stale}`;
    const rotated = await (
      await token({ grant_type: 'refresh_token', refresh_token: issued.refresh_token, client_id })
    ).json();
    expect(rotated.access_token).toMatch(/^oat_/);
    expect(await stack.sql`select 1 from oauth_tokens where token_hash = ${accessHash}`).toHaveLength(0);
    await consentIdOf(authorizeUrl(client_id, pkce().challenge));
    expect(await stack.sql`select 1 from oauth_authorization_requests where id = ${stale}`).toHaveLength(0);
    // The spent refresh token is kept: shown again, it still revokes the chain.
    expect((await token({ grant_type: 'refresh_token', refresh_token: issued.refresh_token, client_id })).status).toBe(
      400,
    );
    expect((await mcpPost(rotated.access_token, listTools)).status).toBe(401);
  });
});
