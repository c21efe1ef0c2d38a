/**
 * The client side of the local OpenID Connect twin (sim/oidc-provider.ts): the authorization-code
 * flow with PKCE over plain HTTP, as a browser and a public client would run it. Redirects are
 * followed by hand and cookies carried by hand, so every step the provider takes (the interaction,
 * the login, the consent, the code, the token exchange) is a real request to it.
 */
import { createHash, randomBytes } from 'node:crypto';

/** The public client the twin registers; its redirect is never fetched, the code is read from it. */
export const twinClientId = 'oidc-twin-client';
export const twinRedirectUri = 'http://127.0.0.1/oidc-twin/callback';

/** Asked for unless the caller says otherwise: an id token and the API's one scope. */
export const defaultScope = 'openid email profile api';

export interface CodeFlowRequest {
  issuer: string;
  /** The user to sign in as: the twin's login form takes the user id. */
  sub: string;
  /** The resource indicator (RFC 8707) the access token is for. */
  resource: string;
  scope?: string;
}

/** Signs `sub` in at the provider and answers the access token the code exchange gives. */
export async function codeFlowAccessToken(request: CodeFlowRequest): Promise<string> {
  const metadata = await discover(request.issuer);
  const verifier = randomBytes(32).toString('base64url');
  const state = randomBytes(16).toString('base64url');
  const start = new URL(metadata.authorization_endpoint);
  start.search = new URLSearchParams({
    client_id: twinClientId,
    redirect_uri: twinRedirectUri,
    response_type: 'code',
    scope: request.scope ?? defaultScope,
    resource: request.resource,
    state,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
  }).toString();
  const callback = await authorize(new CookieJar(), start, request.sub);
  const code = codeFrom(callback, state, request.issuer);
  return exchangeCode(metadata.token_endpoint, { code, verifier, resource: request.resource });
}

interface ProviderMetadata {
  authorization_endpoint: string;
  token_endpoint: string;
}

async function discover(issuer: string): Promise<ProviderMetadata> {
  const response = await fetch(`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`);
  if (!response.ok) throw new Error(`No OpenID configuration at ${issuer} (${response.status}).`);
  return (await response.json()) as ProviderMetadata;
}

/** Follows the provider's redirects, submitting the login form when one is shown, up to the callback. */
async function authorize(jar: CookieJar, start: URL, sub: string): Promise<URL> {
  let at = start;
  let response = await jar.fetch(at);
  for (let step = 0; step < 12; step++) {
    const location = response.headers.get('location');
    if (response.status >= 300 && response.status < 400 && location) {
      at = new URL(location, at);
      if (at.origin + at.pathname === twinRedirectUri) return at;
      response = await jar.fetch(at);
    } else if (response.ok) {
      ({ at, response } = await submitLogin(jar, at, response, sub));
    } else {
      throw new Error(`The provider answered ${response.status} at ${at.pathname}: ${await response.text()}`);
    }
  }
  throw new Error('The authorization flow did not reach the callback within 12 steps.');
}

/** Posts the user id to the form of the login page the provider showed. */
async function submitLogin(jar: CookieJar, at: URL, page: Response, sub: string) {
  const action = /<form[^>]*\saction="([^"]+)"/i.exec(await page.text())?.[1];
  if (!action) throw new Error(`The page at ${at.pathname} is not a login form.`);
  const target = new URL(action.replaceAll('&amp;', '&'), at);
  const response = await jar.fetch(target, { method: 'POST', body: new URLSearchParams({ sub }) });
  if (response.status >= 400) {
    throw new Error(`The provider refused the login of "${sub}" (${response.status}).`);
  }
  return { at: target, response };
}

/** The code of the callback, once its state and issuer (RFC 9207) are the ones expected. */
function codeFrom(callback: URL, state: string, issuer: string): string {
  const params = callback.searchParams;
  const error = params.get('error');
  if (error) throw new Error(`The provider answered ${error}: ${params.get('error_description') ?? ''}`);
  if (params.get('state') !== state) throw new Error('The callback carries another state.');
  if (params.get('iss') !== null && params.get('iss') !== issuer) throw new Error('The callback names another issuer.');
  const code = params.get('code');
  if (!code) throw new Error('The callback carries no code.');
  return code;
}

async function exchangeCode(
  tokenEndpoint: string,
  grant: { code: string; verifier: string; resource: string },
): Promise<string> {
  const response = await fetch(tokenEndpoint, {
    method: 'POST',
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      client_id: twinClientId,
      redirect_uri: twinRedirectUri,
      code: grant.code,
      code_verifier: grant.verifier,
      resource: grant.resource,
    }),
  });
  const body = (await response.json()) as { access_token?: string; error?: string; error_description?: string };
  if (!response.ok || !body.access_token) {
    throw new Error(
      `The token exchange failed (${response.status}): ${body.error ?? ''} ${body.error_description ?? ''}`,
    );
  }
  return body.access_token;
}

interface Cookie {
  name: string;
  value: string;
  path: string;
}

/** Just enough of a browser's cookie store for one provider: names, values and paths. */
class CookieJar {
  readonly #cookies = new Map<string, Cookie>();

  async fetch(url: URL, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    const cookie = this.#header(url);
    if (cookie) headers.set('cookie', cookie);
    const response = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const line of response.headers.getSetCookie()) this.#store(line);
    return response;
  }

  #header(url: URL): string {
    return [...this.#cookies.values()]
      .filter((c) => url.pathname === c.path || url.pathname.startsWith(c.path.endsWith('/') ? c.path : `${c.path}/`))
      .map((c) => `${c.name}=${c.value}`)
      .join('; ');
  }

  #store(line: string): void {
    const [pair = '', ...attributes] = line.split(';').map((part) => part.trim());
    const split = pair.indexOf('=');
    const name = pair.slice(0, split);
    const value = pair.slice(split + 1);
    const attribute = (key: string) =>
      attributes.find((a) => a.toLowerCase().startsWith(`${key}=`))?.slice(key.length + 1);
    const path = attribute('path') ?? '/';
    const expires = attribute('expires');
    const gone = value === '' || attribute('max-age') === '0' || (expires && Date.parse(expires) <= Date.now());
    const key = `${path} ${name}`;
    if (gone) this.#cookies.delete(key);
    else this.#cookies.set(key, { name, value, path });
  }
}
