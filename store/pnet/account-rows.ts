/**
 * A pnet account as the workflows' activities and the API both read it: the row with its
 * sender's time zone, and today's and this week's usage against the ceilings in force.
 */
import type { Db } from '../../db/sql.js';
import {
  dailyKey,
  defaultLimits,
  effectiveLimit,
  limitKinds,
  warmUpShare,
  weeklyKey,
  type Limits,
} from '../../domain/pnet/limits.js';
import type { PnetAccount, Usage } from '../../domain/pnet/accounts.js';
import type { RunMode, WorkingHours } from '../../domain/pnet/sender-profiles.js';
import { addDays, formatLocalDate, localDate, localWeekStart } from '../../domain/shared/zoned-time.js';

export interface AccountRow {
  id: string;
  workspace_id: string;
  sender_profile_id: string;
  timezone: string;
  status: PnetAccount['status'];
  checkpoint_status: PnetAccount['checkpoint_status'];
  display_name: string | null;
  headline: string | null;
  photo_url: string | null;
  vanity_name: string | null;
  member_urn: string | null;
  run_mode: RunMode;
  min_action_interval_seconds: number;
  working_hours: WorkingHours;
  limits: Limits;
  connection_token_version: number;
  connected_at: Date | null;
  last_seen_at: Date | null;
  lease_session_id: string | null;
  lease_expires_at: Date | null;
  next_metered_at: Date | null;
  resume_enabled: boolean;
  attempts_enabled: boolean;
  checkpoint_until: Date | null;
  checkpoints_reported: number;
  replies_failing: boolean;
  replies_last_read_at: Date | null;
  connections_last_checked_at: Date | null;
  connections_next_check_at: Date | null;
  inbox_next_check_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** An account with its sender's time zone, locked for update when inside a transaction that asks. */
export async function loadAccount(db: Db, accountId: string, forUpdate = false): Promise<AccountRow | undefined> {
  const [row] = await db<AccountRow[]>`
    select a.*, p.timezone from pnet_accounts a join sender_profiles p on p.id = a.sender_profile_id
    where a.id = ${accountId} ${forUpdate ? db`for update of a` : db``}`;
  return row;
}

/** The account columns its usage reads. */
export type UsageAccount = Pick<AccountRow, 'id' | 'timezone' | 'connected_at' | 'limits'>;

export async function usageOf(db: Db, row: UsageAccount, now: Date): Promise<Usage[]> {
  const today = formatLocalDate(localDate(now, row.timezone));
  const weekStart = localWeekStart(now, row.timezone);
  const weekEnd = formatLocalDate(addDays(weekStart, 6));
  const counts = await db<UsageCount[]>`
    select limit_kind,
      coalesce(sum(used) filter (where local_date = ${today}::date), 0)::int as today,
      sum(used)::int as week
    from pnet_usage
    where account_id = ${row.id} and local_date between ${formatLocalDate(weekStart)}::date and ${weekEnd}::date
    group by limit_kind`;
  return usageFrom(row, counts, now);
}

interface UsageCount {
  limit_kind: string;
  today: number;
  week: number;
}

/**
 * The days whose usage rows can matter at `now` in any time zone (a local date is within a day of
 * UTC's, its week within six more): a statement that reads the account and its zone at once (the
 * check-in) reads these rows and leaves the zone's arithmetic to usageFromDays.
 */
export function usageDaysAround(now: Date): { from: string; to: string } {
  const utc = { year: now.getUTCFullYear(), month: now.getUTCMonth() + 1, day: now.getUTCDate() };
  return { from: formatLocalDate(addDays(utc, -8)), to: formatLocalDate(addDays(utc, 8)) };
}

/** usageOf from the account's usage rows of usageDaysAround(now): the same sums, counted here. */
export function usageFromDays(
  row: UsageAccount,
  days: { local_date: string; limit_kind: string; used: number }[],
  now: Date,
): Usage[] {
  const today = formatLocalDate(localDate(now, row.timezone));
  const weekStart = localWeekStart(now, row.timezone);
  const from = formatLocalDate(weekStart);
  const to = formatLocalDate(addDays(weekStart, 6));
  const counts = new Map<string, UsageCount>();
  for (const d of days) {
    // ISO dates compare as strings.
    if (d.local_date < from || d.local_date > to) continue;
    const c = counts.get(d.limit_kind) ?? { limit_kind: d.limit_kind, today: 0, week: 0 };
    c.week += d.used;
    if (d.local_date === today) c.today += d.used;
    counts.set(d.limit_kind, c);
  }
  return usageFrom(row, [...counts.values()], now);
}

/** Each ceiling kind with its two settings' keys, worked out once (every check-in reads them). */
const ceilingKeys = limitKinds.map((kind) => ({ kind, daily: dailyKey(kind), weekly: weeklyKey(kind) }));

function usageFrom(row: UsageAccount, counts: UsageCount[], now: Date): Usage[] {
  const byKind = new Map(counts.map((c) => [c.limit_kind, c]));
  const days = row.connected_at ? Math.floor((now.getTime() - row.connected_at.getTime()) / 86_400_000) : null;
  const share = warmUpShare(days);
  const limits = row.limits as Partial<typeof defaultLimits>;
  return ceilingKeys.map(({ kind, daily, weekly }) => ({
    kind,
    used_today: byKind.get(kind)?.today ?? 0,
    daily_limit: effectiveLimit(limits[daily] ?? defaultLimits[daily], share),
    used_this_week: byKind.get(kind)?.week ?? 0,
    weekly_limit: effectiveLimit(limits[weekly] ?? defaultLimits[weekly], share),
  }));
}
