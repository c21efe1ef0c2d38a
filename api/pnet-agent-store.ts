/**
 * The extension's check-ins. A heartbeat is a Postgres write (session, presence, lease
 * compare-and-set) and stays off Temporal: thousands of browsers check in every few seconds and
 * no workflow waits on most of them (DESIGN.md, "Hot paths").
 */
import type { Db, Sql } from '../db/sql.js';
import type { StepRow } from '../activities/pnet-steps.js';
import { sendingStopped } from '../activities/agent-sending.js';
import { loadAccount, usageOf } from '../activities/pnet-accounts.js';
import { ApiError } from '../domain/errors.js';
import { pollAfterSeconds, type Wait } from '../domain/pnet-pacing.js';
import { configVersion, leaseSeconds, type AgentHeartbeat, type AgentState, type RunMode } from '../domain/pnet.js';
import { nextLocalMidnight } from '../domain/zoned-time.js';
import { hashConnectionToken } from './pnet-accounts-store.js';
import { ceilingWait, lineOf, pacingWait, repliesWait, waitFor, waitOf } from './pnet-line.js';

export async function findAccountByToken(db: Db, token: string) {
  const [row] = await db<{ id: string; workspace_id: string; plan: 'free' | 'paid' }[]>`
    select a.id, a.workspace_id, w.plan from pnet_accounts a join workspaces w on w.id = a.workspace_id
    where a.connection_token_hash = ${hashConnectionToken(token)}`;
  return row;
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
    const stopped = await sendingStopped(tx, current.workspace_id);
    const wait = waitOf(current, line, usage, now, stopped);
    return {
      run_mode: stopped ? 'manual' : current.run_mode,
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
      attempts_enabled: current.attempts_enabled,
      resume_enabled: current.resume_enabled,
      running_claim: runningClaim,
      unpaced_waiting: line.unmetered > 0,
      usage,
      usage_resets_at: nextLocalMidnight(now, current.timezone).toISOString(),
      wait,
    };
  });
}

/**
 * The step a claim would hand out, picked in Postgres (the step's workflow then claims it under
 * the account lock): unmetered first, then oldest first; a kind at its ceiling is passed over
 * with the reason kept; gap and working hours stop metered work.
 */
export async function pickClaimCandidate(
  sql: Sql,
  accountId: string,
  request: { browser_id: string; verify_first: boolean; unmetered_only: boolean },
  now = new Date(),
): Promise<{ step: StepRow | null; sessionId: string; wait: Wait | null }> {
  const account = (await loadAccount(sql, accountId))!;
  const [session] = await sql<{ id: string }[]>`
    select id from pnet_sessions where account_id = ${accountId} and browser_id = ${request.browser_id}`;
  if (!session) throw new ApiError('conflict', 'Check in (heartbeat) before claiming.');
  const leaseHeld = account.lease_session_id && account.lease_expires_at && account.lease_expires_at > now;
  if (leaseHeld && account.lease_session_id !== session.id) throw new ApiError('conflict', 'Another browser holds the lease of this account.');
  const blocked = (reason: Wait['reason']) => ({ step: null, sessionId: session.id, wait: waitFor(reason, null) });
  if (account.status !== 'connected') return blocked('not_connected');
  if (account.checkpoint_status !== 'ok') return blocked('checkpoint');
  const [running] = await sql`select 1 from browser_steps where account_id = ${accountId} and status = 'claimed'`;
  if (running) return blocked('running');

  const candidates = await sql<StepRow[]>`
    select * from browser_steps
    where account_id = ${accountId} and not held
      and (status = 'queued' ${request.verify_first ? sql`or status = 'resuming'` : sql``})
      ${request.unmetered_only ? sql`and not metered` : sql``}
    order by metered, queued_at, id limit 50`;
  const usage = await usageOf(sql, account, now);
  const stopped = await sendingStopped(sql, account.workspace_id);
  let capped: Wait | null = null;
  for (const step of candidates) {
    if (!step.metered) return { step, sessionId: session.id, wait: null };
    if (stopped) return { step: null, sessionId: session.id, wait: waitFor('paused', null) };
    const paced = pacingWait(account, now);
    if (paced) return { step: null, sessionId: session.id, wait: paced };
    const ceiling = ceilingWait(account, usage, step.kind, now) ?? repliesWait(account, step.kind);
    if (!ceiling) return { step, sessionId: session.id, wait: null };
    capped ??= ceiling;
  }
  return { step: null, sessionId: session.id, wait: capped };
}
