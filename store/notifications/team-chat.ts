/**
 * The team-chat connection (one per workspace) and its pending OAuth authorizations. The bot token
 * and PKCE verifiers arrive here already sealed (integrations/secrets/sealed.ts).
 */
import type { Db } from '../../db/sql.js';

export interface TeamChatConnectionRow {
  workspace_id: string;
  team_id: string;
  team_name: string;
  bot_user_id: string | null;
  bot_token_sealed: string;
  scopes: string[];
  status: 'connected' | 'reconnect_required';
  last_error: string | null;
  connected_by: string | null;
  connected_at: Date;
}

export async function teamChatConnection(db: Db, workspaceId: string): Promise<TeamChatConnectionRow | undefined> {
  const [row] = await db<
    TeamChatConnectionRow[]
  >`select * from team_chat_connections where workspace_id = ${workspaceId}`;
  return row;
}

export async function saveTeamChatConnection(
  db: Db,
  c: {
    workspaceId: string;
    teamId: string;
    teamName: string;
    botUserId: string | null;
    tokenSealed: string;
    scopes: string[];
    connectedBy: string | null;
  },
): Promise<TeamChatConnectionRow> {
  const [row] = await db<TeamChatConnectionRow[]>`
    insert into team_chat_connections (workspace_id, team_id, team_name, bot_user_id, bot_token_sealed, scopes, connected_by)
    values (${c.workspaceId}, ${c.teamId}, ${c.teamName}, ${c.botUserId}, ${c.tokenSealed}, ${c.scopes}, ${c.connectedBy})
    on conflict (workspace_id) do update set team_id = excluded.team_id, team_name = excluded.team_name, bot_user_id = excluded.bot_user_id,
      bot_token_sealed = excluded.bot_token_sealed, scopes = excluded.scopes, connected_by = excluded.connected_by,
      connected_at = now(), status = 'connected', last_error = null, updated_at = now()
    returning *`;
  return row!;
}

/** The token was revoked: only connecting again helps. Guarded by the token it failed with. */
export async function markTeamChatRevoked(
  db: Db,
  workspaceId: string,
  tokenSealed: string,
  error: string,
): Promise<void> {
  await db`
    update team_chat_connections set status = 'reconnect_required', last_error = ${error}, updated_at = now()
    where workspace_id = ${workspaceId} and bot_token_sealed = ${tokenSealed}`;
}

/** Deletes the connection; rules keep their channels. Answers the deleted row (its token, to revoke). */
export async function deleteTeamChatConnection(
  db: Db,
  workspaceId: string,
): Promise<TeamChatConnectionRow | undefined> {
  const [row] = await db<
    TeamChatConnectionRow[]
  >`delete from team_chat_connections where workspace_id = ${workspaceId} returning *`;
  return row;
}

export async function insertTeamChatAuthorization(
  db: Db,
  a: { stateHash: Buffer; workspaceId: string; memberId: string | null; verifierSealed: string; ttlSeconds: number },
) {
  await db`delete from team_chat_authorizations where expires_at < now()`;
  await db`
    insert into team_chat_authorizations (state_hash, workspace_id, member_id, code_verifier_sealed, expires_at)
    values (${a.stateHash}, ${a.workspaceId}, ${a.memberId}, ${a.verifierSealed}, now() + ${a.ttlSeconds}::int * interval '1 second')`;
}

/** Takes the authorization once (deleted as it is read); undefined when unknown, used or expired. */
export async function takeTeamChatAuthorization(db: Db, stateHash: Buffer) {
  const [row] = await db<{ workspace_id: string; member_id: string | null; code_verifier_sealed: string }[]>`
    delete from team_chat_authorizations where state_hash = ${stateHash} and expires_at > now()
    returning workspace_id, member_id, code_verifier_sealed`;
  return row;
}
