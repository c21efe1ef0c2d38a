/**
 * The team-chat connection (decision 039): connect (OAuth v2 with state and PKCE S256), the
 * callback, the state, its channels, and disconnect (`disconnectTeamChat`). The bot token is sealed
 * before it reaches the store and opened only here and by a delivery, for one call.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import { pkcePair } from '../../integrations/cloud-drive/drive-client.js';
import { seal, SealedSecretError, unseal } from '../../integrations/secrets/sealed.js';
import { TeamChatError, type TeamChatChannel, type TeamChatClient } from '../../integrations/team-chat/client.js';
import { ApiError, ValidationRefusal } from '../../domain/shared/errors.js';
import { countTeamChatRules } from '../../store/notifications/rules.js';
import {
  deleteTeamChatConnection,
  insertTeamChatAuthorization,
  markTeamChatRevoked,
  saveTeamChatConnection,
  takeTeamChatAuthorization,
  teamChatConnection,
  type TeamChatConnectionRow,
} from '../../store/notifications/team-chat.js';
import { secretsKeyring } from '../platform/sealing.js';
import { sealingContext } from './delivery.js';

type ChatIntegrations = Pick<Integrations, 'notifications' | 'secretsKeys'>;
export const authorizationMinutes = 10;
const stateHashOf = (state: string) => createHash('sha256').update(state).digest();
const refuse = (loc: string[], msg: string, input: unknown) =>
  new ValidationRefusal([{ loc, msg, type: 'value_error', input }]);

export function teamChatClientOf(integrations: Pick<Integrations, 'notifications'>): TeamChatClient {
  const client = integrations.notifications.teamChat;
  if ('missing' in client)
    throw new ApiError(
      'unavailable',
      `The team chat is not configured: set ${client.missing.join(' and ')} (see the README's configuration table).`,
    );
  return client;
}

export function teamChatStateOf(row: TeamChatConnectionRow | undefined) {
  if (!row)
    return {
      connected: false,
      team_id: null,
      team_name: null,
      scopes: [],
      status: null,
      last_error: null,
      connected_at: null,
    };
  return {
    connected: true,
    team_id: row.team_id,
    team_name: row.team_name,
    scopes: row.scopes,
    status: row.status,
    last_error: row.last_error,
    connected_at: row.connected_at.toISOString(),
  };
}

export async function startTeamChatConnect(
  sql: Sql,
  integrations: ChatIntegrations,
  workspaceId: string,
  memberId: string | null,
) {
  const client = teamChatClientOf(integrations);
  const state = randomBytes(32).toString('base64url');
  const { verifier, challenge } = pkcePair();
  const keyring = await secretsKeyring(sql, integrations);
  await insertTeamChatAuthorization(sql, {
    stateHash: stateHashOf(state),
    workspaceId,
    memberId,
    verifierSealed: seal(keyring, verifier, sealingContext.verifier(workspaceId)),
    ttlSeconds: authorizationMinutes * 60,
  });
  return {
    authorize_url: client.authorizeUrl({ state, codeChallenge: challenge }),
    expires_at: new Date(Date.now() + authorizationMinutes * 60_000).toISOString(),
  };
}

export async function completeTeamChatConnect(
  sql: Sql,
  integrations: ChatIntegrations,
  query: { code?: string | undefined; state?: string | undefined; error?: string | undefined },
) {
  const client = teamChatClientOf(integrations);
  if (!query.state)
    throw refuse(['query', 'state'], 'is missing: start again with POST /notifications/chatapp/connect/', null);
  const pending = await takeTeamChatAuthorization(sql, stateHashOf(query.state));
  if (!pending)
    throw refuse(
      ['query', 'state'],
      'is unknown, used or expired: start again with POST /notifications/chatapp/connect/',
      query.state,
    );
  if (query.error)
    throw refuse(['query', 'error'], `the team chat did not grant access (${query.error.slice(0, 64)})`, query.error);
  if (!query.code)
    throw refuse(['query', 'code'], 'is missing: start again with POST /notifications/chatapp/connect/', null);
  const keyring = await secretsKeyring(sql, integrations);
  const verifier = unseal(keyring, pending.code_verifier_sealed, sealingContext.verifier(pending.workspace_id));
  let install;
  try {
    install = await client.exchangeCode({ code: query.code, codeVerifier: verifier });
  } catch (error) {
    if (error instanceof TeamChatError && error.code === 'invalid_code')
      throw refuse(['query', 'code'], 'was refused by the team chat (expired or used): start again', query.code);
    if (error instanceof TeamChatError)
      throw new ApiError('bad_gateway', `The team chat could not complete the connection: ${error.message}`);
    throw error;
  }
  const row = await saveTeamChatConnection(sql, {
    workspaceId: pending.workspace_id,
    teamId: install.teamId,
    teamName: install.teamName,
    botUserId: install.botUserId,
    tokenSealed: seal(keyring, install.accessToken, sealingContext.botToken(pending.workspace_id)),
    scopes: install.scopes,
    connectedBy: pending.member_id,
  });
  return { row, rules: await countTeamChatRules(sql, pending.workspace_id) };
}

/** Every channel the bot can see (conversations.list, every page). A revoked token marks the connection and is 409. */
export async function listTeamChatChannels(
  sql: Sql,
  integrations: ChatIntegrations,
  workspaceId: string,
): Promise<TeamChatChannel[]> {
  const client = teamChatClientOf(integrations);
  const row = await teamChatConnection(sql, workspaceId);
  if (!row)
    throw new ApiError('conflict', 'No team chat is connected: connect one with POST /notifications/chatapp/connect/.');
  let token: string;
  try {
    token = unseal(await secretsKeyring(sql, integrations), row.bot_token_sealed, sealingContext.botToken(workspaceId));
  } catch (error) {
    if (error instanceof SealedSecretError)
      throw new ApiError('conflict', 'The stored team-chat token cannot be opened: connect again.');
    throw error;
  }
  const channels: TeamChatChannel[] = [];
  let cursor: string | undefined;
  try {
    for (let page = 0; page < 50; page += 1) {
      const answer = await client.listChannels(token, cursor);
      channels.push(...answer.channels);
      if (!answer.nextCursor) break;
      cursor = answer.nextCursor;
    }
  } catch (error) {
    if (!(error instanceof TeamChatError)) throw error;
    if (error.revoked) {
      await markTeamChatRevoked(sql, workspaceId, row.bot_token_sealed, error.message);
      throw new ApiError('conflict', 'The team chat revoked this connection: connect again.');
    }
    if (error.code === 'ratelimited')
      throw new ApiError('rate_limited', 'The team chat is rate limiting this app; try again shortly.', {
        'retry-after': String(error.retryAfterSeconds ?? 30),
      });
    throw new ApiError('bad_gateway', `The team chat could not list channels: ${error.message}`);
  }
  return channels;
}

/**
 * Disconnects: the connection and its token are deleted (and the token revoked with the team chat,
 * best effort); every rule keeps its channel. Answers how many team-chat rules keep their channel.
 */
export async function disconnectTeamChat(
  sql: Sql,
  integrations: ChatIntegrations,
  workspaceId: string,
): Promise<{ connected: boolean; count: number }> {
  const row = await deleteTeamChatConnection(sql, workspaceId);
  const count = await countTeamChatRules(sql, workspaceId);
  const client = integrations.notifications.teamChat;
  if (row && !('missing' in client)) {
    try {
      await client.revoke(
        unseal(await secretsKeyring(sql, integrations), row.bot_token_sealed, sealingContext.botToken(workspaceId)),
      );
    } catch {
      // The token is gone from here either way; the team chat's own revoke is a courtesy.
    }
  }
  return { connected: Boolean(row), count };
}
