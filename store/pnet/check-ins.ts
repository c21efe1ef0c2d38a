/**
 * The extension's check-ins. A heartbeat is a Postgres write (session, presence, lease
 * compare-and-set) and stays off Temporal: thousands of browsers check in every few seconds and
 * no workflow waits on most of them (DESIGN.md, "Hot paths").
 */
import { createHistogram, performance } from 'node:perf_hooks';
import type { Db, Sql } from '../../db/sql.js';
import type { StepRow } from './steps.js';
import { sendingStopped } from './agent-sending.js';
import {
  loadAccount,
  usageDaysAround,
  usageFromDays,
  usageOf,
  type AccountRow,
  type UsageAccount,
} from './account-rows.js';
import { ApiError } from '../../domain/shared/errors.js';
import { pollAfterSeconds, type Wait } from '../../domain/pnet/pacing.js';
import { configVersion, leaseSeconds, type AgentHeartbeat, type AgentState } from '../../domain/pnet/agent.js';
import type { RunMode } from '../../domain/pnet/sender-profiles.js';
import { nextLocalMidnight } from '../../domain/shared/zoned-time.js';
import { claimOverdue } from '../../domain/pnet/settle.js';
import { overdueClaimGraceSeconds } from '../../domain/pnet/timing.js';
import { hashConnectionToken } from './accounts.js';
import {
  ceilingWait,
  lineSql,
  pacingWait,
  repliesWait,
  toLine,
  unpacedReady,
  waitFor,
  waitOf,
  type LineAccount,
} from './line.js';

export async function findAccountByToken(db: Db, token: string) {
  const [row] = await db<{ id: string; workspace_id: string; plan: 'free' | 'paid' }[]>`
    select a.id, a.workspace_id, w.plan from pnet_accounts a join workspaces w on w.id = a.workspace_id
    where a.connection_token_hash = ${hashConnectionToken(token)}`;
  return row;
}

interface CheckIn {
  /** The hash of the connection token the browser sent: the statement checks it is still the account's. */
  tokenHash: Buffer;
  browserId: string;
  label: string;
  version: string;
  leaseNonce: string | null;
  identity?: AgentHeartbeat['identity'];
  runMode?: RunMode;
  running?: AgentHeartbeat['running'];
}

/** The account columns a check-in's answer reads: fewer to write out, send and parse than the whole row. */
type CheckInAccount = LineAccount &
  UsageAccount &
  Pick<
    AccountRow,
    | 'member_urn'
    | 'lease_session_id'
    | 'run_mode'
    | 'min_action_interval_seconds'
    | 'attempts_enabled'
    | 'resume_enabled'
  >;

/** What the check-in statement reads besides the account's columns. */
interface CheckInExtras {
  /** The check-in's place in its batch. */
  check_in_n: number;
  check_in_session_id: string;
  check_in_holder_label: string | null;
  check_in_claim_current: boolean | null;
  check_in_line: Parameters<typeof toLine>[0];
  check_in_sending_stopped: boolean;
  check_in_usage: Parameters<typeof usageFromDays>[1];
}

/**
 * In this process, in microseconds: how long each check-in waited for a statement to carry it,
 * how long each statement took from sending to its answer, and each heartbeat request from its
 * parsed arrival to its answer sent (bench:pnet reads them per window).
 */
export const checkInTimings = { waited: createHistogram(), statement: createHistogram(), request: createHistogram() };
const micros = (ms: number) => Math.max(1, Math.round(ms * 1000));
export const recordCheckInRequest = (ms: number) => checkInTimings.request.record(micros(ms));

/**
 * Check-ins, batched: each is one statement's row, and a statement carries the check-ins of up to
 * `maxBatch` accounts. Thousands of browsers check in every few seconds; a statement costs
 * Postgres and this process a round trip, a parse of the answer's protocol, a commit and a socket
 * write or two whatever its size, which a batch pays once. Nothing waits to fill a batch: a
 * check-in goes out at once while fewer than `maxInFlight` (2) statements are running, and only the
 * check-ins that arrive while they all run wait, for the first to finish, and then go together.
 * A batch holds one check-in per account (the statement writes each account's row once); a
 * second check-in of an account waits for the next batch. A batch whose statement fails is run
 * again one check-in at a time, so one bad check-in fails alone.
 */
export class CheckInLine {
  private waiting: Pending[] = [];
  private inFlight = 0;
  /**
   * Accounts with a check-in in a statement now (in a batch, or waiting apart for a row lock).
   * Their next check-ins wait in line: one account's check-ins run in the order they came, and
   * never wait on each other's row lock.
   */
  private readonly busy = new Set<string>();
  /**
   * Statements run, check-ins they carried, the largest batch, batches run again one by one, and
   * check-ins that found their account locked and waited for it apart.
   */
  readonly stats = { statements: 0, checkIns: 0, largest: 0, split: 0, behindLock: 0 };

  constructor(
    private readonly sql: Sql,
    // Measured with 64 browsers checking in as fast as they can (bench:pnet's closed loop): 1, 2,
    // 3, 4 and 8 statements at once answered about 5,650, 5,500, 5,200, 4,900 and 4,050 check-ins
    // a second; fewer statements carry more each. Two, so that one slow batch does not hold up
    // all (no batch waits for a row lock: see run).
    private readonly maxInFlight = 2,
    private readonly maxBatch = 64,
  ) {}

  submit(accountId: string, input: CheckIn, now: Date): Promise<AgentState | null> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ accountId, input, now, resolve, reject, submittedAt: performance.now() });
      this.pump();
    });
  }

  private pump() {
    while (this.inFlight < this.maxInFlight && this.waiting.length > 0) {
      const batch: Pending[] = [];
      const later: Pending[] = [];
      const accounts = new Set<string>();
      for (const p of this.waiting) {
        if (batch.length < this.maxBatch && !accounts.has(p.accountId) && !this.busy.has(p.accountId)) {
          batch.push(p);
          accounts.add(p.accountId);
        } else later.push(p);
      }
      if (batch.length === 0) return;
      this.waiting = later;
      for (const account of accounts) this.busy.add(account);
      this.inFlight += 1;
      void this.run(batch).finally(() => {
        this.inFlight -= 1;
        this.pump();
      });
    }
  }

  private async run(batch: Pending[]) {
    this.stats.statements += 1;
    this.stats.checkIns += batch.length;
    this.stats.largest = Math.max(this.stats.largest, batch.length);
    const sent = performance.now();
    for (const p of batch) checkInTimings.waited.record(micros(sent - p.submittedAt));
    const done = (ps: Pending[]) => {
      for (const p of ps) this.busy.delete(p.accountId);
    };
    try {
      const states = await checkInBatch(this.sql, batch, { skipLocked: true });
      checkInTimings.statement.record(micros(performance.now() - sent));
      const behindLock: Pending[] = [];
      batch.forEach((p, n) => (states[n] ? p.resolve(states[n]) : behindLock.push(p)));
      done(batch.filter((p) => !behindLock.includes(p)));
      // Accounts a claim or a settle had locked (or whose token is no longer theirs): these wait
      // for the lock in a statement of their own, outside the line, so the rest were not held up.
      if (behindLock.length > 0) {
        this.stats.behindLock += behindLock.length;
        void checkInBatch(this.sql, behindLock)
          .then(
            (late) => behindLock.forEach((p, n) => p.resolve(late[n]!)),
            (error: unknown) => behindLock.forEach((p) => p.reject(error)),
          )
          .finally(() => {
            done(behindLock);
            this.pump();
          });
      }
    } catch (error) {
      if (batch.length === 1) {
        done(batch);
        return batch[0]!.reject(error);
      }
      this.stats.split += 1;
      for (const p of batch) {
        await checkInBatch(this.sql, [p]).then(
          ([state]) => p.resolve(state!),
          (e: unknown) => p.reject(e),
        );
        done([p]);
      }
    }
  }
}

interface Pending {
  accountId: string;
  input: CheckIn;
  now: Date;
  resolve: (state: AgentState | null) => void;
  reject: (error: unknown) => void;
  submittedAt: number;
}

const lines = new WeakMap<Sql, CheckInLine>();

/**
 * One browser's check-in, through the batching line of this connection pool (CheckInLine): it
 * checks the connection token is still the account's (the API process may know the token from
 * an earlier request: api/plugins/auth.ts), writes the session, identity, lease and run mode, and
 * answers the agent state; null, having written nothing, when the token no longer opens the account.
 */
export function checkIn(sql: Sql, accountId: string, input: CheckIn, now = new Date()): Promise<AgentState | null> {
  let line = lines.get(sql);
  if (!line) lines.set(sql, (line = new CheckInLine(sql)));
  return line.submit(accountId, input, now);
}

/**
 * The check-ins of distinct accounts in one statement and one round trip. For each it checks the
 * token hash, locks the account row (the batch's rows in id order, so two batches never wait on
 * each other in a circle; every other writer locks one account), writes the session, identity,
 * lease (compare-and-set on the row as committed) and run mode, renews a running claim's lease,
 * and reads back what the state needs (running claim, lease holder, line, sending switches, and
 * the usage rows of the days around now; the sender's time zone picks among them here). Reads see
 * the statement's snapshot, so a write another transaction committed while this one waited for a
 * row lock shows from the next check-in on.
 *
 * A batch whose check-ins only renew presence and the lease commits without waiting for its WAL
 * flush (synchronous_commit off for this transaction alone). What that trades: if Postgres itself
 * crashes (not the API), the last fraction of a second of such check-ins may be lost, as if those
 * browsers had checked in a moment earlier. The commit is atomic and visible to every other
 * transaction at once all the same, and WAL is flushed in order, so any later durable commit
 * (a claim, a settle) that read this lease makes it durable too; a browser told `lease_granted`
 * by a lost commit learns otherwise at its next check-in, and a claim checks the lease as
 * committed, under the account lock, with a durable commit. A batch with a check-in that connects
 * an identity, sets the run mode or names a running claim (whose lease renewal the step's timer
 * reads) waits for the flush.
 *
 * With `skipLocked` no check-in waits for a row lock: an account whose row another transaction
 * holds (a claim, for its whole transaction), or whose named running claim's row is held (a
 * settle, an expiry), is left out and answers null, as a token that no longer opens its account
 * does; the caller runs those again without it.
 */
export async function checkInBatch(
  sql: Sql,
  batch: readonly { accountId: string; input: CheckIn; now: Date }[],
  { skipLocked = false } = {},
): Promise<(AgentState | null)[]> {
  const days = usageDaysAround(batch[0]!.now);
  const inputs = batch.map(({ accountId, input }, n) => ({
    n,
    account_id: accountId,
    token_hash: input.tokenHash.toString('hex'),
    browser_id: input.browserId,
    label: input.label,
    version: input.version,
    nonce: input.leaseNonce,
    urn: input.identity?.member_urn ?? null,
    vanity_name: input.identity?.vanity_name ?? null,
    display_name: input.identity?.display_name ?? null,
    headline: input.identity?.headline ?? null,
    photo_url: input.identity?.photo_url ?? null,
    run_mode: input.runMode ?? null,
    running_id: input.running?.action_id ?? null,
    running_claimed_at: input.running?.claimed_at ?? null,
  }));
  // Conditions on each row as it stands under the UPDATE's lock (`a` is the old row in SET).
  // The first identity connects the account; another identity afterwards is a hard stop.
  const connectingSql = sql`(i.urn is not null and a.member_urn is null)`;
  const mismatchSql = sql`(i.urn is not null and a.member_urn is not null and a.member_urn <> i.urn)`;
  // Lease compare-and-set: free, lapsed, or already this browser's.
  const takesLeaseSql = sql`(i.nonce is not null and not ${mismatchSql}
    and (a.lease_session_id is null or a.lease_expires_at < now() or a.lease_session_id = s.id))`;
  const rows = await sql<(CheckInAccount & CheckInExtras)[]>`
    with i as (
      select * from json_to_recordset(${JSON.stringify(inputs)}::text::json) as i(n int, account_id uuid, token_hash text,
        browser_id uuid, label text, version text, nonce text, urn text, vanity_name text, display_name text, headline text,
        photo_url text, run_mode text, running_id uuid, running_claimed_at timestamptz)
    ), ${
      skipLocked
        ? sql`running_free as materialized (
      -- Running claims named whose rows no settle or expiry holds now.
      select b.id from browser_steps b join i on b.id = i.running_id
      order by b.id for update of b skip locked
    ), `
        : sql``
    }locked as materialized (
      -- The account rows first, in the order every other writer of an account takes its locks;
      -- none for a check-in whose token is no longer its account's. Skipping locked rows, none
      -- either for an account a claim holds, or whose running claim named is held.
      select a.id, a.member_urn from pnet_accounts a join i on a.id = i.account_id and a.connection_token_hash = decode(i.token_hash, 'hex')
      ${
        skipLocked
          ? sql`where i.running_id is null or exists (select 1 from running_free r where r.id = i.running_id)
        or not exists (select 1 from browser_steps b where b.id = i.running_id)`
          : sql``
      }
      order by a.id for update of a ${skipLocked ? sql`skip locked` : sql``}
    ), s as (
      insert into pnet_sessions (account_id, browser_id, browser_label, extension_version)
      select i.account_id, i.browser_id, i.label, i.version from i join locked on locked.id = i.account_id
      on conflict (account_id, browser_id) do update
        set browser_label = excluded.browser_label, extension_version = excluded.extension_version, last_seen_at = now()
      returning id, account_id
    ), renewed as (
      -- Naming its running claim renews the claim's lease, which the step's lease timer reads
      -- when it fires (after the account row, the order every writer takes its locks).
      update browser_steps b set lease_renewed_at = now() from i join locked on locked.id = i.account_id
      where b.id = i.running_id and b.claimed_at = i.running_claimed_at and b.account_id = i.account_id and b.status = 'claimed'
      returning b.account_id
    ), a as (
      update pnet_accounts a set
        member_urn = case when ${connectingSql} then i.urn else a.member_urn end,
        vanity_name = case when ${connectingSql} then i.vanity_name else a.vanity_name end,
        display_name = case when ${connectingSql} then i.display_name else a.display_name end,
        headline = case when ${connectingSql} then i.headline else a.headline end,
        photo_url = case when ${connectingSql} then i.photo_url else a.photo_url end,
        status = case when ${connectingSql} then 'connected' else a.status end,
        connected_at = case when ${connectingSql} then now() else a.connected_at end,
        lease_session_id = case when ${takesLeaseSql} then s.id else a.lease_session_id end,
        lease_nonce = case when ${takesLeaseSql} then i.nonce else a.lease_nonce end,
        lease_expires_at = case when ${takesLeaseSql} then now() + ${leaseSeconds} * interval '1 second' else a.lease_expires_at end,
        last_seen_at = now(),
        run_mode = coalesce(i.run_mode, a.run_mode),
        updated_at = case when ${connectingSql} or i.run_mode is not null then now() else a.updated_at end
      from s join i on i.account_id = s.account_id
      where a.id = s.account_id
      returning a.id, a.workspace_id, a.sender_profile_id, a.status, a.checkpoint_status, a.checkpoint_until, a.working_hours,
        a.next_metered_at, a.replies_failing, a.inbox_next_check_at, a.connected_at, a.limits, a.member_urn, a.lease_session_id,
        a.run_mode, a.min_action_interval_seconds, a.attempts_enabled, a.resume_enabled, s.id as check_in_session_id
    ), commit_mode as (
      -- Presence and the accounts' leases only: commit without waiting for the WAL flush (see
      -- above). Connecting an identity (locked.member_urn is the row as locked), setting the run
      -- mode or renewing a running claim's lease makes the whole batch wait for it.
      select set_config('synchronous_commit', case when bool_or(i.run_mode is not null or i.running_id is not null
          or (i.urn is not null and locked.member_urn is null)) then 'on' else 'off' end, true) as check_in_commit
      from i join locked on locked.id = i.account_id
    )
    select i.n as check_in_n, a.id, a.status, a.checkpoint_status, a.checkpoint_until, a.working_hours, a.next_metered_at, a.replies_failing,
      a.inbox_next_check_at, a.connected_at, a.limits, a.member_urn, a.lease_session_id, a.run_mode,
      a.min_action_interval_seconds, a.attempts_enabled, a.resume_enabled, a.check_in_session_id, p.timezone,
      -- This statement's own session write is not visible to its reads: its label is the new one.
      case when a.lease_session_id = a.check_in_session_id then i.label
        else (select browser_label from pnet_sessions where id = a.lease_session_id) end as check_in_holder_label,
      case when i.running_id is null then null::boolean else exists (select 1 from renewed r where r.account_id = a.id) end as check_in_claim_current,
      row_to_json(line) as check_in_line,
      (exists (select 1 from agent_sending where workspace_id = a.workspace_id and paused)
        or exists (select 1 from service_settings where key = 'paused_everywhere' and value = 'true')) as check_in_sending_stopped,
      (select coalesce(json_agg(json_build_object('local_date', u.local_date, 'limit_kind', u.limit_kind, 'used', u.used)), '[]')
        from pnet_usage u where u.account_id = a.id and u.local_date between ${days.from}::date and ${days.to}::date) as check_in_usage,
      c.check_in_commit
    from a join i on i.account_id = a.id join sender_profiles p on p.id = a.sender_profile_id
      cross join commit_mode c
      cross join lateral (${lineSql(sql, sql`a.id`)}) line`;
  const byInput = new Map(rows.map((row) => [row.check_in_n, row]));
  return Promise.all(batch.map(({ input, now }, n) => agentState(sql, input, byInput.get(n), now)));
}

const earliest = (a: Date | null, b: Date | null) => (a && b ? (a < b ? a : b) : (a ?? b));

/** One check-in's answer from its row of the batch; null when the token no longer opens the account. */
async function agentState(
  sql: Sql,
  input: CheckIn,
  row: (CheckInAccount & CheckInExtras) | undefined,
  now: Date,
): Promise<AgentState | null> {
  // The token no longer opens the account (replaced by a disconnect, or the account deleted).
  if (!row) return null;
  const identity = input.identity ?? null;
  const nonce = input.leaseNonce;
  const running = input.running;
  // Read in place: the row carries the account's columns beside the check-in's own.
  const current = row;
  const {
    check_in_session_id: sessionId,
    check_in_holder_label: holderLabelSeen,
    check_in_claim_current: claimCurrent,
    check_in_line: lineRow,
    check_in_sending_stopped: stopped,
    check_in_usage: usageDays,
  } = row;
  // Read from the row as written: a first identity is now the account's, another one is not.
  const mismatch = Boolean(identity && current.member_urn && identity.member_urn !== current.member_urn);
  const leaseGranted = !mismatch && (nonce === null || current.lease_session_id === sessionId);
  // The statement reads from the snapshot it started with: a holder whose first check-in
  // committed while this one waited for the row is not in it yet, so ask once more.
  let holderLabel = holderLabelSeen;
  if (!leaseGranted && holderLabel === null && current.lease_session_id) {
    const [holder] = await sql<
      { browser_label: string }[]
    >`select browser_label from pnet_sessions where id = ${current.lease_session_id}`;
    holderLabel = holder?.browser_label ?? null;
  }
  const runningClaim: AgentState['running_claim'] = running ? (claimCurrent ? 'renewed' : 'lost') : null;
  const line = toLine(lineRow);
  // This browser's own claim, which it does not name: the claim's answer never reached it (the
  // API died, a timeout). It waits for this browser, and a claim hands it back at once.
  const answerLost = !running && line.running && line.runningSessionId === sessionId;
  const usage = usageFromDays(current, usageDays, now);
  const wait = waitOf(current, line, usage, now, stopped);
  return {
    run_mode: stopped ? 'manual' : current.run_mode,
    checkpoint: current.checkpoint_status !== 'ok',
    lease_granted: leaseGranted,
    lease_holder_label: leaseGranted ? null : holderLabel,
    account_mismatch: mismatch,
    queued_count: line.queued + (answerLost ? 1 : 0),
    approvals_waiting: line.approvals,
    poll_after_seconds: pollAfterSeconds({
      minActionIntervalSeconds: current.min_action_interval_seconds,
      // A running claim whose browser went silent frees the account when its lease is overdue:
      // the account's browsers look again then, and their claim lapses it.
      workSoonAt: earliest(wait?.next_at ? new Date(wait.next_at) : null, line.runningLapsesAt),
      now,
    }),
    config_version: configVersion,
    attempts_enabled: current.attempts_enabled,
    resume_enabled: current.resume_enabled,
    running_claim: runningClaim,
    unpaced_waiting: unpacedReady(current, line),
    usage,
    usage_resets_at: nextLocalMidnight(now, current.timezone).toISOString(),
    wait,
  };
}

/**
 * What the claim route hands on: the step to claim, or why none (`wait`); `yours` is this browser's
 * own running claim, `overdue` a running claim whose lease timer is late (the answer is then
 * `running` until someone lapses it).
 */
export interface ClaimCandidate {
  step: StepRow | null;
  sessionId: string;
  wait: Wait | null;
  yours?: StepRow;
  overdue?: StepRow;
}

/**
 * The step a claim would hand out, picked in Postgres (the claim then takes it under the account
 * lock): unmetered first, then oldest first; a kind at its ceiling is passed over
 * with the reason kept; gap and working hours stop metered work.
 */
export async function pickClaimCandidate(
  sql: Sql,
  accountId: string,
  request: { browser_id: string; verify_first: boolean; unmetered_only: boolean },
  now = new Date(),
): Promise<ClaimCandidate> {
  const account = (await loadAccount(sql, accountId))!;
  const [session] = await sql<{ id: string }[]>`
    select id from pnet_sessions where account_id = ${accountId} and browser_id = ${request.browser_id}`;
  if (!session) throw new ApiError('conflict', 'Check in (heartbeat) before claiming.');
  const leaseHeld = account.lease_session_id && account.lease_expires_at && account.lease_expires_at > now;
  if (leaseHeld && account.lease_session_id !== session.id)
    throw new ApiError('conflict', 'Another browser holds the lease of this account.');
  const blocked = (reason: Wait['reason']) => ({ step: null, sessionId: session.id, wait: waitFor(reason, null) });
  if (account.status !== 'connected') return blocked('not_connected');
  if (account.checkpoint_status !== 'ok') return blocked('checkpoint');
  const [running] = await sql<(StepRow & { lease_renewed_at: Date | null })[]>`
    select * from browser_steps where account_id = ${accountId} and status = 'claimed'`;
  // A claim whose lease timer is late blocks the account until it lapses: the caller lapses it
  // (the same guarded statement as the timer) and asks again (decision 046).
  if (
    running?.claimed_at &&
    claimOverdue(
      { claimed_at: running.claimed_at, lease_renewed_at: running.lease_renewed_at },
      now,
      overdueClaimGraceSeconds,
    )
  )
    return { ...blocked('running'), overdue: running };
  // This browser's own claim whose answer it never got (a timeout, a restart): hand it back.
  if (running?.claim_session_id === session.id)
    return { step: null, sessionId: session.id, wait: null, yours: running };
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

/** How a browser of the account last introduced itself, when it has checked in before. */
export async function browserSession(sql: Db, accountId: string, browserId: string) {
  const [session] = await sql<{ browser_label: string; extension_version: string }[]>`
    select browser_label, extension_version from pnet_sessions
    where account_id = ${accountId} and browser_id = ${browserId}`;
  return session;
}
