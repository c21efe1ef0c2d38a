/**
 * A local twin of a Slack-shaped team chat, for tests and the benchmark: the OAuth v2 authorize
 * page (redirecting back with `code` and `state`) and `oauth.v2.access` (PKCE S256 checked,
 * `invalid_code` for a used or unknown code), and the Web API methods notifications use:
 * `conversations.list` (cursor paging), `chat.postMessage` (text and blocks), `auth.revoke`. Every
 * answer is HTTP 200 `{ok: true, …}` or `{ok: false, error}` as Slack answers, except a rate limit:
 * HTTP 429 with `Retry-After` and `{ok: false, error: "ratelimited"}`. Tests steer it: revoke the
 * token, rate-limit the next calls, leave the bot out of a channel, fail a share of posts.
 */
import { createHash, randomBytes } from 'node:crypto';
import { textOf } from '../domain/shared/text.js';
import type { ServerResponse } from 'node:http';
import { serveHttp, type LocalHttp } from './local-http.js';

export interface TeamChatSimChannel {
  id: string;
  name: string;
  is_private: boolean;
  /** Whether the bot is in it: a post to a channel it is not in is `not_in_channel`. */
  is_member: boolean;
}

export interface TeamChatSimPost {
  channel: string;
  text: string;
  blocks: unknown[] | undefined;
  ts: string;
  token: string;
}

export interface TeamChatSim {
  url: string;
  apiUrl: string;
  authUrl: string;
  http: LocalHttp;
  clientId: string;
  clientSecret: string;
  teamId: string;
  channels: TeamChatSimChannel[];
  posts: TeamChatSimPost[];
  /** Bot tokens issued so far (a test checks none is stored or shown). */
  issued: string[];
  /** Every token issued so far answers `token_revoked`. */
  revokeTokens(): void;
  /** The next `count` Web API calls answer 429 with `Retry-After: seconds`. */
  rateLimitNext(count: number, retryAfterSeconds: number): void;
  /** Follows an authorize URL as a consenting person would: the redirect back, with `code` and `state`. */
  consent(authorizeUrl: string): Promise<URL>;
  close(): Promise<void>;
}

const reply = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
  res.end(JSON.stringify(body));
};

export async function startTeamChatSim(
  options: { channels?: TeamChatSimChannel[]; pageSize?: number; failRate?: number; random?: () => number } = {},
): Promise<TeamChatSim> {
  const clientId = `${randomBytes(4).toString('hex')}.${randomBytes(4).toString('hex')}`;
  const clientSecret = randomBytes(12).toString('hex');
  const teamId = `T${randomBytes(4).toString('hex').toUpperCase()}`;
  const channels: TeamChatSimChannel[] = options.channels ?? [
    { id: 'C0GENERAL', name: 'general', is_private: false, is_member: true },
    { id: 'C0ALERTS', name: 'alerts', is_private: false, is_member: true },
    { id: 'C0QUIET', name: 'quiet', is_private: false, is_member: false },
    { id: 'G0PRIVATE', name: 'leadership', is_private: true, is_member: true },
  ];
  const pageSize = options.pageSize ?? 2;
  const random = options.random ?? Math.random;
  const codes = new Map<string, { challenge: string; redirectUri: string; used: boolean }>();
  const tokens = new Map<string, { revoked: boolean }>();
  const posts: TeamChatSimPost[] = [];
  let limited = { count: 0, seconds: 0 };
  let ts = 1_700_000_000;

  const http = await serveHttp((req, res, body) => {
    const url = new URL(req.url ?? '/', 'http://sim');
    if (url.pathname === '/oauth/v2/authorize') {
      const redirect = url.searchParams.get('redirect_uri');
      if (
        url.searchParams.get('client_id') !== clientId ||
        !redirect ||
        url.searchParams.get('code_challenge_method') !== 'S256'
      ) {
        return reply(res, 400, { ok: false, error: 'invalid_request' });
      }
      const code = randomBytes(12).toString('hex');
      codes.set(code, { challenge: url.searchParams.get('code_challenge') ?? '', redirectUri: redirect, used: false });
      const back = new URL(redirect);
      back.searchParams.set('code', code);
      back.searchParams.set('state', url.searchParams.get('state') ?? '');
      res.writeHead(302, { location: back.toString() }).end();
      return;
    }
    if (!url.pathname.startsWith('/api/')) return reply(res, 404, { ok: false, error: 'unknown_method' });
    const method = url.pathname.slice('/api/'.length);
    const contentType = String(req.headers['content-type'] ?? '');
    const params: Record<string, unknown> = contentType.startsWith('application/json')
      ? (JSON.parse(body || '{}') as Record<string, unknown>)
      : Object.fromEntries(new URLSearchParams(body));

    if (method === 'oauth.v2.access') {
      const code = codes.get(textOf(params.code));
      if (
        params.client_id !== clientId ||
        (params.client_secret !== undefined && params.client_secret !== clientSecret)
      )
        return reply(res, 200, { ok: false, error: 'invalid_client_id' });
      if (!code || code.used) return reply(res, 200, { ok: false, error: 'invalid_code' });
      const challenge = createHash('sha256').update(textOf(params.code_verifier)).digest('base64url');
      if (challenge !== code.challenge || params.redirect_uri !== code.redirectUri)
        return reply(res, 200, { ok: false, error: 'invalid_code' });
      code.used = true;
      const token = `xoxb-${randomBytes(16).toString('hex')}`;
      tokens.set(token, { revoked: false });
      return reply(res, 200, {
        ok: true,
        access_token: token,
        token_type: 'bot',
        scope: 'chat:write,channels:read,groups:read',
        bot_user_id: 'U0BOT',
        app_id: 'A0APP',
        team: { id: teamId, name: 'Local Team' },
      });
    }

    if (limited.count > 0) {
      limited.count -= 1;
      return reply(res, 429, { ok: false, error: 'ratelimited' }, { 'retry-after': String(limited.seconds) });
    }
    const token = String(req.headers.authorization ?? '').replace(/^Bearer /, '');
    const known = tokens.get(token);
    if (!known) return reply(res, 200, { ok: false, error: 'invalid_auth' });
    if (known.revoked) return reply(res, 200, { ok: false, error: 'token_revoked' });

    if (method === 'auth.revoke') {
      known.revoked = true;
      return reply(res, 200, { ok: true, revoked: true });
    }
    if (method === 'conversations.list') {
      const start = Number(Buffer.from(textOf(params.cursor), 'base64').toString() || '0');
      const page = channels.slice(start, start + pageSize);
      const next = start + pageSize < channels.length ? Buffer.from(String(start + pageSize)).toString('base64') : '';
      return reply(res, 200, { ok: true, channels: page, response_metadata: { next_cursor: next } });
    }
    if (method === 'chat.postMessage') {
      const channel = channels.find((c) => c.id === params.channel);
      if (!channel) return reply(res, 200, { ok: false, error: 'channel_not_found' });
      if (!channel.is_member) return reply(res, 200, { ok: false, error: 'not_in_channel' });
      if (typeof params.text !== 'string' && !Array.isArray(params.blocks))
        return reply(res, 200, { ok: false, error: 'no_text' });
      if (options.failRate && random() < options.failRate)
        return reply(res, 500, { ok: false, error: 'internal_error' });
      ts += 1;
      const post = {
        channel: channel.id,
        text: textOf(params.text),
        blocks: params.blocks as unknown[] | undefined,
        ts: `${ts}.000100`,
        token,
      };
      posts.push(post);
      return reply(res, 200, {
        ok: true,
        channel: channel.id,
        ts: post.ts,
        message: { text: post.text, bot_id: 'B0BOT' },
      });
    }
    return reply(res, 200, { ok: false, error: 'unknown_method' });
  });

  return {
    url: http.url,
    apiUrl: `${http.url}/api`,
    authUrl: `${http.url}/oauth/v2/authorize`,
    http,
    clientId,
    clientSecret,
    teamId,
    channels,
    posts,
    get issued() {
      return [...tokens.keys()];
    },
    revokeTokens() {
      for (const t of tokens.values()) t.revoked = true;
    },
    rateLimitNext(count, seconds) {
      limited = { count, seconds };
    },
    async consent(authorizeUrl) {
      const response = await fetch(authorizeUrl, { redirect: 'manual' });
      return new URL(response.headers.get('location') ?? '');
    },
    close: () => http.close(),
  };
}
