/**
 * A local twin of a Google-Drive-shaped cloud drive, for tests: the OAuth 2.0 authorize and token
 * endpoints (authorization code with PKCE S256, refresh, `invalid_grant` for a revoked grant or a
 * used code) and the subset of Drive API v3 the service reads (`about.get`, `files.get` with
 * `fields`, `alt=media`, `files.export`), with Drive's error shapes (401, 403, 404, 429 with
 * Retry-After). Tests steer it: expire access tokens, revoke the grant, rate-limit the next calls.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { serveHttp, type LocalHttp } from './local-http.js';

export interface DriveSimFile {
  id: string;
  name: string;
  mimeType: string;
  /** The bytes (`alt=media`), or a native document's text (`files.export`). */
  content: string | Buffer;
  /** The account may see the file but not read it (403). */
  forbidden?: boolean;
}

export interface DriveSim {
  url: string;
  http: LocalHttp;
  clientId: string;
  clientSecret: string;
  accountEmail: string;
  files: Map<string, DriveSimFile>;
  /** Every access token issued so far answers 401 from now on. */
  expireAccessTokens(): void;
  /** Every refresh token (and unused code) is revoked: the token endpoint answers invalid_grant. */
  revokeGrants(): void;
  /** The next `count` API calls answer 429 with `Retry-After: seconds`. */
  rateLimitNext(count: number, retryAfterSeconds: number): void;
  /** Access and refresh tokens ever issued (a test checks none is stored or shown). */
  issued: { access: string[]; refresh: string[] };
  /** Counts of token-endpoint grants. */
  grants: { authorization_code: number; refresh_token: number };
  /** Follows an authorize URL as a consenting person would: the redirect back, with `code` and `state`. */
  consent(authorizeUrl: string): Promise<URL>;
  close(): Promise<void>;
}

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8', ...headers });
  res.end(JSON.stringify(body));
};

const driveError = (
  res: ServerResponse,
  code: number,
  status: string,
  message: string,
  reason: string,
  headers: Record<string, string> = {},
) => json(res, code, { error: { code, message, errors: [{ message, domain: 'global', reason }], status } }, headers);

/** `rotateRefreshTokens`: each refresh answers a new refresh token and revokes the one used (as some drives do). */
export async function startDriveSim(
  options: { accessTokenSeconds?: number; accountEmail?: string; rotateRefreshTokens?: boolean } = {},
): Promise<DriveSim> {
  const clientId = `client-${randomBytes(4).toString('hex')}`;
  const clientSecret = randomBytes(12).toString('hex');
  const accountEmail = options.accountEmail ?? 'owner@drive.example';
  const files = new Map<string, DriveSimFile>();
  const codes = new Map<string, { challenge: string; redirectUri: string; used: boolean }>();
  const access = new Map<string, { expired: boolean }>();
  const refresh = new Map<string, { revoked: boolean }>();
  const issued = { access: [] as string[], refresh: [] as string[] };
  const grants = { authorization_code: 0, refresh_token: 0 };
  let limited = { count: 0, retryAfter: 0 };
  const scope = 'https://www.googleapis.com/auth/drive.readonly';

  const issueAccess = () => {
    const token = `ya29.${randomBytes(24).toString('base64url')}`;
    access.set(token, { expired: false });
    issued.access.push(token);
    return token;
  };
  const issueRefresh = () => {
    const token = `1//${randomBytes(24).toString('base64url')}`;
    refresh.set(token, { revoked: false });
    issued.refresh.push(token);
    return token;
  };

  const http = await serveHttp((req, res, body) => {
    handle(req, res, body);
  });

  function handle(req: IncomingMessage, res: ServerResponse, body: string): unknown {
    const url = new URL(req.url ?? '/', 'http://drive.local');
    if (req.method === 'GET' && url.pathname === '/o/oauth2/auth') {
      const q = url.searchParams;
      if (q.get('client_id') !== clientId) return json(res, 400, { error: 'invalid_client' });
      if (q.get('response_type') !== 'code' || q.get('code_challenge_method') !== 'S256' || !q.get('code_challenge'))
        return json(res, 400, { error: 'invalid_request' });
      const redirectUri = q.get('redirect_uri') ?? '';
      const code = `4/${randomBytes(16).toString('base64url')}`;
      codes.set(code, { challenge: q.get('code_challenge')!, redirectUri, used: false });
      const back = new URL(redirectUri);
      back.searchParams.set('code', code);
      back.searchParams.set('state', q.get('state') ?? '');
      back.searchParams.set('scope', scope);
      res.writeHead(302, { location: back.toString() });
      return res.end();
    }
    if (req.method === 'POST' && url.pathname === '/token') {
      const form = new URLSearchParams(body);
      if (form.get('client_id') !== clientId || form.get('client_secret') !== clientSecret)
        return json(res, 401, { error: 'invalid_client', error_description: 'The OAuth client was not found.' });
      if (form.get('grant_type') === 'authorization_code') {
        const entry = codes.get(form.get('code') ?? '');
        if (!entry || entry.used)
          return json(res, 400, { error: 'invalid_grant', error_description: 'Malformed auth code.' });
        entry.used = true;
        if (entry.redirectUri !== form.get('redirect_uri'))
          return json(res, 400, { error: 'redirect_uri_mismatch', error_description: 'Bad Request' });
        const verifier = form.get('code_verifier') ?? '';
        if (createHash('sha256').update(verifier).digest('base64url') !== entry.challenge)
          return json(res, 400, { error: 'invalid_grant', error_description: 'Invalid code verifier.' });
        grants.authorization_code += 1;
        return json(res, 200, {
          access_token: issueAccess(),
          refresh_token: issueRefresh(),
          expires_in: options.accessTokenSeconds ?? 3599,
          scope,
          token_type: 'Bearer',
        });
      }
      if (form.get('grant_type') === 'refresh_token') {
        const entry = refresh.get(form.get('refresh_token') ?? '');
        if (!entry || entry.revoked)
          return json(res, 400, { error: 'invalid_grant', error_description: 'Token has been expired or revoked.' });
        grants.refresh_token += 1;
        if (options.rotateRefreshTokens) entry.revoked = true;
        return json(res, 200, {
          access_token: issueAccess(),
          ...(options.rotateRefreshTokens ? { refresh_token: issueRefresh() } : {}),
          expires_in: options.accessTokenSeconds ?? 3599,
          scope,
          token_type: 'Bearer',
        });
      }
      return json(res, 400, { error: 'unsupported_grant_type' });
    }
    if (req.method === 'GET' && url.pathname.startsWith('/drive/v3/')) {
      const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
      const known = access.get(token);
      if (!known || known.expired)
        return driveError(res, 401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials.', 'authError', {
          'www-authenticate': 'Bearer realm="https://accounts.google.com/"',
        });
      if (limited.count > 0) {
        limited.count -= 1;
        return driveError(res, 429, 'RESOURCE_EXHAUSTED', 'Rate Limit Exceeded', 'rateLimitExceeded', {
          'retry-after': String(limited.retryAfter),
        });
      }
      if (url.pathname === '/drive/v3/about')
        return json(res, 200, { user: { emailAddress: accountEmail, kind: 'drive#user' } });
      const m = /^\/drive\/v3\/files\/([^/]+)(\/export)?$/.exec(url.pathname);
      if (!m) return driveError(res, 404, 'NOT_FOUND', 'Not Found', 'notFound');
      const id = decodeURIComponent(m[1]!);
      const file = files.get(id);
      if (!file) return driveError(res, 404, 'NOT_FOUND', `File not found: ${id}.`, 'notFound');
      const native = file.mimeType.startsWith('application/vnd.google-apps.');
      const content = typeof file.content === 'string' ? Buffer.from(file.content, 'utf8') : file.content;
      if (m[2]) {
        if (file.forbidden)
          return driveError(
            res,
            403,
            'PERMISSION_DENIED',
            'The user does not have sufficient permissions for this file.',
            'insufficientFilePermissions',
          );
        if (!native)
          return driveError(
            res,
            403,
            'PERMISSION_DENIED',
            'Export only supports Docs Editors files.',
            'fileNotExportable',
          );
        const type = url.searchParams.get('mimeType') ?? '';
        res.writeHead(200, { 'content-type': type, 'content-length': String(content.length) });
        return res.end(content);
      }
      if (url.searchParams.get('alt') === 'media') {
        if (file.forbidden)
          return driveError(
            res,
            403,
            'PERMISSION_DENIED',
            'The user does not have sufficient permissions for this file.',
            'insufficientFilePermissions',
          );
        if (native)
          return driveError(
            res,
            403,
            'PERMISSION_DENIED',
            'Only files with binary content can be downloaded. Use Export with Docs Editors files.',
            'fileNotDownloadable',
          );
        res.writeHead(200, { 'content-type': file.mimeType, 'content-length': String(content.length) });
        return res.end(content);
      }
      const all: Record<string, unknown> = {
        kind: 'drive#file',
        id: file.id,
        name: file.name,
        mimeType: file.mimeType,
        webViewLink: `https://docs.example/${native ? 'document' : 'file'}/d/${file.id}/view`,
        ...(native ? {} : { size: String(content.length) }),
      };
      const fields = url.searchParams.get('fields');
      const picked = fields
        ? Object.fromEntries(
            Object.entries(all).filter(([k]) =>
              fields
                .split(',')
                .map((f) => f.trim())
                .includes(k),
            ),
          )
        : { kind: all.kind, id: all.id, name: all.name, mimeType: all.mimeType };
      return json(res, 200, picked);
    }
    return json(res, 404, { error: 'not_found' });
  }

  return {
    url: http.url,
    http,
    clientId,
    clientSecret,
    accountEmail,
    files,
    issued,
    grants,
    expireAccessTokens: () => {
      for (const entry of access.values()) entry.expired = true;
    },
    revokeGrants: () => {
      for (const entry of refresh.values()) entry.revoked = true;
      for (const entry of codes.values()) entry.used = true;
    },
    rateLimitNext: (count, retryAfterSeconds) => {
      limited = { count, retryAfter: retryAfterSeconds };
    },
    async consent(authorizeUrl) {
      const response = await fetch(authorizeUrl, { redirect: 'manual' });
      const location = response.headers.get('location');
      if (response.status !== 302 || !location)
        throw new Error(`The drive's authorize endpoint answered ${response.status}: ${await response.text()}`);
      return new URL(location);
    },
    close: () => http.close(),
  };
}

/** The service's drive settings for this twin (DRIVE_* variables in this form). */
export const driveSimConfig = (sim: DriveSim, redirectUrl = 'http://127.0.0.1:3000/cloud-drive/callback/') => ({
  clientId: sim.clientId,
  clientSecret: sim.clientSecret,
  authUrl: `${sim.url}/o/oauth2/auth`,
  tokenUrl: `${sim.url}/token`,
  apiUrl: sim.url,
  redirectUrl,
  scopes: ['https://www.googleapis.com/auth/drive.readonly'],
});
