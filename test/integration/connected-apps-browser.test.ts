/**
 * The consent page in a real headless browser (Debian's chromium, driven by playwright-core): the
 * app and the redirect host are shown before sign-in, a loopback redirect is warned about, the
 * development sign-in lists the person's workspaces, the access choice is sent, and approving lands
 * on the app's redirect with a code that the token endpoint exchanges for write access.
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
