/**
 * The extension's check-ins. A heartbeat is a Postgres write (session, presence, lease
 * compare-and-set) and stays off Temporal: thousands of browsers check in every few seconds and
 * no workflow waits on most of them (DESIGN.md, "Hot paths").
 */
import type { Db, Sql } from '../db/sql.js';
import { nextMeteredAt, pollAfterSeconds, type Wait } from '../domain/pnet-pacing.js';
import {
  configVersion,
  leaseSeconds,
  limitKindOf,
  type ActionKind,
  type AgentHeartbeat,
  type AgentState,
  type RunMode,
  type Usage,
} from '../domain/pnet.js';
import { localWeekStart, addDays, nextLocalMidnight, zonedInstant } from '../domain/zoned-time.js';
import { loadAccount, usageOf, type AccountRow } from '../activities/pnet-accounts.js';
import { hashConnectionToken } from './pnet-accounts-store.js';

export async function findAccountByToken(db: Db, token: string) {
  const [row] = await db<{ id: string; workspace_id: string; plan: 'free' | 'paid' }[]>`
    select a.id, a.workspace_id, w.plan from pnet_accounts a join workspaces w on w.id = a.workspace_id
    where a.connection_token_hash = ${hashConnectionToken(token)}`;
  return row;
}

interface Line {
  queued: number;
  approvals: number;
  unmetered: number;
  running: boolean;
  oldestMeteredKind: ActionKind | null;
  lastMeteredClaimAt: Date | null;
}

async function lineOf(db: Db, accountId: string): Promise<Line> {
  const [row] = await db<(Omit<Line, 'running'> & { running: number })[]>`
    select
      count(*) filter (where status in ('queued', 'resuming') and not held)::int as queued,
      count(*) filter (where status = 'awaiting_approval' and not held)::int as approvals,
      count(*) filter (where status = 'queued' and not held and not metered)::int as unmetered,
      count(*) filter (where status = 'claimed')::int as running,
      (select kind from browser_steps where account_id = ${accountId} and status in ('queued', 'resuming') and not held and metered
        order by queued_at, id limit 1) as "oldestMeteredKind",
      (select max(claimed_at) from browser_steps where account_id = ${accountId} and metered and claimed_at is not null) as "lastMeteredClaimAt"
    from browser_steps where account_id = ${accountId}`;
  return { ...row!, running: row!.running > 0 };
}

/** What the next step waits on and until when; null while nothing is queued. */
export function waitOf(account: AccountRow, line: Line, usage: Usage[], now: Date): Wait | null {
  if (line.queued === 0) return null;
  const at = (reason: Wait['reason'], next: Date | null, resets: Date | null = null): Wait => ({
    reason,
    next_at: next?.toISOString() ?? null,
    resets_at: resets?.toISOString() ?? null,
  });
  if (account.status !== 'connected') return at('not_connected', null);
  if (account.checkpoint_status !== 'ok') return at('checkpoint', null);
  if (line.running) return at('running', null);
  if (line.unmetered > 0 || !line.oldestMeteredKind) return at('ready', now);
  const ceiling = usage.find((u) => u.kind === limitKindOf[line.oldestMeteredKind!])!;
  if (ceiling.used_today >= ceiling.daily_limit) {
    const midnight = nextLocalMidnight(now, account.timezone);
    return at('daily_cap', midnight, midnight);
  }
  if (ceiling.used_this_week >= ceiling.weekly_limit) {
    const monday = zonedInstant(addDays(localWeekStart(now, account.timezone), 7), 0, 0, account.timezone);
    return at('weekly_cap', monday, monday);
  }
  const next = nextMeteredAt({
    now,
    timeZone: account.timezone,
    workingHours: account.working_hours,
    minActionIntervalSeconds: account.min_action_interval_seconds,
    lastMeteredClaimAt: line.lastMeteredClaimAt,
    jitter: 0,
  });
  return at(next.reason ?? 'ready', next.at);
}

interface CheckIn {
  browserId: string;
  label: string;
  version: string;
  leaseNonce: string | null;
  identity?: AgentHeartbeat['identity'];
  runMode?: RunMode;
  running?: AgentHeartbeat['running'];
}

/** One check-in: session, identity, lease and run mode in one transaction; then the state. */
export async function checkIn(sql: Sql, accountId: string, input: CheckIn, now = new Date()): Promise<AgentState> {
  return sql.begin(async (tx) => {
    const account = (await loadAccount(tx, accountId, true))!;
    const [session] = await tx<{ id: string }[]>`
      insert into pnet_sessions (account_id, browser_id, browser_label, extension_version)
      values (${accountId}, ${input.browserId}, ${input.label}, ${input.version})
      on conflict (account_id, browser_id) do update
        set browser_label = excluded.browser_label, extension_version = excluded.extension_version, last_seen_at = now()
      returning id`;

    // The first identity connects the account; another identity afterwards is a hard stop.
    const identity = input.identity;
    const mismatch = Boolean(identity && account.member_urn && identity.member_urn !== account.member_urn);
    if (identity && !account.member_urn) {
      await tx`
        update pnet_accounts set member_urn = ${identity.member_urn}, vanity_name = ${identity.vanity_name},
          display_name = ${identity.display_name}, headline = ${identity.headline}, photo_url = ${identity.photo_url},
          status = 'connected', connected_at = now(), updated_at = now()
        where id = ${accountId}`;
    }

    // Lease compare-and-set: free, lapsed, or already this browser's.
    let leaseGranted = true;
    if (input.leaseNonce !== null && !mismatch) {
      const taken = await tx`
        update pnet_accounts set lease_session_id = ${session!.id}, lease_nonce = ${input.leaseNonce},
          lease_expires_at = now() + ${leaseSeconds} * interval '1 second'
        where id = ${accountId}
          and (lease_session_id is null or lease_expires_at < now() or lease_session_id = ${session!.id})
        returning id`;
      leaseGranted = taken.length === 1;
    }
    if (mismatch) leaseGranted = false;
    await tx`
      update pnet_accounts set last_seen_at = now() ${input.runMode ? tx`, run_mode = ${input.runMode}, updated_at = now()` : tx``}
      where id = ${accountId}`;

    let runningClaim: AgentState['running_claim'] = null;
    if (input.running) {
      const [claim] = await tx`
        select 1 from browser_steps where id = ${input.running.action_id} and account_id = ${accountId}
          and status = 'claimed' and claimed_at = ${input.running.claimed_at}`;
      runningClaim = claim ? 'renewed' : 'lost';
    }

    const current = (await loadAccount(tx, accountId))!;
    const [holder] = leaseGranted
      ? [undefined]
      : await tx<{ browser_label: string }[]>`select browser_label from pnet_sessions where id = ${current.lease_session_id}`;
    const line = await lineOf(tx, accountId);
    const usage = await usageOf(tx, current, now);
    const wait = waitOf(current, line, usage, now);
    return {
      run_mode: current.run_mode,
      checkpoint: current.checkpoint_status !== 'ok',
      lease_granted: leaseGranted,
      lease_holder_label: holder?.browser_label ?? null,
      account_mismatch: mismatch,
      queued_count: line.queued,
      approvals_waiting: line.approvals,
      poll_after_seconds: pollAfterSeconds({
        minActionIntervalSeconds: current.min_action_interval_seconds,
        workSoonAt: wait?.next_at ? new Date(wait.next_at) : null,
        now,
      }),
      config_version: configVersion,
      attempts_enabled: false,
      resume_enabled: false,
      running_claim: runningClaim,
      unpaced_waiting: line.unmetered > 0,
      usage,
      usage_resets_at: nextLocalMidnight(now, current.timezone).toISOString(),
      wait,
    };
  });
}
