/**
 * A Google-Drive-shaped cloud drive: OAuth 2.0 authorization code with PKCE (S256) and the subset
 * of Drive API v3 the service reads (`about.get`, `files.get` with `fields`, `alt=media`,
 * `files.export`). The base addresses are settings (DRIVE_*_URL), so tests point it at the local
 * twin (sim/drive-server.ts). It never logs, and its errors never carry a token.
 */
import { createHash, randomBytes } from 'node:crypto';

export interface CloudDriveConfig {
  clientId: string;
  clientSecret: string | undefined;
  /** Where the person is sent to consent (Google: https://accounts.google.com/o/oauth2/v2/auth). */
  authUrl: string;
  /** The token endpoint (Google: https://oauth2.googleapis.com/token). */
  tokenUrl: string;
  /** The API's base, before `/drive/v3/` (Google: https://www.googleapis.com). */
  apiUrl: string;
  /** This service's callback, as registered with the provider. */
  redirectUrl: string;
  scopes: readonly string[];
}

/** What the token endpoint granted. `refreshToken` is absent on a refresh that does not rotate it. */
export interface TokenGrant {
  accessToken: string;
  refreshToken: string | undefined;
  /** Seconds from now, when the endpoint says. */
  expiresIn: number | undefined;
  scopes: string[];
}

export interface DriveFileMeta {
  id: string;
  name: string;
  mimeType: string;
  webViewLink: string | null;
  /** Absent for native documents, which have no bytes of their own. */
  size: number | null;
}

export interface DriveContent {
  content: Buffer;
  contentType: string;
}

/**
 * The ways a drive call fails. `unauthorized`: the access token expired or was refused (401);
 * `invalid_grant`: the refresh token or the code was revoked, expired or used (only a person
 * connecting again helps); `too_large`: past the caller's limit.
 */
export type DriveErrorKind =
  'unauthorized' | 'invalid_grant' | 'forbidden' | 'not_found' | 'rate_limited' | 'too_large' | 'failed';

export class DriveError extends Error {
  override name = 'DriveError';
  constructor(
    readonly kind: DriveErrorKind,
    message: string,
    readonly status: number | null = null,
    readonly retryAfterSeconds: number | null = null,
  ) {
    super(message);
  }
}

export interface CloudDriveClient {
  readonly config: CloudDriveConfig;
  authorizeUrl(params: { state: string; codeChallenge: string }): string;
  exchangeCode(params: { code: string; codeVerifier: string }): Promise<TokenGrant>;
  refresh(refreshToken: string): Promise<TokenGrant>;
  /** The account's email address (`about.get` with `fields=user(emailAddress)`), or null when it has none. */
  accountEmail(accessToken: string): Promise<string | null>;
  getFile(accessToken: string, fileId: string): Promise<DriveFileMeta>;
  download(accessToken: string, fileId: string, maxBytes?: number): Promise<DriveContent>;
  exportFile(accessToken: string, fileId: string, mimeType: string, maxBytes?: number): Promise<DriveContent>;
}

/** A PKCE pair: a 43-character verifier (32 random bytes) and its S256 challenge. */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: pkceChallenge(verifier) };
}

export const pkceChallenge = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');

/** How long a 429's Retry-After may be for the client to wait and try once more itself. */
const retryAfterWaitMaxSeconds = 5;
const requestTimeoutMs = 30_000;

function retryAfterOf(response: Response): number | null {
  const raw = response.headers.get('retry-after');
  if (!raw) return null;
  const seconds = Number(raw);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds;
  const at = Date.parse(raw);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** The provider's own words, short, from a Drive or OAuth error body; never echoes a token. */
async function providerMessage(response: Response): Promise<{ error?: string; message?: string }> {
  try {
    const body = (await response.json()) as { error?: unknown; error_description?: unknown };
    if (typeof body.error === 'string')
      return {
        error: body.error,
        message: typeof body.error_description === 'string' ? body.error_description.slice(0, 200) : undefined,
      };
    if (body.error && typeof body.error === 'object') {
      const e = body.error as { message?: unknown; status?: unknown };
      return {
        message: typeof e.message === 'string' ? e.message.slice(0, 200) : undefined,
        error: typeof e.status === 'string' ? e.status : undefined,
      };
    }
  } catch {
    // not JSON
  }
  return {};
}

async function readLimited(response: Response, maxBytes: number | undefined): Promise<Buffer> {
  const declared = Number(response.headers.get('content-length'));
  if (maxBytes !== undefined && Number.isFinite(declared) && declared > maxBytes) {
    await response.body?.cancel();
    throw new DriveError('too_large', `The file is larger than ${maxBytes} bytes.`);
  }
  if (!response.body) return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    total += chunk.byteLength;
    if (maxBytes !== undefined && total > maxBytes) {
      await response.body.cancel().catch(() => {});
      throw new DriveError('too_large', `The file is larger than ${maxBytes} bytes.`);
    }
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks);
}

export function createCloudDriveClient(config: CloudDriveConfig, fetchImpl: typeof fetch = fetch): CloudDriveClient {
  const api = config.apiUrl.replace(/\/+$/, '');

  async function tokenRequest(form: Record<string, string>): Promise<TokenGrant> {
    const body = new URLSearchParams({
      client_id: config.clientId,
      ...(config.clientSecret ? { client_secret: config.clientSecret } : {}),
      ...form,
    });
    let response: Response;
    try {
      response = await fetchImpl(config.tokenUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body,
        signal: AbortSignal.timeout(requestTimeoutMs),
      });
    } catch (error) {
      throw new DriveError('failed', `The drive's token endpoint could not be reached (${(error as Error).name}).`);
    }
    if (!response.ok) {
      const { error, message } = await providerMessage(response);
      if (error === 'invalid_grant')
        throw new DriveError(
          'invalid_grant',
          `The drive refused the grant (invalid_grant${message ? `: ${message}` : ''}).`,
          response.status,
        );
      if (response.status === 429)
        throw new DriveError('rate_limited', 'The drive is limiting token requests.', 429, retryAfterOf(response));
      throw new DriveError(
        'failed',
        `The drive's token endpoint answered ${response.status}${error ? ` (${error})` : ''}.`,
        response.status,
      );
    }
    const grant = (await response.json().catch(() => ({}))) as {
      access_token?: unknown;
      refresh_token?: unknown;
      expires_in?: unknown;
      scope?: unknown;
    };
    if (typeof grant.access_token !== 'string' || grant.access_token === '')
      throw new DriveError('failed', "The drive's token endpoint answered without an access token.");
    return {
      accessToken: grant.access_token,
      refreshToken:
        typeof grant.refresh_token === 'string' && grant.refresh_token !== '' ? grant.refresh_token : undefined,
      expiresIn: typeof grant.expires_in === 'number' ? grant.expires_in : undefined,
      scopes: typeof grant.scope === 'string' ? grant.scope.split(' ').filter(Boolean) : [...config.scopes],
    };
  }

  /** One API call; a 429 whose Retry-After is short is waited out and tried once more. */
  async function apiCall(accessToken: string, path: string, what: string): Promise<Response> {
    for (let attempt = 0; ; attempt += 1) {
      let response: Response;
      try {
        response = await fetchImpl(`${api}${path}`, {
          headers: { authorization: `Bearer ${accessToken}` },
          signal: AbortSignal.timeout(requestTimeoutMs),
        });
      } catch (error) {
        throw new DriveError('failed', `The drive could not be reached (${(error as Error).name}).`);
      }
      if (response.ok) return response;
      const retryAfter = retryAfterOf(response);
      const { message } = await providerMessage(response);
      const said = message ? `: ${message}` : '';
      switch (response.status) {
        case 401:
          throw new DriveError('unauthorized', `The drive refused the access token${said}.`, 401);
        case 403:
          if (/rate ?limit/i.test(message ?? ''))
            throw new DriveError('rate_limited', `The drive is limiting requests${said}.`, 403, retryAfter);
          throw new DriveError('forbidden', `The connected drive account may not read ${what}${said}.`, 403);
        case 404:
          throw new DriveError('not_found', `The connected drive account has no ${what}, or cannot see it.`, 404);
        case 429:
          if (attempt === 0 && retryAfter !== null && retryAfter <= retryAfterWaitMaxSeconds) {
            await response.body?.cancel().catch(() => {});
            await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000));
            continue;
          }
          throw new DriveError(
            'rate_limited',
            `The drive is limiting requests${retryAfter !== null ? `; it asks to wait ${retryAfter} s` : ''}.`,
            429,
            retryAfter,
          );
        default:
          throw new DriveError('failed', `The drive answered ${response.status} for ${what}${said}.`, response.status);
      }
    }
  }

  const fileWhat = (fileId: string) => `file ${fileId}`;

  return {
    config,
    authorizeUrl({ state, codeChallenge }) {
      const url = new URL(config.authUrl);
      url.search = new URLSearchParams({
        client_id: config.clientId,
        redirect_uri: config.redirectUrl,
        response_type: 'code',
        scope: config.scopes.join(' '),
        state,
        code_challenge: codeChallenge,
        code_challenge_method: 'S256',
        // A refresh token on every consent, so a reconnect after a revoked grant gets a fresh one.
        access_type: 'offline',
        prompt: 'consent',
        include_granted_scopes: 'true',
      }).toString();
      return url.toString();
    },
    exchangeCode: ({ code, codeVerifier }) =>
      tokenRequest({
        grant_type: 'authorization_code',
        code,
        code_verifier: codeVerifier,
        redirect_uri: config.redirectUrl,
      }),
    refresh: (refreshToken) => tokenRequest({ grant_type: 'refresh_token', refresh_token: refreshToken }),
    async accountEmail(accessToken) {
      const response = await apiCall(accessToken, '/drive/v3/about?fields=user(emailAddress)', 'account details');
      const body = (await response.json().catch(() => ({}))) as { user?: { emailAddress?: unknown } };
      return typeof body.user?.emailAddress === 'string' ? body.user.emailAddress : null;
    },
    async getFile(accessToken, fileId) {
      const fields = 'id,name,mimeType,webViewLink,size';
      const response = await apiCall(
        accessToken,
        `/drive/v3/files/${encodeURIComponent(fileId)}?fields=${encodeURIComponent(fields)}&supportsAllDrives=true`,
        fileWhat(fileId),
      );
      const body = (await response.json().catch(() => ({}))) as Record<string, unknown>;
      if (typeof body.id !== 'string' || typeof body.mimeType !== 'string')
        throw new DriveError('failed', `The drive answered file ${fileId} without its id or type.`);
      const size = body.size === undefined ? null : Number(body.size);
      return {
        id: body.id,
        name: typeof body.name === 'string' ? body.name : body.id,
        mimeType: body.mimeType,
        webViewLink: typeof body.webViewLink === 'string' ? body.webViewLink : null,
        size: size !== null && Number.isFinite(size) ? size : null,
      };
    },
    async download(accessToken, fileId, maxBytes) {
      const response = await apiCall(
        accessToken,
        `/drive/v3/files/${encodeURIComponent(fileId)}?alt=media&supportsAllDrives=true`,
        fileWhat(fileId),
      );
      return {
        content: await readLimited(response, maxBytes),
        contentType: response.headers.get('content-type') ?? 'application/octet-stream',
      };
    },
    async exportFile(accessToken, fileId, mimeType, maxBytes) {
      const response = await apiCall(
        accessToken,
        `/drive/v3/files/${encodeURIComponent(fileId)}/export?mimeType=${encodeURIComponent(mimeType)}`,
        fileWhat(fileId),
      );
      return {
        content: await readLimited(response, maxBytes),
        contentType: response.headers.get('content-type') ?? mimeType,
      };
    },
  };
}

/** The export type of a native document (Google Docs and the like), null when it is not one, `false` when it has no text form. */
export function nativeExportType(mimeType: string): string | null | false {
  if (!mimeType.startsWith('application/vnd.google-apps.')) return null;
  switch (mimeType) {
    case 'application/vnd.google-apps.document':
    case 'application/vnd.google-apps.presentation':
      return 'text/plain';
    case 'application/vnd.google-apps.spreadsheet':
      return 'text/csv';
    default:
      return false;
  }
}
