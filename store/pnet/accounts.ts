/** Queries of sender profiles and their pnet account (interface spec: Sender's channel account state). */
import { connectionChecksOf, repliesCheckOf } from './checks.js';
import { createHash, createHmac } from 'node:crypto';
import type { Db, Sql } from '../../db/sql.js';
import { ApiError } from '../../domain/shared/errors.js';
import { defaultLimits, limitMaximums } from '../../domain/pnet/limits.js';
import {
  defaultWorkingHours,
  minActionIntervalBounds,
  type PnetSettingsUpdate,
  type SenderProfile,
} from '../../domain/pnet/sender-profiles.js';
import type { PnetAccount } from '../../domain/pnet/accounts.js';
import { nextLocalMidnight } from '../../domain/shared/zoned-time.js';
import { usageOf, type AccountRow } from './account-rows.js';
import type { StepRow } from './steps.js';
import { sendingStopped } from './agent-sending.js';
import { lineOf, waitOf } from './line.js';
import { serviceSecret } from '../platform/service-secrets.js';
import { recordWorkspaceEvent } from '../notifications/outbox.js';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

interface ProfileRow {
  id: string;
  name: string;
  timezone: string;
  created_at: Date;
  updated_at: Date;
}

const toProfile = (r: ProfileRow): SenderProfile => ({
  id: r.id,
  name: r.name,
  timezone: r.timezone,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
});

export const connectionTokenPrefix = 'opc_';

/** `opc_` + an HMAC of the account id: re-derivable on every read, only its hash is stored. */
export async function connectionToken(sql: Sql, accountId: string, version: number): Promise<string> {
  const secret = await serviceSecret(sql, 'connection_token_secret');
  return `${connectionTokenPrefix}${createHmac('sha256', secret).update(`${accountId}:${version}`).digest('base64url')}`;
}

export const hashConnectionToken = (token: string) => createHash('sha256').update(token).digest();

export async function createSenderProfile(
  sql: Sql,
  workspaceId: string,
  input: { name: string; timezone: string },
): Promise<SenderProfile> {
  const accountId = crypto.randomUUID();
  const token = await connectionToken(sql, accountId, 1);
  try {
    return await sql.begin(async (tx) => {
      const [profile] = await tx<ProfileRow[]>`
        insert into sender_profiles (workspace_id, name, timezone) values (${workspaceId}, ${input.name}, ${input.timezone})
        returning id, name, timezone, created_at, updated_at`;
      await tx`
        insert into pnet_accounts (id, workspace_id, sender_profile_id, working_hours, limits, connection_token_hash, min_action_interval_seconds)
        values (${accountId}, ${workspaceId}, ${profile!.id}, ${tx.json(defaultWorkingHours)}, ${tx.json(defaultLimits)},
                ${hashConnectionToken(token)}, ${minActionIntervalBounds.default})`;
      return toProfile(profile!);
    });
  } catch (error) {
    if ((error as { code?: string }).code === '23505') {
      throw new ApiError('conflict', `A sender profile named "${input.name}" already exists in this workspace.`);
    }
    throw error;
  }
}

export async function listSenderProfiles(db: Db, workspaceId: string): Promise<SenderProfile[]> {
  const rows = await db<ProfileRow[]>`
    select id, name, timezone, created_at, updated_at from sender_profiles where workspace_id = ${workspaceId} order by created_at, id`;
  return rows.map(toProfile);
}

export async function getSenderProfile(db: Db, workspaceId: string, id: string): Promise<SenderProfile | undefined> {
  const [row] = await db<ProfileRow[]>`
    select id, name, timezone, created_at, updated_at from sender_profiles where workspace_id = ${workspaceId} and id = ${id}`;
  return row && toProfile(row);
}

async function accountOfProfile(db: Db, workspaceId: string, profileId: string): Promise<AccountRow | undefined> {
  const [row] = await db<AccountRow[]>`
    select a.*, p.timezone from pnet_accounts a join sender_profiles p on p.id = a.sender_profile_id
    where a.workspace_id = ${workspaceId} and a.sender_profile_id = ${profileId}`;
  return row;
}

function settingsOf(row: AccountRow) {
  return {
    timezone: row.timezone,
    working_hours: row.working_hours,
    min_action_interval_seconds: row.min_action_interval_seconds,
    run_mode: row.run_mode,
    resume_enabled: row.resume_enabled,
    attempts_enabled: row.attempts_enabled,
    limits: { ...defaultLimits, ...row.limits },
    limit_maximums: limitMaximums,
  };
}

export async function getPnetSettings(db: Db, workspaceId: string, profileId: string) {
  const row = await accountOfProfile(db, workspaceId, profileId);
  return row && settingsOf(row);
}

/** Partial update: a field left out keeps its value; limits merge key by key. */
export async function updatePnetSettings(sql: Sql, workspaceId: string, profileId: string, patch: PnetSettingsUpdate) {
  return sql.begin(async (tx) => {
    const row = await accountOfProfile(tx, workspaceId, profileId);
    if (!row) return undefined;
    if (patch.timezone) {
      await tx`update sender_profiles set timezone = ${patch.timezone}, updated_at = now() where id = ${profileId}`;
    }
    await tx`
      update pnet_accounts set
        working_hours = ${tx.json(patch.working_hours ?? row.working_hours)},
        min_action_interval_seconds = ${patch.min_action_interval_seconds ?? row.min_action_interval_seconds},
        run_mode = ${patch.run_mode ?? row.run_mode},
        resume_enabled = ${patch.resume_enabled ?? row.resume_enabled},
        attempts_enabled = ${patch.attempts_enabled ?? row.attempts_enabled},
        limits = ${tx.json({ ...defaultLimits, ...row.limits, ...patch.limits })},
        updated_at = now()
      where id = ${row.id}`;
    return settingsOf((await accountOfProfile(tx, workspaceId, profileId))!);
  });
}

/** A browser reads as active while it checks in; idle after a minute; offline after ten. */
export function presenceOf(lastSeenAt: Date, now: Date): 'active' | 'idle' | 'offline' {
  const age = now.getTime() - lastSeenAt.getTime();
  return age <= 60_000 ? 'active' : age <= 600_000 ? 'idle' : 'offline';
}

/**
 * readSenderPnetAccount: the wrapper and the account. Before a browser connects the account reads
 * `pending` (`disconnected` after a person disconnected it), with the work queued for it and a wait
 * of `not_connected`, so a person sees why nothing runs; the first check-in of an identity connects
 * it.
 */
export async function readPnetWrapper(sql: Sql, workspaceId: string, profileId: string, now = new Date()) {
  const row = await accountOfProfile(sql, workspaceId, profileId);
  if (!row) return undefined;
  const token = await connectionToken(sql, row.id, row.connection_token_version);

  const sessions = await sql<
    { id: string; browser_label: string; extension_version: string; connected_at: Date; last_seen_at: Date }[]
  >`
    select id, browser_label, extension_version, connected_at, last_seen_at from pnet_sessions
    where account_id = ${row.id} order by last_seen_at desc`;
  const presences = sessions.map((s) => presenceOf(s.last_seen_at, now));
  const presence = presences.includes('active') ? 'active' : presences.includes('idle') ? 'idle' : 'offline';
  const limits = { ...defaultLimits, ...row.limits };
  const [line, usage, stopped] = await Promise.all([
    lineOf(sql, row.id),
    usageOf(sql, row, now),
    sendingStopped(sql, row.workspace_id),
  ]);
  const account: PnetAccount = {
    id: row.id,
    sender_profile_id: row.sender_profile_id,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    display_name: row.display_name,
    headline: row.headline,
    photo_url: row.photo_url,
    vanity_name: row.vanity_name,
    member_urn: row.member_urn,
    last_seen_at: iso(row.last_seen_at),
    online: presence === 'active',
    presence,
    status: row.status,
    checkpoint_status: row.checkpoint_status,
    run_mode: row.run_mode,
    effective_run_mode: stopped ? 'manual' : row.run_mode,
    min_action_interval_seconds: row.min_action_interval_seconds,
    approvals_waiting: line.approvals,
    queued_count: line.queued,
    connection_token: token,
    usage,
    usage_resets_at: nextLocalMidnight(now, row.timezone).toISOString(),
    wait: waitOf(row, line, usage, now, stopped),
    sessions: sessions.map((s, i) => ({
      id: s.id,
      browser_label: s.browser_label,
      extension_version: s.extension_version,
      connected_at: s.connected_at.toISOString(),
      last_seen_at: s.last_seen_at.toISOString(),
      presence: presences[i]!,
    })),
    replies_check: repliesCheckOf(row),
    connection_checks: await connectionChecksOf(sql, row, sessions),
    ...limits,
    limit_maximums: limitMaximums,
  };
  return { connected: row.status === 'connected', connection_token: token, account };
}

/**
 * Disconnects the account so another identity can connect: the identity, sessions and lease go,
 * and the connection token is replaced, so the old browsers can no longer check in. Answers the
 * steps still waiting, which were meant for the old sender (the caller ends them `sender_changed`).
 */
export async function disconnectAccount(sql: Sql, workspaceId: string, profileId: string) {
  const row = await accountOfProfile(sql, workspaceId, profileId);
  if (!row) return undefined;
  const token = await connectionToken(sql, row.id, row.connection_token_version + 1);
  return sql.begin(async (tx) => {
    await tx`
      update pnet_accounts set status = 'disconnected', member_urn = null, vanity_name = null, display_name = null, headline = null,
        photo_url = null, connected_at = null, lease_session_id = null, lease_nonce = null, lease_expires_at = null,
        connection_token_version = connection_token_version + 1, connection_token_hash = ${hashConnectionToken(token)}, updated_at = now()
      where id = ${row.id}`;
    await tx`delete from pnet_sessions where account_id = ${row.id}`;
    await recordWorkspaceEvent(tx, {
      workspaceId,
      type: 'account.disconnected',
      payload: { account_id: row.id, sender_profile_id: profileId },
    });
    return tx<StepRow[]>`
      select * from browser_steps where account_id = ${row.id} and status in ('awaiting_approval', 'queued', 'resuming') order by created_at`;
  }) as Promise<StepRow[]>;
}

/** The pnet account of a sender profile. */
export async function accountOfSenderProfile(sql: Db, profileId: string) {
  const [account] = await sql<{ id: string; workspace_id: string }[]>`
    select id, workspace_id from pnet_accounts where sender_profile_id = ${profileId}`;
  return account;
}
