/**
 * The consent page in a real headless browser (Debian's chromium, driven by playwright-core): the
 * app and the redirect host are shown before sign-in, a loopback redirect is warned about, the
 * development sign-in lists the person's workspaces, the access choice is sent, and approving lands
 * on the app's redirect with a code that the token endpoint exchanges for write access. And an MCP
 * client that is a web page of another origin (as the MCP Inspector is) connects with fetch() alone:
 * discovery, registration, the token, initialize and a tool call, which only CORS makes possible.
 *
 * Needs chromium: `apt-get install -y chromium` (what .ci/run does), or CHROMIUM_PATH. Without it
 * the tests are skipped with a title that says so.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBrowserSettings } from '../../integrations/config.js';
import { serveHttp, type LocalHttp } from '../../sim/local-http.js';
import { useTestStack, withToken } from '../support/test-stack.js';

const configured = readBrowserSettings().chromiumPath;
const chromiumPath = configured
  ? existsSync(configured)
    ? configured
    : undefined
  : ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
const needs = 'needs chromium: run `apt-get install -y chromium` or set CHROMIUM_PATH';
if (!chromiumPath)
  console.warn(
    `The consent-page browser test is skipped: it ${needs}${configured ? ` (CHROMIUM_PATH=${configured} does not exist)` : ''}.`,
  );

describe.skipIf(!chromiumPath)(`the consent page in headless chromium (${needs})`, () => {
  const { stack, paid, free } = useTestStack();
  let browser: Browser;
  let app: LocalHttp;
  let base: string;

  beforeAll(async () => {
    await stack.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(stack.app.server.address() as AddressInfo).port}`;
    // The app's redirect: a local page the browser lands on.
    app = await serveHttp((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end('<!doctype html><title>App</title><p>Back in the app.</p>');
    });
    browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: ['--no-sandbox'] });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  async function startConnecting(name: string) {
    const registered = await fetch(`${base}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: name, redirect_uris: [`${app.url}/callback`] }),
    });
    const { client_id } = (await registered.json()) as { client_id: string };
    const verifier = randomBytes(32).toString('base64url');
    const url = new URL(`${base}/oauth/authorize`);
    for (const [k, v] of Object.entries({
      response_type: 'code',
      client_id,
      redirect_uri: `${app.url}/callback`,
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
      resource: `${base}/mcp`,
      state: 'browser-state',
    })) {
      url.searchParams.set(k, v);
    }
    return { client_id, verifier, url };
  }

  it('shows the app and its redirect host, signs in, approves write and lands on the redirect with a code', async () => {
    const { client_id, verifier, url } = await startConnecting('Browser assistant');
    const page = await browser.newPage();
    try {
      await page.goto(url.href);
      expect(new URL(page.url()).pathname).toMatch(/^\/oauth\/consent\//);
      await expect.poll(() => page.locator('#app-name').textContent()).toBe('Browser assistant');
      expect(await page.locator('#redirect-host').textContent()).toBe(new URL(app.url).host);
      expect(await page.locator('#redirect-host').isVisible()).toBe(true);
      expect(await page.locator('#verification').textContent()).toBe('Unverified');
      expect(await page.locator('#local-warning').isVisible()).toBe(true);
      expect(await page.locator('#sign-in').isVisible()).toBe(true);

      await page.locator('#token').fill(paid.accessToken);
      await page.locator('#sign-in-button').click();
      await page.locator(`input[name=workspace][value="${paid.workspaceId}"]`).waitFor();
      expect(await page.locator('#plan-note').isVisible()).toBe(false);
      await page.locator('input[name=access][value=write]').check();
      await Promise.all([page.waitForURL(`${app.url}/callback**`), page.locator('#approve').click()]);

      const landed = new URL(page.url());
      expect(landed.searchParams.get('state')).toBe('browser-state');
      expect(landed.searchParams.get('iss')).toBe(base);
      const code = landed.searchParams.get('code')!;
      const tokens = await fetch(`${base}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code,
          client_id,
          redirect_uri: `${app.url}/callback`,
          code_verifier: verifier,
        }).toString(),
      });
      expect(await tokens.json()).toMatchObject({ scope: 'read write', token_type: 'Bearer' });
      const list = await stack.app.inject({
        method: 'GET',
        url: '/connected-apps/',
        headers: withToken(paid.accessToken),
      });
      expect(list.json().data[0]).toMatchObject({ app_name: 'Browser assistant', access: 'write' });
    } finally {
      await page.close();
    }
  });

  it('lets a page of another origin discover, register, get a token and call a tool over /mcp with fetch()', async () => {
    const redirectUri = `${app.url}/callback`;
    const verifier = randomBytes(32).toString('base64url');
    const page = await browser.newPage();
    try {
      // The client page is served by the app (another port: another origin than the service).
      await page.goto(`${app.url}/client`);
      const found = await page.evaluate(
        async ({ mcp, redirectUri, challenge }) => {
          const json = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
          const unauthorised = await fetch(mcp, {
            method: 'POST',
            headers: json,
            body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'tools/list', params: {} }),
          });
          // Readable only when the service exposes it: where discovery starts.
          const wwwAuthenticate = unauthorised.headers.get('www-authenticate') ?? '';
          const metadataUrl = /resource_metadata="([^"]+)"/.exec(wwwAuthenticate)?.[1] ?? '';
          // As the MCP SDK's client asks: with its protocol header, which takes a preflight.
          const version = { 'MCP-Protocol-Version': '2025-11-25' };
          const resource = (await (await fetch(metadataUrl, { headers: version })).json()) as {
            resource: string;
            authorization_servers: string[];
          };
          const server = (await (
            await fetch(`${resource.authorization_servers[0]}/.well-known/oauth-authorization-server`, {
              headers: version,
            })
          ).json()) as { registration_endpoint: string; authorization_endpoint: string; token_endpoint: string };
          const registered = await fetch(server.registration_endpoint, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              client_name: 'Page of another origin',
              redirect_uris: [redirectUri],
              grant_types: ['authorization_code', 'refresh_token'],
              response_types: ['code'],
              token_endpoint_auth_method: 'none',
            }),
          });
          const client = (await registered.json()) as { client_id: string };
          const authorize = new URL(server.authorization_endpoint);
          for (const [k, v] of Object.entries({
            response_type: 'code',
            client_id: client.client_id,
            redirect_uri: redirectUri,
            code_challenge: challenge,
            code_challenge_method: 'S256',
            resource: resource.resource,
            state: 'page-state',
          })) {
            authorize.searchParams.set(k, v);
          }
          return {
            status: unauthorised.status,
            wwwAuthenticate,
            resource: resource.resource,
            registered: registered.status,
            clientId: client.client_id,
            tokenEndpoint: server.token_endpoint,
            authorizeUrl: authorize.href,
          };
        },
        {
          mcp: `${base}/mcp`,
          redirectUri,
          challenge: createHash('sha256').update(verifier).digest('base64url'),
        },
      );
      expect(found).toMatchObject({ status: 401, resource: `${base}/mcp`, registered: 201 });
      expect(found.wwwAuthenticate).toContain(`resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`);

      // The person's consent, as in the tests above; it lands back on the app's origin.
      await page.goto(found.authorizeUrl);
      await page.locator('#token').fill(paid.accessToken);
      await page.locator('#sign-in-button').click();
      await page.locator(`input[name=workspace][value="${paid.workspaceId}"]`).waitFor();
      await page.locator('input[name=access][value=read]').check();
      await Promise.all([page.waitForURL(`${redirectUri}**`), page.locator('#approve').click()]);
      const code = new URL(page.url()).searchParams.get('code')!;
      expect(new URL(page.url()).origin).toBe(app.url);

      const called = await page.evaluate(
        async ({ mcp, tokenEndpoint, clientId, redirectUri, code, verifier, apiToken, tables }) => {
          const tokens = (await (
            await fetch(tokenEndpoint, {
              method: 'POST',
              headers: { 'content-type': 'application/x-www-form-urlencoded' },
              body: new URLSearchParams({
                grant_type: 'authorization_code',
                code,
                client_id: clientId,
                redirect_uri: redirectUri,
                code_verifier: verifier,
                resource: mcp,
              }).toString(),
            })
          ).json()) as { access_token: string; scope: string };
          const headers: Record<string, string> = {
            authorization: `Bearer ${tokens.access_token}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
          };
          const initialized = await fetch(mcp, {
            method: 'POST',
            headers,
            body: JSON.stringify({
              jsonrpc: '2.0',
              id: 1,
              method: 'initialize',
              params: {
                protocolVersion: '2025-11-25',
                capabilities: {},
                clientInfo: { name: 'page-client', version: '1.0.0' },
              },
            }),
          });
          const init = (await initialized.json()) as {
            result: { protocolVersion: string; serverInfo: { name: string } };
          };
          // A session id, when the server gives one, goes back on every later request (exposed by CORS).
          const sessionId = initialized.headers.get('mcp-session-id');
          if (sessionId) headers['mcp-session-id'] = sessionId;
          headers['mcp-protocol-version'] = init.result.protocolVersion;
          const notified = await fetch(mcp, {
            method: 'POST',
            headers,
            body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
          });
          const call = await fetch(mcp, {
            method: 'POST',
            headers,
            body: JSON.stringify({
              jsonrpc: '2.0',
              id: 2,
              method: 'tools/call',
              params: { name: 'listTables', arguments: {} },
            }),
          });
          const result = (await call.json()) as {
            result: { isError: boolean; structuredContent: { status: number; body: unknown } };
          };
          // The rest of the API stays same-origin: the browser refuses to let this page read it.
          const api = await fetch(tables, { headers: { authorization: `Bearer ${apiToken}` } }).then(
            (r) => `read ${r.status}`,
            (error: Error) => `blocked: ${error.name}`,
          );
          return {
            scope: tokens.scope,
            initialized: initialized.status,
            server: init.result.serverInfo.name,
            notified: notified.status,
            call: call.status,
            result: result.result,
            api,
          };
        },
        {
          mcp: `${base}/mcp`,
          tokenEndpoint: found.tokenEndpoint,
          clientId: found.clientId,
          redirectUri,
          code,
          verifier,
          apiToken: paid.accessToken,
          tables: `${base}/tables/`,
        },
      );
      expect(called).toMatchObject({
        scope: 'read',
        initialized: 200,
        server: 'outreach-workspace',
        notified: 202,
        call: 200,
        result: { isError: false, structuredContent: { status: 200 } },
        api: 'blocked: TypeError',
      });
    } finally {
      await page.close();
    }
  });

  it('says a free workspace only reads, and denying lands on the redirect with access_denied', async () => {
    const { url } = await startConnecting('Denied assistant');
    const page = await browser.newPage();
    try {
      await page.goto(url.href);
      await page.locator('#token').fill(free.accessToken);
      await page.locator('#sign-in-button').click();
      await page.locator(`input[name=workspace][value="${free.workspaceId}"]`).waitFor();
      expect(await page.locator('#plan-note').isVisible()).toBe(true);
      await Promise.all([page.waitForURL(`${app.url}/callback**`), page.locator('#deny').click()]);
      expect(new URL(page.url()).searchParams.get('error')).toBe('access_denied');
    } finally {
      await page.close();
    }
  });
});
