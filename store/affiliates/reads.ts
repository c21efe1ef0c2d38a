/**
 * The affiliate's reads (the interface spec's Affiliate program): daily stats, the feed, held
 * maturities and the performance window's sums.
 */
import type { Db } from '../../db/sql.js';
import type { FeedKind } from '../../domain/affiliates/affiliates.js';

export interface DailyStatRow {
  day: string;
  clicks: number;
  signups: number;
  conversions: number;
  earned_cents: number;
}

/** One row per day from `from` to `to` (the affiliate's days, inclusive), quiet days as zeros, oldest first. */
export async function dailyStats(db: Db, affiliateId: string, from: string, to: string): Promise<DailyStatRow[]> {
  return db<DailyStatRow[]>`
    with days as (select d::date as day from generate_series(${from}::date, ${to}::date, interval '1 day') d),
    clicks as (select day, count(*)::int as n from affiliate_clicks where affiliate_id = ${affiliateId} and day between ${from}::date and ${to}::date group by day),
    signups as (select signup_day as day, count(*)::int as n from affiliate_attributions where affiliate_id = ${affiliateId} and signup_day between ${from}::date and ${to}::date group by signup_day),
    conversions as (select conversion_day as day, count(*)::int as n from affiliate_attributions where affiliate_id = ${affiliateId} and conversion_day between ${from}::date and ${to}::date group by conversion_day),
    earned as (select earned_day as day, sum(amount_cents)::bigint as n from affiliate_commissions where affiliate_id = ${affiliateId} and earned_day between ${from}::date and ${to}::date group by earned_day)
    select to_char(days.day, 'YYYY-MM-DD') as day, coalesce(clicks.n, 0) as clicks, coalesce(signups.n, 0) as signups,
           coalesce(conversions.n, 0) as conversions, coalesce(earned.n, 0)::bigint as earned_cents
      from days
      left join clicks using (day) left join signups using (day) left join conversions using (day) left join earned using (day)
     order by days.day`;
}

export interface FeedRow {
  kind: FeedKind;
  occurred_at: Date;
  amount_cents: number | null;
}

/**
 * The feed, newest first: signups and conversions (no amount), and the ledger's money rows by
 * kind: commission; clawback (refund and dispute clawbacks, and a won dispute's reversal as a
 * positive clawback); payout (a payout, and an adjustment such as a returned payout's money back);
 * forfeiture.
 */
export async function feedPage(db: Db, affiliateId: string, limit: number, offset: number): Promise<FeedRow[]> {
  return db<FeedRow[]>`
    select kind, occurred_at, amount_cents from (
      select 'signup' as kind, signed_up_at as occurred_at, null::bigint as amount_cents, workspace_id::text as tie
        from affiliate_attributions where affiliate_id = ${affiliateId}
      union all
      select 'conversion', converted_at, null, workspace_id::text from affiliate_attributions where affiliate_id = ${affiliateId} and converted_at is not null
      union all
      select case kind when 'commission' then 'commission' when 'forfeiture' then 'forfeiture'
                       when 'payout' then 'payout' when 'adjustment' then 'payout' else 'clawback' end,
             occurred_at, amount_cents, id::text
        from affiliate_ledger where affiliate_id = ${affiliateId}
    ) f
    order by occurred_at desc, tie desc
    limit ${limit} offset ${offset}`;
}

/** Held money by the day it matures (the affiliate's day), soonest first. */
export async function heldByDay(
  db: Db,
  affiliateId: string,
  timeZone: string,
): Promise<{ day: string; amount_cents: number }[]> {
  return db<{ day: string; amount_cents: number }[]>`
    select to_char((available_at at time zone ${timeZone})::date, 'YYYY-MM-DD') as day, sum(amount_cents)::bigint as amount_cents
      from affiliate_ledger where affiliate_id = ${affiliateId} and held
     group by 1 having sum(amount_cents) <> 0 order by 1`;
}

export interface WindowSums {
  clicks: number;
  signups: number;
  conversions: number;
  earned_cents: number;
  commissions: number;
  active_count: number;
}

/** Sums over the affiliate's days from `from` to `to` (inclusive). */
export async function windowSums(db: Db, affiliateId: string, from: string, to: string): Promise<WindowSums> {
  const [row] = await db<WindowSums[]>`
    select
      (select count(*)::int from affiliate_clicks where affiliate_id = ${affiliateId} and day between ${from}::date and ${to}::date) as clicks,
      (select count(*)::int from affiliate_attributions where affiliate_id = ${affiliateId} and signup_day between ${from}::date and ${to}::date) as signups,
      (select count(*)::int from affiliate_attributions where affiliate_id = ${affiliateId} and conversion_day between ${from}::date and ${to}::date) as conversions,
      c.earned_cents, c.commissions, c.active_count
    from (select coalesce(sum(amount_cents), 0)::bigint as earned_cents, count(*)::int as commissions, count(distinct workspace_id)::int as active_count
            from affiliate_commissions where affiliate_id = ${affiliateId} and earned_day between ${from}::date and ${to}::date) c`;
  return row!;
}

export interface LifetimeRow {
  gross_cents: number;
  clawed_back_cents: number;
  last_signup_at: Date | null;
  last_conversion_at: Date | null;
  last_commission_at: Date | null;
  never_paid_count: number;
  window_closed_count: number;
}

export async function lifetime(db: Db, affiliateId: string, commissionMonths: number, now: Date): Promise<LifetimeRow> {
  const [row] = await db<LifetimeRow[]>`
    select
      (select coalesce(sum(amount_cents), 0)::bigint from affiliate_ledger where affiliate_id = ${affiliateId} and kind = 'commission') as gross_cents,
      (select coalesce(-sum(amount_cents), 0)::bigint from affiliate_ledger where affiliate_id = ${affiliateId} and kind in ('clawback_refund', 'clawback_dispute', 'dispute_reversal')) as clawed_back_cents,
      (select max(signed_up_at) from affiliate_attributions where affiliate_id = ${affiliateId}) as last_signup_at,
      (select max(converted_at) from affiliate_attributions where affiliate_id = ${affiliateId}) as last_conversion_at,
      (select max(earned_at) from affiliate_commissions where affiliate_id = ${affiliateId}) as last_commission_at,
      (select count(*)::int from affiliate_attributions where affiliate_id = ${affiliateId} and converted_at is null) as never_paid_count,
      (select count(*)::int from affiliate_attributions where affiliate_id = ${affiliateId} and converted_at is not null
          and converted_at + make_interval(months => ${commissionMonths}) <= ${now}) as window_closed_count`;
  return row!;
}
