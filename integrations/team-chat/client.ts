/**
 * A Slack-shaped team chat: the OAuth v2 install (authorize with `state` and PKCE S256, then
 * `oauth.v2.access`) and the subset of the Web API notifications use: `conversations.list`,
 * `chat.postMessage` (text and Block Kit `blocks`) and `auth.revoke`. Every answer is
 * `{ok: true, …}` or `{ok: false, error}`; a rate limit is HTTP 429 with Retry-After and
 * `error: "ratelimited"`. The base addresses are settings (TEAM_CHAT_*), so tests point the client
 * at the local twin (sim/team-chat-server.ts). Errors never carry a token.
 */
import { textOf } from '../../domain/shared/text.js';

export interface TeamChatConfig {
  clientId: string;
  clientSecret: string | undefined;
  /** Where the person installs the app (Slack: https://slack.com/oauth/v2/authorize). */
  authUrl: string;
  /** The Web API's base (Slack: https://slack.com/api). */
  apiUrl: string;
  /** This service's callback, as registered with the team chat. */
  redirectUrl: string;
  /** Bot scopes asked for. */
  scopes: readonly string[];
}

export interface TeamChatInstall {
  accessToken: string;
  scopes: string[];
  botUserId: string | null;
  teamId: string;
  teamName: string;
}

export interface TeamChatChannel {
  id: string;
  name: string;
  is_private: boolean;
  is_member: boolean;
}

/** The errors a delivery acts on; anything else is `failed` with the team chat's word for it. */
export type TeamChatErrorCode =
  | 'ratelimited'
  | 'channel_not_found'
  | 'not_in_channel'
  | 'token_revoked'
  | 'invalid_auth'
  | 'account_inactive'
  | 'invalid_code'
  | 'failed';

export class TeamChatError extends Error {
  override name = 'TeamChatError';
  constructor(
    readonly code: TeamChatErrorCode,
    message: string,
    readonly retryAfterSeconds: number | null = null,
    readonly status: number | null = null,
  ) {
    super(message);
  }
  /** The token no longer works: only a person connecting again helps. */
  get revoked(): boolean {
    return this.code === 'token_revoked' || this.code === 'invalid_auth' || this.code === 'account_inactive';
  }
}

export interface TeamChatClient {
  readonly config: TeamChatConfig;
  authorizeUrl(params: { state: string; codeChallenge: string }): string;
  exchangeCode(params: { code: string; codeVerifier: string }): Promise<TeamChatInstall>;
  listChannels(token: string, cursor?: string): Promise<{ channels: TeamChatChannel[]; nextCursor: string | null }>;
  postMessage(
    token: string,
    message: { channel: string; text: string; blocks?: unknown[] },
  ): Promise<{ ts: string; channel: string }>;
  revoke(token: string): Promise<void>;
}

const known = new Set<TeamChatErrorCode>([
  'ratelimited',
  'channel_not_found',
  'not_in_channel',
  'token_revoked',
  'invalid_auth',
  'account_inactive',
  'invalid_code',
]);

export function createTeamChatClient(config: TeamChatConfig, options: { timeoutMs?: number } = {}): TeamChatClient {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const api = config.apiUrl.replace(/\/+$/, '');

  async function call(
    method: string,
    init: { token?: string; json?: unknown; form?: Record<string, string> },
  ): Promise<Record<string, unknown>> {
    const headers: Record<string, string> = {};
    let body: string | undefined;
    if (init.token) headers.authorization = `Bearer ${init.token}`;
    if (init.json !== undefined) {
      headers['content-type'] = 'application/json; charset=utf-8';
      body = JSON.stringify(init.json);
    } else if (init.form) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(init.form).toString();
    }
    let response: Response;
    try {
      response = await fetch(`${api}/${method}`, {
        method: 'POST',
        headers,
        body: body ?? null,
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      throw new TeamChatError(
        'failed',
        `The team chat could not be reached (${method}): ${(error as Error).name === 'TimeoutError' ? 'no answer in time' : (error as Error).message}.`,
      );
    }
    const retryAfter = Number(response.headers.get('retry-after'));
    const answer = (await response.json().catch(() => null)) as Record<string, unknown> | null;
    if (response.status === 429) {
      throw new TeamChatError(
        'ratelimited',
        'The team chat is rate limiting this app.',
        Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : 30,
        429,
      );
    }
    if (!answer || typeof answer.ok !== 'boolean')
      throw new TeamChatError(
        'failed',
        `The team chat answered ${response.status} to ${method} without a result.`,
        null,
        response.status,
      );
    if (!answer.ok) {
      const error = typeof answer.error === 'string' ? answer.error : 'unknown_error';
      const code = known.has(error as TeamChatErrorCode) ? (error as TeamChatErrorCode) : 'failed';
      throw new TeamChatError(code, `The team chat refused ${method}: ${error}.`, null, response.status);
    }
    return answer;
  }

  return {
    config,
    authorizeUrl({ state, codeChallenge }) {
      const url = new URL(config.authUrl);
      url.search = new URLSearchParams({
        client_id: config.clientId,
        scope: config.scopes.join(','),
        redirect_uri: config.redirectUrl,
        state,
        code_challenge: codeChallenge,
        code_challenge_method: 'S256',
      }).toString();
      return url.toString();
    },
    async exchangeCode({ code, codeVerifier }) {
      const answer = await call('oauth.v2.access', {
        form: {
          client_id: config.clientId,
          ...(config.clientSecret ? { client_secret: config.clientSecret } : {}),
          code,
          redirect_uri: config.redirectUrl,
          code_verifier: codeVerifier,
        },
      });
      const team = (answer.team ?? {}) as { id?: string; name?: string };
      if (typeof answer.access_token !== 'string' || !team.id)
        throw new TeamChatError('failed', 'The team chat granted no bot token.');
      return {
        accessToken: answer.access_token,
        scopes: typeof answer.scope === 'string' ? answer.scope.split(',').filter(Boolean) : [],
        botUserId: typeof answer.bot_user_id === 'string' ? answer.bot_user_id : null,
        teamId: team.id,
        teamName: team.name ?? '',
      };
    },
    async listChannels(token, cursor) {
      const answer = await call('conversations.list', {
        token,
        form: {
          types: 'public_channel,private_channel',
          exclude_archived: 'true',
          limit: '200',
          ...(cursor ? { cursor } : {}),
        },
      });
      const channels = Array.isArray(answer.channels) ? (answer.channels as Record<string, unknown>[]) : [];
      const next = (answer.response_metadata as { next_cursor?: string } | undefined)?.next_cursor;
      return {
        channels: channels.map((c) => ({
          id: String(c.id),
          name: textOf(c.name),
          is_private: c.is_private === true,
          is_member: c.is_member === true,
        })),
        nextCursor: next ? next : null,
      };
    },
    async postMessage(token, message) {
      const answer = await call('chat.postMessage', { token, json: message });
      return { ts: textOf(answer.ts), channel: textOf(answer.channel ?? message.channel) };
    },
    async revoke(token) {
      await call('auth.revoke', { token, form: {} });
    },
  };
}
