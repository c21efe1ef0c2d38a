/**
 * An account's line of steps and what its next step waits on, read by the heartbeat, the claim and
 * the account wrapper (readSenderPnetAccount) alike.
 */
import type postgres from 'postgres';
import type { Db } from '../../db/sql.js';
import type { AccountRow } from './account-rows.js';
import { workingWindow, type Wait } from '../../domain/pnet/pacing.js';
import { limitKindOf, messageKinds, type ActionKind } from '../../domain/pnet/limits.js';
import type { Usage } from '../../domain/pnet/accounts.js';
import { addDays, localWeekStart, nextLocalMidnight, zonedInstant } from '../../domain/shared/zoned-time.js';
import { claimLeaseSeconds, overdueClaimGraceSeconds } from '../../domain/pnet/timing.js';

/** The account columns the line's waits read (the heartbeat reads only these). */
export type LineAccount = Pick<
  AccountRow,
  | 'status'
  | 'checkpoint_status'
  | 'checkpoint_until'
  | 'timezone'
  | 'working_hours'
  | 'next_metered_at'
  | 'replies_failing'
  | 'inbox_next_check_at'
>;

export interface Line {
  /** Steps waiting for a browser: in line, or claimed with a lease overdue (the next claim lapses it first). */
  queued: number;
  approvals: number;
  /** A claim runs under a live lease (or one ended less than the grace ago). */
  running: boolean;
  /** When the running claim's lease, unrenewed, becomes overdue and the account's next claim frees it. */
  runningLapsesAt: Date | null;
  /** The browser session the running claim was handed to. */
  runningSessionId: string | null;
  /** Kinds of the unpaced steps waiting (test steps: no gap, no ceiling, no working hours). */
  unmeteredKinds: ActionKind[];
  /** Kinds of the metered steps waiting, the kind of the oldest step first. */
  meteredKinds: ActionKind[];
}

type LineRow = Omit<Line, 'running' | 'unmeteredKinds' | 'meteredKinds'> & {
  running: number;
  unmeteredKinds: ActionKind[] | null;
  meteredKinds: ActionKind[] | null;
};

/**
 * When a claim of `browser_steps`, its lease as last renewed, has been over for `graceSeconds`: the
 * SQL form of claimOverdue (domain/pnet/settle.ts), for the line and the sweeper alike.
 */
export const claimLapsesAtSql = (db: Db, graceSeconds: number) =>
  db`(greatest(claimed_at, coalesce(lease_renewed_at, claimed_at)) + make_interval(secs => ${claimLeaseSeconds + graceSeconds}))`;

/**
 * The line's counts as one row; a fragment too, so the heartbeat reads it inside its own
 * statement (there `account` is a column of the outer query, one line per account of the batch).
 * The waiting kinds, not only the oldest step's: a kind at its ceiling or held back by the inbox
 * read leaves the next kind free to run, and the wait says so as the claim would.
 */
export const lineSql = (db: Db, account: string | postgres.PendingQuery<postgres.Row[]>) => db<LineRow[]>`
    select
      count(*) filter (where status in ('queued', 'resuming') and not held or status = 'claimed' and not held and lapses_at <= now())::int as queued,
      count(*) filter (where status = 'awaiting_approval' and not held)::int as approvals,
      count(*) filter (where status = 'claimed' and (held or lapses_at > now()))::int as running,
      min(lapses_at) filter (where status = 'claimed') as "runningLapsesAt",
      min(claim_session_id::text) filter (where status = 'claimed') as "runningSessionId",
      array_agg(distinct kind) filter (where status in ('queued', 'resuming') and not held and not metered) as "unmeteredKinds",
      -- Looked up only when there is one: most accounts have nothing metered waiting.
      case when count(*) filter (where status in ('queued', 'resuming') and not held and metered) > 0 then
        (select array_agg(kind order by first_at) from (
          select kind, min(queued_at) as first_at from browser_steps
          where account_id = ${account} and status in ('queued', 'resuming') and not held and metered group by kind) k) end as "meteredKinds"
    from browser_steps
      cross join lateral (select ${claimLapsesAtSql(db, overdueClaimGraceSeconds)} as lapses_at) l
    -- Only live steps count; naming them lets the partial index browser_steps_live serve the read.
    where account_id = ${account} and status in ('awaiting_approval', 'queued', 'resuming', 'claimed')`;

export const toLine = (row: LineRow): Line => ({
  ...row,
  running: row.running > 0,
  // Read inside a JSON row by the heartbeat, as text there.
  runningLapsesAt: row.runningLapsesAt ? new Date(row.runningLapsesAt) : null,
  unmeteredKinds: row.unmeteredKinds ?? [],
  meteredKinds: row.meteredKinds ?? [],
});

export async function lineOf(db: Db, accountId: string): Promise<Line> {
  const [row] = await lineSql(db, accountId);
  return toLine(row!);
}

/** In WaitSchema's key order: a heartbeat's answer is written as built (routes/pnet-agent.ts). */
export const waitFor = (reason: Wait['reason'], next: Date | null, resets: Date | null = null): Wait => ({
  next_at: next?.toISOString() ?? null,
  reason,
  resets_at: resets?.toISOString() ?? null,
});

/** What holds metered work now: working hours, then the gap the last claim set (with jitter). */
export function pacingWait(account: LineAccount, now: Date): Wait | null {
  const hours = workingWindow(now, account.working_hours, account.timezone);
  if (!hours.open) return waitFor('outside_working_hours', hours.opensAt);
  if (account.next_metered_at && account.next_metered_at > now) return waitFor('gap', account.next_metered_at);
  return null;
}

/** A kind at its daily ceiling waits for local midnight, at its weekly one for Monday's. */
export function ceilingWait(account: LineAccount, usage: Usage[], kind: ActionKind, now: Date): Wait | null {
  const ceiling = usage.find((u) => u.kind === limitKindOf[kind])!;
  if (ceiling.used_today >= ceiling.daily_limit) {
    const midnight = nextLocalMidnight(now, account.timezone);
    return waitFor('daily_cap', midnight, midnight);
  }
  if (ceiling.used_this_week >= ceiling.weekly_limit) {
    const monday = zonedInstant(addDays(localWeekStart(now, account.timezone), 7), 0, 0, account.timezone);
    return waitFor('weekly_cap', monday, monday);
  }
  return null;
}

/** A message waits while the inbox read fails: the contact may have replied unseen. */
export function repliesWait(account: LineAccount, kind: ActionKind): Wait | null {
  return account.replies_failing && messageKinds.has(kind)
    ? waitFor('replies_check_failing', account.inbox_next_check_at)
    : null;
}

/** Whether a browser asking for unpaced steps alone (`unmetered_only`) would be handed one now. */
export function unpacedReady(account: LineAccount, line: Line): boolean {
  if (account.status !== 'connected' || account.checkpoint_status !== 'ok' || line.running) return false;
  return line.unmeteredKinds.some((kind) => !repliesWait(account, kind));
}

/**
 * What the next step waits on and until when; null while nothing is queued. It follows the
 * claim's own order (`pickClaimCandidate` in pnet-agent-store.ts): unpaced steps first, then the metered
 * kinds oldest first, each passed over while the inbox read holds it or its ceiling is reached.
 */
export function waitOf(
  account: LineAccount,
  line: Line,
  usage: Usage[],
  now: Date,
  sendingStopped: boolean,
): Wait | null {
  if (line.queued === 0) return null;
  if (account.status !== 'connected') return waitFor('not_connected', null);
  if (account.checkpoint_status !== 'ok') return waitFor('checkpoint', account.checkpoint_until);
  if (line.running) return waitFor('running', null);
  if (unpacedReady(account, line)) return waitFor('ready', now);
  let held: Wait | null = null;
  for (const kind of line.unmeteredKinds) held ??= repliesWait(account, kind);
  for (const kind of line.meteredKinds) {
    const replies = repliesWait(account, kind);
    if (replies) {
      held ??= replies;
      continue;
    }
    if (sendingStopped) return waitFor('paused', null);
    const paced = pacingWait(account, now);
    if (paced) return paced;
    const ceiling = ceilingWait(account, usage, kind, now);
    if (!ceiling) return waitFor('ready', now);
    held ??= ceiling;
  }
  return held ?? waitFor('ready', now);
}
