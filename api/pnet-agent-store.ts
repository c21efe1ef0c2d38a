/**
 * The extension's check-ins. A heartbeat is a Postgres write (session, presence, lease
 * compare-and-set) and stays off Temporal: thousands of browsers check in every few seconds and
 * no workflow waits on most of them (DESIGN.md, "Hot paths").
 */
import type { Db, Sql } from '../db/sql.js';
import type { StepRow } from '../activities/pnet-steps.js';
import { sendingStopped } from '../activities/agent-sending.js';
import { loadAccount, usageOf, type AccountRow } from '../activities/pnet-accounts.js';
import { ApiError } from '../domain/errors.js';
import { pollAfterSeconds, type Wait } from '../domain/pnet-pacing.js';
import { configVersion, leaseSeconds, type AgentHeartbeat, type AgentState, type RunMode } from '../domain/pnet.js';
import { nextLocalMidnight } from '../domain/zoned-time.js';
import { hashConnectionToken } from './pnet-accounts-store.js';
import { ceilingWait, lineSql, pacingWait, repliesWait, toLine, waitFor, waitOf } from './pnet-line.js';

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

/** What the check-in statement reads besides the account row. */
interface CheckInExtras {
  check_in_session_id: string;
  check_in_holder_label: string | null;
  check_in_claim_current: boolean | null;
  check_in_line: Parameters<typeof toLine>[0];
  check_in_sending_stopped: boolean;
}

/**
 * One check-in in one statement: it locks the account row, writes the session, identity, lease
 * (compare-and-set on the row as committed) and run mode, and reads back what the state needs
 * (running claim, lease holder, line, sending switches); then the usage, which needs the sender's
 * time zone. Two round trips instead of a transaction of a dozen: thousands of browsers check in
 * every few seconds. Reads see the statement's snapshot, so a write another transaction committed
 * while this one waited for the row lock shows from the next check-in on.
 */
export async function checkIn(sql: Sql, accountId: string, input: CheckIn, now = new Date()): Promise<AgentState> {
  const identity = input.identity ?? null;
  const urn = identity?.member_urn ?? null;
  const nonce = input.leaseNonce;
  const runMode = input.runMode ?? null;
  // Conditions on the row as it stands under the UPDATE's lock (`a` is the old row in SET).
  // The first identity connects the account; another identity afterwards is a hard stop.
  const connectingSql = sql`(${urn}::text is not null and a.member_urn is null)`;
  const mismatchSql = sql`(${urn}::text is not null and a.member_urn is not null and a.member_urn <> ${urn}::text)`;
  // Lease compare-and-set: free, lapsed, or already this browser's.
  const takesLeaseSql = sql`(${nonce}::text is not null and not ${mismatchSql}
    and (a.lease_session_id is null or a.lease_expires_at < now() or a.lease_session_id = s.id))`;
  const running = input.running;
  const [row] = await sql<(AccountRow & CheckInExtras)[]>`
    with locked as (
      -- The account row first, in the order every other writer of the account takes its locks.
      select id from pnet_accounts where id = ${accountId} for update
    ), s as (
      insert into pnet_sessions (account_id, browser_id, browser_label, extension_version)
      select id, ${input.browserId}, ${input.label}, ${input.version} from locked
      on conflict (account_id, browser_id) do update
        set browser_label = excluded.browser_label, extension_version = excluded.extension_version, last_seen_at = now()
      returning id
    ), a as (
      update pnet_accounts a set
        member_urn = case when ${connectingSql} then ${urn}::text else a.member_urn end,
        vanity_name = case when ${connectingSql} then ${identity?.vanity_name ?? null}::text else a.vanity_name end,
        display_name = case when ${connectingSql} then ${identity?.display_name ?? null}::text else a.display_name end,
        headline = case when ${connectingSql} then ${identity?.headline ?? null}::text else a.headline end,
        photo_url = case when ${connectingSql} then ${identity?.photo_url ?? null}::text else a.photo_url end,
        status = case when ${connectingSql} then 'connected' else a.status end,
        connected_at = case when ${connectingSql} then now() else a.connected_at end,
        lease_session_id = case when ${takesLeaseSql} then s.id else a.lease_session_id end,
        lease_nonce = case when ${takesLeaseSql} then ${nonce}::text else a.lease_nonce end,
        lease_expires_at = case when ${takesLeaseSql} then now() + ${leaseSeconds} * interval '1 second' else a.lease_expires_at end,
        last_seen_at = now(),
        run_mode = coalesce(${runMode}::text, a.run_mode),
        updated_at = case when ${connectingSql} or ${runMode}::text is not null then now() else a.updated_at end
      from s
      where a.id = ${accountId}
      returning a.*, s.id as check_in_session_id
    )
    select a.*, p.timezone,
      -- This statement's own session write is not visible to its reads: its label is the new one.
      case when a.lease_session_id = a.check_in_session_id then ${input.label}::text
        else (select browser_label from pnet_sessions where id = a.lease_session_id) end as check_in_holder_label,
      ${running
        ? sql`exists (select 1 from browser_steps where id = ${running.action_id} and account_id = ${accountId}
            and status = 'claimed' and claimed_at = ${running.claimed_at})`
        : sql`null::boolean`} as check_in_claim_current,
      row_to_json(line) as check_in_line,
      (exists (select 1 from agent_sending where workspace_id = a.workspace_id and paused)
        or exists (select 1 from service_settings where key = 'paused_everywhere' and value = 'true')) as check_in_sending_stopped
    from a join sender_profiles p on p.id = a.sender_profile_id
      cross join lateral (${lineSql(sql, accountId)}) line`;
  const {
    check_in_session_id: sessionId,
    check_in_holder_label: holderLabelSeen,
    check_in_claim_current: claimCurrent,
    check_in_line: lineRow,
    check_in_sending_stopped: stopped,
    ...current
  } = row!;
  // Read from the row as written: a first identity is now the account's, another one is not.
  const mismatch = Boolean(identity && current.member_urn && identity.member_urn !== current.member_urn);
  const leaseGranted = !mismatch && (nonce === null || current.lease_session_id === sessionId);
  // The statement reads from the snapshot it started with: a holder whose first check-in
  // committed while this one waited for the row is not in it yet, so ask once more.
  let holderLabel = holderLabelSeen;
  if (!leaseGranted && holderLabel === null && current.lease_session_id) {
    const [holder] = await sql<{ browser_label: string }[]>`select browser_label from pnet_sessions where id = ${current.lease_session_id}`;
    holderLabel = holder?.browser_label ?? null;
  }
  const runningClaim: AgentState['running_claim'] = running ? (claimCurrent ? 'renewed' : 'lost') : null;
  const line = toLine(lineRow);
  const usage = await usageOf(sql, current, now);
  const wait = waitOf(current, line, usage, now, stopped);
  return {
    run_mode: stopped ? 'manual' : current.run_mode,
    checkpoint: current.checkpoint_status !== 'ok',
    lease_granted: leaseGranted,
    lease_holder_label: leaseGranted ? null : holderLabel,
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
): Promise<{ step: StepRow | null; sessionId: string; wait: Wait | null; yours?: StepRow }> {
  const account = (await loadAccount(sql, accountId))!;
  const [session] = await sql<{ id: string }[]>`
    select id from pnet_sessions where account_id = ${accountId} and browser_id = ${request.browser_id}`;
  if (!session) throw new ApiError('conflict', 'Check in (heartbeat) before claiming.');
  const leaseHeld = account.lease_session_id && account.lease_expires_at && account.lease_expires_at > now;
  if (leaseHeld && account.lease_session_id !== session.id) throw new ApiError('conflict', 'Another browser holds the lease of this account.');
  const blocked = (reason: Wait['reason']) => ({ step: null, sessionId: session.id, wait: waitFor(reason, null) });
  if (account.status !== 'connected') return blocked('not_connected');
  if (account.checkpoint_status !== 'ok') return blocked('checkpoint');
  const [running] = await sql<StepRow[]>`select * from browser_steps where account_id = ${accountId} and status = 'claimed'`;
  // This browser's own claim whose answer it never got (a timeout, a restart): hand it back.
  if (running?.claim_session_id === session.id) return { step: null, sessionId: session.id, wait: null, yours: running };
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
    // Checked first: an unmetered message the inbox read holds back must not block the read itself.
    const replies = repliesWait(account, step.kind);
    if (replies) {
      capped ??= replies;
      continue;
    }
    if (!step.metered) return { step, sessionId: session.id, wait: null };
    if (stopped) return { step: null, sessionId: session.id, wait: waitFor('paused', null) };
    const paced = pacingWait(account, now);
    if (paced) return { step: null, sessionId: session.id, wait: paced };
    const ceiling = ceilingWait(account, usage, step.kind, now);
    if (!ceiling) return { step, sessionId: session.id, wait: null };
    capped ??= ceiling;
  }
  return { step: null, sessionId: session.id, wait: capped };
}
