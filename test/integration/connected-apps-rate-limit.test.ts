/**
 * The MCP endpoint's rate limit is per app: at the limit a call passes, past it 429 with Retry-After,
 * another app of the same member is not held back, and the bucket refills with the clock.
 */
import { createHash, randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { useTestStack, withToken } from '../support/test-stack.js';

let clock = Date.parse('2026-01-01T00:00:00Z');
const { stack, paid } = useTestStack({ rateLimit: 3, now: () => clock });
const redirect = 'https://app.example/callback';

/** An access token of a new app of the paid workspace's admin (each setup call a minute apart, so the person's own limit never bites). */
async function appToken(): Promise<string> {
  const step = async <T>(run: () => Promise<T>) => {
    clock += 60_000;
    return run();
  };
  const { client_id } = (
    await step(() =>
      stack.app.inject({ method: 'POST', url: '/oauth/register', payload: { redirect_uris: [redirect] } }),
    )
  ).json();
  const verifier = randomBytes(32).toString('base64url');
  const resource = 'http://localhost:80/mcp';
  const authorize = await stack.app.inject({
    method: 'GET',
    url: `/oauth/authorize?${new URLSearchParams({ response_type: 'code', client_id, redirect_uri: redirect, code_challenge: createHash('sha256').update(verifier).digest('base64url'), code_challenge_method: 'S256', resource })}`,
  });
  const consentId = String(authorize.headers.location).split('/').pop()!;
  const approved = await step(() =>
    stack.app.inject({
      method: 'POST',
      url: `/connected-apps/consent-requests/${consentId}/approve/`,
      headers: withToken(paid.accessToken),
      payload: { workspace_id: paid.workspaceId, access: 'read' },
    }),
  );
  const code = new URL(approved.json().redirect_url).searchParams.get('code')!;
  const tokens = await step(() =>
    stack.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({
        grant_type: 'authorization_code',
        code,
        client_id,
        redirect_uri: redirect,
        code_verifier: verifier,
      }).toString(),
    }),
  );
  return tokens.json().access_token;
}

const list = (token: string) =>
  stack.app.inject({
    method: 'POST',
    url: '/mcp',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    payload: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
  });

it('lets an app make 3 calls a minute, refuses the 4th, not another app, and refills', async () => {
  const first = await appToken();
  const second = await appToken();
  clock += 60_000;
  for (let i = 1; i <= 3; i += 1) expect((await list(first)).statusCode, `call ${i}`).toBe(200);
  const past = await list(first);
  expect(past.statusCode).toBe(429);
  expect(past.headers['retry-after']).toBe('20');
  expect(past.json().detail).toMatch(/Too many calls from this app/);
  expect((await list(second)).statusCode).toBe(200);
  clock += 20_000;
  expect((await list(first)).statusCode).toBe(200);
  expect((await list(first)).statusCode).toBe(429);
});

it('limits registration and the token endpoint per client address: 3 a minute, the 4th is slow_down', async () => {
  clock += 60_000;
  const register = () =>
    stack.app.inject({ method: 'POST', url: '/oauth/register', payload: { redirect_uris: [redirect] } });
  for (let i = 1; i <= 3; i += 1) expect((await register()).statusCode, `registration ${i}`).toBe(201);
  const past = await register();
  expect(past.statusCode).toBe(429);
  expect(past.json()).toMatchObject({ error: 'slow_down' });
  expect(past.headers['retry-after']).toBe('20');
  // Discovery is not limited.
  expect((await stack.app.inject({ method: 'GET', url: '/.well-known/oauth-authorization-server' })).statusCode).toBe(
    200,
  );
});
