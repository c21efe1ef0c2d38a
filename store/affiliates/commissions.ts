/**
 * Attributions and commissions (decision 043). Every move is guarded: a workspace is attributed
 * once (its primary key), converted once (`converted_at is null`), an invoice earns one commission
 * (its unique invoice id), and a commission's status moves by compare-and-set, so a redelivered
 * event, a retried activity or a killed worker changes nothing twice.
 */
import type { Db } from '../../db/sql.js';
import type { CommissionStatus } from '../../domain/affiliates/affiliates.js';

export interface AttributionRow {
  workspace_id: string;
  affiliate_id: string;
  code_id: string | null;
  click_id: string | null;
  signed_up_at: Date;
  signup_day: string;
  converted_at: Date | null;
  conversion_day: string | null;
  conversion_invoice_id: string | null;
  time_zone: string;
}

export interface CommissionRow {
  id: string;
  affiliate_id: string;
  workspace_id: string;
  invoice_id: string;
  payment_id: string;
  invoice_cents: number;
  amount_cents: number;
  status: CommissionStatus;
  earned_at: Date;
  earned_day: string;
  available_at: Date;
  matured_at: Date | null;
  refund_clawed_cents: number;
  dispute_status: 'open' | 'won' | 'lost' | null;
  dispute_clawed_cents: number;
  /** The maturation shard (decision 047), from the affiliate. */
  maturation_shard: number;
  created_at: Date;
}

/** Attributes a new workspace's signup to an affiliate; false when it was attributed before. */
export async function attributeSignup(
  tx: Db,
  a: { workspaceId: string; affiliateId: string; codeId: string | null; clickId: string | null; at: Date },
): Promise<boolean> {
  const rows = await tx`
    insert into affiliate_attributions (workspace_id, affiliate_id, code_id, click_id, signed_up_at, signup_day)
    select ${a.workspaceId}, id, ${a.codeId}, ${a.clickId}, ${a.at}, (${a.at}::timestamptz at time zone time_zone)::date
      from affiliates where id = ${a.affiliateId}
    on conflict (workspace_id) do nothing returning workspace_id`;
  return rows.length === 1;
}

/** The workspace's attribution, locked for the caller's transaction (billing events of one workspace apply one at a time anyway). */
export async function lockAttribution(tx: Db, workspaceId: string): Promise<AttributionRow | undefined> {
  const [row] = await tx<AttributionRow[]>`
    select t.*, a.time_zone from affiliate_attributions t join affiliates a on a.id = t.affiliate_id
     where t.workspace_id = ${workspaceId} for update of t`;
  return row;
}

/** Marks the first payment; the conversion time it keeps (an earlier one stays). */
export async function markConverted(tx: Db, workspaceId: string, at: Date, invoiceId: string | null): Promise<Date> {
  const [row] = await tx<{ converted_at: Date }[]>`
    update affiliate_attributions t
       set converted_at = ${at}, conversion_invoice_id = ${invoiceId},
           conversion_day = (${at}::timestamptz at time zone a.time_zone)::date
      from affiliates a
     where t.workspace_id = ${workspaceId} and a.id = t.affiliate_id and (t.converted_at is null or t.converted_at > ${at})
     returning t.converted_at`;
  if (row) return row.converted_at;
  const [kept] = await tx<
    { converted_at: Date }[]
  >`select converted_at from affiliate_attributions where workspace_id = ${workspaceId}`;
  return kept!.converted_at;
}

/** The invoice's commission; null when the invoice earned one before. */
export async function insertCommission(
  tx: Db,
  c: {
    affiliateId: string;
    workspaceId: string;
    invoiceId: string;
    paymentId: string;
    invoiceCents: number;
    amountCents: number;
    earnedAt: Date;
    availableAt: Date;
  },
): Promise<CommissionRow | null> {
  const [row] = await tx<CommissionRow[]>`
    insert into affiliate_commissions (affiliate_id, workspace_id, invoice_id, payment_id, invoice_cents, amount_cents, earned_at, earned_day, available_at)
    select ${c.affiliateId}, ${c.workspaceId}, ${c.invoiceId}, ${c.paymentId}, ${c.invoiceCents}, ${c.amountCents}, ${c.earnedAt},
           (${c.earnedAt}::timestamptz at time zone a.time_zone)::date, ${c.availableAt}
      from affiliates a where a.id = ${c.affiliateId}
    on conflict (invoice_id) do nothing returning *`;
  return row ?? null;
}

/** The commissions a payment earned, locked (a refund or dispute moves them in the billing event's transaction). */
export async function lockCommissionsOfPayment(tx: Db, paymentId: string): Promise<CommissionRow[]> {
  return tx<
    CommissionRow[]
  >`select * from affiliate_commissions where payment_id = ${paymentId} order by id for update`;
}

export async function commissionById(db: Db, id: string): Promise<CommissionRow | undefined> {
  const [row] = await db<CommissionRow[]>`select * from affiliate_commissions where id = ${id}`;
  return row;
}

/** Records what refunds took back in total; a fully refunded commission is clawed back. Compare-and-set on the previous total. */
export async function setRefundClawed(
  tx: Db,
  id: string,
  from: number,
  to: number,
  fullyClawed: boolean,
): Promise<boolean> {
  const rows = await tx`
    update affiliate_commissions
       set refund_clawed_cents = ${to}, status = case when ${fullyClawed} then 'clawed_back' else status end
     where id = ${id} and refund_clawed_cents = ${from} returning id`;
  return rows.length === 1;
}

export async function setDispute(
  tx: Db,
  id: string,
  from: string | null,
  to: 'open' | 'won' | 'lost',
  disputeClawedCents: number,
): Promise<boolean> {
  const rows = await tx`
    update affiliate_commissions
       set dispute_status = ${to}, dispute_clawed_cents = ${disputeClawedCents},
           status = case when ${to} = 'lost' and status <> 'held' then 'clawed_back' else status end
     where id = ${id} and dispute_status is not distinct from ${from} returning id`;
  return rows.length === 1;
}

/**
 * Maturation (decision 047) takes its shard's row lock first, in a statement of its own, so the
 * statements after it see every commission committed before it, and a webhook's wake check after
 * its commit (shardsToWake, which waits on that lock) reads the wake this transaction records.
 */
export async function lockMaturationShard(tx: Db, shard: number): Promise<void> {
  await tx`select shard from affiliate_maturation_shards where shard = ${shard} for no key update`;
}

/**
 * Matures every held commission of the shard due at `now` in one set-based compare-and-set
 * (held -> available, or clawed_back when its dispute was lost while it was held). Answers their ids.
 */
export async function matureDueCommissionsOfShard(tx: Db, shard: number, now: Date): Promise<string[]> {
  const rows = await tx<{ id: string }[]>`
    update affiliate_commissions
       set status = case when dispute_status = 'lost' then 'clawed_back' else 'available' end,
           matured_at = greatest(${now}::timestamptz, clock_timestamp())
     where maturation_shard = ${shard} and status = 'held' and available_at <= ${now}
     returning id`;
  return rows.map((r) => r.id);
}

/** Records (and answers) when the shard's maturation looks next: its soonest held commission's available_at, null when none is held. */
export async function recordShardWake(tx: Db, shard: number): Promise<Date | null> {
  const [row] = await tx<{ wake: Date | null }[]>`
    update affiliate_maturation_shards
       set wake_at = (select min(available_at) from affiliate_commissions where maturation_shard = ${shard} and status = 'held')
     where shard = ${shard}
     returning wake_at as wake`;
  return row?.wake ?? null;
}

/**
 * After a billing event's commit: the shards of these commissions whose maturation would not look
 * in time by itself (a held one due before the recorded wake, or no wake recorded). Waits on a look
 * holding the shard's lock, so it reads the wake that look records.
 */
export async function shardsToWake(db: Db, commissionIds: readonly string[]): Promise<number[]> {
  if (commissionIds.length === 0) return [];
  const rows = await db<{ shard: number }[]>`
    select s.shard
      from affiliate_commissions c join affiliate_maturation_shards s on s.shard = c.maturation_shard
     where c.id = any(${commissionIds as string[]}::uuid[]) and c.status = 'held'
       and (s.wake_at is null or s.wake_at > c.available_at)
       for share of s`;
  return [...new Set(rows.map((r) => r.shard))];
}

/**
 * The sweeper's read (a wake lost with a crash between a commit and its signal): shards with
 * commissions held since before `now - grace` whose recorded wake is missing, later than their
 * soonest held available_at, or long past (the workflow is gone or stuck).
 */
export async function shardsWithLostWake(db: Db, now: Date, graceMs: number): Promise<number[]> {
  const rows = await db<{ shard: number }[]>`
    select s.shard
      from (select maturation_shard, min(available_at) as soonest from affiliate_commissions
             where status = 'held' and created_at < ${now}::timestamptz - make_interval(secs => ${graceMs / 1000})
             group by maturation_shard) h
      join affiliate_maturation_shards s on s.shard = h.maturation_shard
     where s.wake_at is null
        or s.wake_at > h.soonest
        or s.wake_at < ${now}::timestamptz - make_interval(secs => ${graceMs / 1000})
     order by s.shard`;
  return rows.map((r) => r.shard);
}

/** A payment's refunded total and dispute as billing recorded them (billing_payments). */
export async function paymentMoney(
  db: Db,
  paymentId: string,
): Promise<{ refunded_cents: number; dispute_status: 'open' | 'won' | 'lost' | null } | undefined> {
  const [row] = await db<{ refunded_cents: number; dispute_status: 'open' | 'won' | 'lost' | null }[]>`
    select refunded_cents, dispute_status from billing_payments where payment_id = ${paymentId}`;
  return row;
}

/** For the benchmark: each matured commission's lag from available_at to being marked available, in ms. */
export async function maturationLagsMs(db: Db, ids: readonly string[]): Promise<number[]> {
  const rows = await db<{ lag: number }[]>`
    select extract(epoch from (matured_at - available_at)) * 1000 as lag
      from affiliate_commissions where id = any(${ids as string[]}::uuid[]) and matured_at is not null`;
  return rows.map((r) => Number(r.lag));
}

export async function countHeld(db: Db, ids: readonly string[]): Promise<number> {
  const [row] = await db<
    { n: number }[]
  >`select count(*)::int as n from affiliate_commissions where id = any(${ids as string[]}::uuid[]) and status = 'held'`;
  return row!.n;
}
