/**
 * The account's own checks, written when a housekeeping read settles and read by
 * readSenderPnetAccount: the inbox read (a failing one holds messages back, since a reply may have
 * come in unseen) and the connections read (who accepted, and stretches two reads did not overlap).
 */
import type { Db } from '../../db/sql.js';
import type { PnetAccount } from '../../domain/pnet/accounts.js';
import type { AccountRow } from './account-rows.js';
import type { SettleReport } from '../../domain/pnet/agent.js';
import type { StepRow } from './steps.js';
import { recordWorkspaceEvent } from '../notifications/outbox.js';

/** Builds older than this cannot read the connections list newest first. */
export const minConnectionCheckVersion = '1.4.0';

function versionAtLeast(version: string, minimum: string): boolean {
  const parts = (v: string) =>
    v
      .split(/[.+-]/)
      .slice(0, 3)
      .map((p) => Number.parseInt(p, 10) || 0);
  const [a, b] = [parts(version), parts(minimum)];
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) > (b[i] ?? 0);
  return true;
}

const urnsOf = (outcome: Record<string, unknown> | null): string[] =>
  Array.isArray(outcome?.member_urns)
    ? (outcome.member_urns as unknown[]).filter((u): u is string => typeof u === 'string')
    : [];

/** Called in the settling transaction of a housekeeping read. */
export async function recordCheck(tx: Db, step: StepRow, report: SettleReport): Promise<void> {
  if (step.kind === 'check_inbox' && report.status !== 'skipped') {
    const ok = report.status === 'succeeded';
    await tx`
      update pnet_accounts set replies_failing = ${!ok},
        replies_last_read_at = ${ok ? tx`now()` : tx`replies_last_read_at`}, updated_at = now()
      where id = ${step.account_id}`;
  }
  if (step.kind === 'check_connections' && report.status === 'succeeded') {
    const urns = urnsOf(report.outcome);
    const [previous] = await tx<{ finished_at: Date; outcome: Record<string, unknown> | null }[]>`
      select finished_at, outcome from browser_steps
      where account_id = ${step.account_id} and kind = 'check_connections' and status = 'succeeded' and id <> ${step.id}
        and jsonb_array_length(coalesce(outcome->'member_urns', '[]'::jsonb)) > 0
      order by finished_at desc limit 1`;
    const before = new Set(urnsOf(previous?.outcome ?? null));
    // The read is the first batch, newest first: if none of the last read's members is in it,
    // more people accepted in between than one batch shows and some may have been missed.
    if (previous && urns.length > 0 && !urns.some((u) => before.has(u))) {
      await tx`
        insert into pnet_connection_gaps (account_id, started_at, ended_at, problem)
        values (${step.account_id}, ${previous.finished_at}, now(), 'no_overlap')`;
    }
    if (urns.length > 0) {
      const added = await tx<{ member_urn: string }[]>`
        insert into pnet_connections (account_id, member_urn)
        select ${step.account_id}, unnest(${urns}::text[]) on conflict do nothing returning member_urn`;
      await recordInvitationsAccepted(
        tx,
        step,
        added.map((a) => a.member_urn),
      );
    }
    await tx`update pnet_accounts set connections_last_checked_at = now(), updated_at = now() where id = ${step.account_id}`;
  }
}

/** A new connection that one of our invitations asked for is an accepted invitation (a workspace event). */
async function recordInvitationsAccepted(tx: Db, step: StepRow, newUrns: string[]): Promise<void> {
  if (newUrns.length === 0) return;
  const accepted = await tx<{ profile_url: string | null; name: string | null; sender_profile_id: string | null }[]>`
    select distinct on (s.outcome->>'member_urn') s.params->>'profile_url' as profile_url, s.outcome->>'name' as name, a.sender_profile_id
    from browser_steps s join pnet_accounts a on a.id = s.account_id
    where s.account_id = ${step.account_id} and s.kind = 'connection_request' and s.status = 'succeeded'
      and s.outcome->>'member_urn' = any(${newUrns}::text[])`;
  for (const a of accepted) {
    await recordWorkspaceEvent(tx, {
      workspaceId: step.workspace_id,
      type: 'invitation.accepted',
      payload: {
        account_id: step.account_id,
        sender_profile_id: a.sender_profile_id,
        profile_url: a.profile_url ?? '',
        name: a.name,
      },
    });
  }
}

export function repliesCheckOf(row: AccountRow): PnetAccount['replies_check'] {
  return {
    failing: row.replies_failing,
    last_read_at: row.replies_last_read_at?.toISOString() ?? null,
    holding: row.replies_failing,
  };
}

export async function connectionChecksOf(
  db: Db,
  row: AccountRow,
  sessions: { extension_version: string; last_seen_at: Date }[],
): Promise<PnetAccount['connection_checks']> {
  const [counts] = await db<{ awaiting: number }[]>`
    select count(*)::int as awaiting from browser_steps s
    where s.account_id = ${row.id} and s.kind = 'connection_request' and s.status = 'succeeded'
      and not exists (select 1 from pnet_connections c where c.account_id = s.account_id and c.member_urn = s.outcome->>'member_urn')`;
  const gaps = await db<{ started_at: Date; ended_at: Date | null; problem: string }[]>`
    select started_at, ended_at, problem from pnet_connection_gaps where account_id = ${row.id} order by id desc limit 20`;
  // The newest browser decides: it is the one that will run the next read.
  const newest = sessions[0];
  const supported = !newest || versionAtLeast(newest.extension_version, minConnectionCheckVersion);
  return {
    awaiting: counts!.awaiting,
    last_checked_at: row.connections_last_checked_at?.toISOString() ?? null,
    next_check_at: row.connections_next_check_at?.toISOString() ?? null,
    watched_since: row.connected_at?.toISOString() ?? null,
    supported,
    problem: supported ? null : 'extension_outdated',
    gaps: gaps.map((g) => ({
      started_at: g.started_at.toISOString(),
      ended_at: g.ended_at?.toISOString() ?? null,
      problem: g.problem,
    })),
  };
}
