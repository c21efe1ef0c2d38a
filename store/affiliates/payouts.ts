/**
 * Affiliate payouts' SQL (decision 044): the program pause, payout settings, payouts, provider
 * batches. Money rows go through the ledger's appendAffiliateLedgerEntry (ledger.ts) in the
 * caller's transaction; every status move here is a compare-and-set on the status it expects.
 */
import type { Db } from '../../db/sql.js';
import type { PayoutStatus } from '../../domain/affiliates/payouts.js';
import { recordWorkspaceEvent } from '../notifications/outbox.js';

export interface PayoutRow {
  id: string;
  affiliate_id: string;
  workspace_id: string;
  period: string;
  amount_cents: number;
  currency: string;
  status: PayoutStatus;
  receiver_email: string;
  batch_id: string | null;
  provider_item_id: string | null;
  provider_status: string | null;
  failure_reason: string | null;
  created_at: Date;
  sent_at: Date | null;
  paid_at: Date | null;
  unclaimed_at: Date | null;
  returned_at: Date | null;
  failed_at: Date | null;
}

export interface PayoutSettingsRow {
  affiliate_id: string;
  workspace_id: string;
  payout_email: string | null;
  identity_verified: boolean;
  destination_hold: boolean;
  destination_hold_reason: 'returned' | 'failed' | 'operator' | null;
  destination_hold_since: Date | null;
  under_review: boolean;
  blocked: boolean;
  unavailable: boolean;
  note: string | null;
}

export interface PayoutBatchRow {
  id: string;
  sender_batch_id: string;
  period: string;
  status: 'open' | 'sent' | 'refused';
  provider_batch_id: string | null;
  created_at: Date;
}

// ---- The program pause ----

export async function payoutProgramPaused(db: Db): Promise<boolean> {
  const [row] = await db<{ paused: boolean }[]>`select paused from affiliate_payout_program where id`;
  return row?.paused ?? false;
}

export async function setPayoutProgramPaused(db: Db, paused: boolean, note: string | null): Promise<void> {
  await db`update affiliate_payout_program set paused = ${paused}, note = ${note}, updated_at = now() where id`;
}

// ---- Settings ----

export async function payoutSettings(db: Db, affiliateId: string): Promise<PayoutSettingsRow | undefined> {
  const [row] = await db<
    PayoutSettingsRow[]
  >`select * from affiliate_payout_settings where affiliate_id = ${affiliateId}`;
  return row;
}

/** Sets the payout email; a different address lifts a destination hold (the affiliate fixed where money goes). */
export async function setPayoutEmail(
  db: Db,
  input: { affiliateId: string; workspaceId: string; email: string | null },
): Promise<PayoutSettingsRow> {
  const [row] = await db<PayoutSettingsRow[]>`
    insert into affiliate_payout_settings (affiliate_id, workspace_id, payout_email)
    values (${input.affiliateId}, ${input.workspaceId}, ${input.email})
    on conflict (affiliate_id) do update set
      payout_email = excluded.payout_email,
      destination_hold = case when affiliate_payout_settings.payout_email is distinct from excluded.payout_email
                              and affiliate_payout_settings.destination_hold_reason is distinct from 'operator'
                              then false else affiliate_payout_settings.destination_hold end,
      destination_hold_reason = case when affiliate_payout_settings.payout_email is distinct from excluded.payout_email
                                     and affiliate_payout_settings.destination_hold_reason is distinct from 'operator'
                                     then null else affiliate_payout_settings.destination_hold_reason end,
      destination_hold_since = case when affiliate_payout_settings.payout_email is distinct from excluded.payout_email
                                    and affiliate_payout_settings.destination_hold_reason is distinct from 'operator'
                                    then null else affiliate_payout_settings.destination_hold_since end,
      updated_at = now()
    returning *`;
  return row!;
}

export type OperatorGate = 'under_review' | 'blocked' | 'unavailable' | 'identity_verified' | 'destination_hold';

/** An operator's switch on one gate (the admin command line). */
export async function setOperatorGate(
  db: Db,
  input: { affiliateId: string; workspaceId: string; gate: OperatorGate; on: boolean; note: string | null; now: Date },
): Promise<PayoutSettingsRow> {
  const on = input.on;
  const [row] = await db<PayoutSettingsRow[]>`
    insert into affiliate_payout_settings (affiliate_id, workspace_id) values (${input.affiliateId}, ${input.workspaceId})
    on conflict (affiliate_id) do update set updated_at = now()
    returning *`;
  switch (input.gate) {
    case 'under_review':
      return (
        await db<
          PayoutSettingsRow[]
        >`update affiliate_payout_settings set under_review = ${on}, note = coalesce(${input.note}, note), updated_at = now() where affiliate_id = ${row!.affiliate_id} returning *`
      )[0]!;
    case 'blocked':
      return (
        await db<
          PayoutSettingsRow[]
        >`update affiliate_payout_settings set blocked = ${on}, note = coalesce(${input.note}, note), updated_at = now() where affiliate_id = ${row!.affiliate_id} returning *`
      )[0]!;
    case 'unavailable':
      return (
        await db<
          PayoutSettingsRow[]
        >`update affiliate_payout_settings set unavailable = ${on}, note = coalesce(${input.note}, note), updated_at = now() where affiliate_id = ${row!.affiliate_id} returning *`
      )[0]!;
    case 'identity_verified':
      return (
        await db<PayoutSettingsRow[]>`
        update affiliate_payout_settings set identity_verified = ${on}, identity_verified_at = ${on ? input.now : null}, updated_at = now()
         where affiliate_id = ${row!.affiliate_id} returning *`
      )[0]!;
    case 'destination_hold':
      return (
        await db<PayoutSettingsRow[]>`
        update affiliate_payout_settings
           set destination_hold = ${on}, destination_hold_reason = ${on ? 'operator' : null}, destination_hold_since = ${on ? input.now : null},
               note = coalesce(${input.note}, note), updated_at = now()
         where affiliate_id = ${row!.affiliate_id} returning *`
      )[0]!;
  }
}

/** Holds the destination after a return or a failure (an operator's hold stays the operator's). */
export async function holdDestination(
  db: Db,
  affiliateId: string,
  reason: 'returned' | 'failed',
  since: Date,
): Promise<void> {
  await db`
    update affiliate_payout_settings
       set destination_hold = true, destination_hold_reason = ${reason}, destination_hold_since = ${since}, updated_at = now()
     where affiliate_id = ${affiliateId} and destination_hold_reason is distinct from 'operator'`;
}

// ---- What the gate reads ----

export interface GateSnapshotRow {
  affiliate_id: string;
  workspace_id: string;
  time_zone: string;
  payout_email: string | null;
  identity_verified: boolean | null;
  destination_hold: boolean | null;
  destination_hold_reason: string | null;
  destination_hold_since: Date | null;
  under_review: boolean | null;
  blocked: boolean | null;
  unavailable: boolean | null;
  periods: string[];
}

const gateColumns = (db: Db) => db`
  a.id as affiliate_id, a.workspace_id, a.time_zone,
  s.payout_email, s.identity_verified, s.destination_hold, s.destination_hold_reason, s.destination_hold_since,
  s.under_review, s.blocked, s.unavailable,
  coalesce((select array_agg(p.period) from affiliate_payouts p where p.affiliate_id = a.id), '{}') as periods`;

export async function gateSnapshot(db: Db, affiliateId: string): Promise<GateSnapshotRow | undefined> {
  const [row] = await db<GateSnapshotRow[]>`
    select ${gateColumns(db)} from affiliates a left join affiliate_payout_settings s on s.affiliate_id = a.id where a.id = ${affiliateId}`;
  return row;
}

/** Affiliates after `after` in id order, a page at a time (the cycle walks every affiliate). */
export async function gateSnapshotPage(db: Db, after: string | null, limit: number): Promise<GateSnapshotRow[]> {
  return db<GateSnapshotRow[]>`
    select ${gateColumns(db)} from affiliates a left join affiliate_payout_settings s on s.affiliate_id = a.id
     ${after ? db`where a.id > ${after}` : db``}
     order by a.id limit ${limit}`;
}

/** Held commission rows by when they mature (read-only: what the gate projects to the next payout day). */
export async function heldMaturities(
  db: Db,
  affiliateId: string,
): Promise<{ availableAt: Date; amountCents: number }[]> {
  const rows = await db<{ available_at: Date; amount_cents: number }[]>`
    select available_at, sum(amount_cents)::bigint as amount_cents
      from affiliate_ledger where affiliate_id = ${affiliateId} and held and available_at is not null
     group by available_at order by available_at`;
  return rows.map((r) => ({ availableAt: r.available_at, amountCents: r.amount_cents }));
}

// ---- Payouts ----

/** The period's payout, made once: null when the affiliate has one for the period already. */
export async function insertPayout(
  tx: Db,
  input: {
    affiliateId: string;
    workspaceId: string;
    period: string;
    amountCents: number;
    receiverEmail: string;
    now: Date;
  },
): Promise<PayoutRow | null> {
  const [row] = await tx<PayoutRow[]>`
    insert into affiliate_payouts (affiliate_id, workspace_id, period, amount_cents, receiver_email, created_at, updated_at)
    values (${input.affiliateId}, ${input.workspaceId}, ${input.period}, ${input.amountCents}, ${input.receiverEmail}, ${input.now}, ${input.now})
    on conflict (affiliate_id, period) do nothing
    returning *`;
  return row ?? null;
}

export async function payoutById(db: Db, id: string): Promise<PayoutRow | undefined> {
  const [row] = await db<PayoutRow[]>`select * from affiliate_payouts where id = ${id}`;
  return row;
}

export async function lockPayout(tx: Db, id: string): Promise<PayoutRow | undefined> {
  const [row] = await tx<PayoutRow[]>`select * from affiliate_payouts where id = ${id} for update`;
  return row;
}

/** Locks payouts in id order (a batch's items applied in one transaction). */
export async function lockPayouts(tx: Db, ids: string[]): Promise<PayoutRow[]> {
  if (ids.length === 0) return [];
  return tx<PayoutRow[]>`select * from affiliate_payouts where id = any(${ids}::uuid[]) order by id for update`;
}

export async function payoutsPage(
  db: Db,
  affiliateId: string,
  page: { limit: number; offset: number },
): Promise<PayoutRow[]> {
  return db<PayoutRow[]>`
    select * from affiliate_payouts where affiliate_id = ${affiliateId}
     order by created_at desc, id desc limit ${page.limit} offset ${page.offset}`;
}

/** Compare-and-set: moves a payout from `from` to `to` with the provider's word; false when it was not in `from`. */
export async function movePayout(
  tx: Db,
  input: {
    id: string;
    from: PayoutStatus;
    to: PayoutStatus;
    providerStatus: string | null;
    providerItemId: string | null;
    reason: string | null;
    now: Date;
  },
): Promise<boolean> {
  const rows = await tx`
    update affiliate_payouts set
      status = ${input.to},
      provider_status = coalesce(${input.providerStatus}, provider_status),
      provider_item_id = coalesce(${input.providerItemId}, provider_item_id),
      failure_reason = coalesce(${input.reason}, failure_reason),
      sent_at = case when sent_at is null and ${input.to} <> 'failed' then ${input.now}::timestamptz else sent_at end,
      paid_at = case when ${input.to} = 'paid' then ${input.now}::timestamptz else paid_at end,
      unclaimed_at = case when ${input.to} = 'unclaimed' then ${input.now}::timestamptz else unclaimed_at end,
      returned_at = case when ${input.to} = 'returned' then ${input.now}::timestamptz else returned_at end,
      failed_at = case when ${input.to} = 'failed' then ${input.now}::timestamptz else failed_at end,
      updated_at = now()
    where id = ${input.id} and status = ${input.from}
    returning id, affiliate_id, period, amount_cents, paid_at`;
  const moved = rows[0] as
    { id: string; affiliate_id: string; period: string; amount_cents: number; paid_at: Date } | undefined;
  // The money reached the affiliate: a workspace event (domain/notifications/events.ts), in this transaction.
  if (moved && input.to === 'paid') {
    const [affiliate] = await tx<
      { workspace_id: string }[]
    >`select workspace_id from affiliates where id = ${moved.affiliate_id}`;
    await recordWorkspaceEvent(tx, {
      workspaceId: affiliate!.workspace_id,
      type: 'affiliate.payout_sent',
      payload: {
        payout_id: moved.id,
        affiliate_id: moved.affiliate_id,
        period: moved.period,
        amount_cents: Number(moved.amount_cents),
        currency: 'usd',
        paid_at: moved.paid_at.toISOString(),
      },
    });
  }
  return moved !== undefined;
}

/** The provider's word without a status move (an item still PENDING or ONHOLD, its item id learnt). */
export async function notePayoutProvider(
  tx: Db,
  input: { id: string; providerStatus: string; providerItemId: string | null },
): Promise<void> {
  await tx`
    update affiliate_payouts set provider_status = ${input.providerStatus}, provider_item_id = coalesce(${input.providerItemId}, provider_item_id), updated_at = now()
     where id = ${input.id} and provider_status is distinct from ${input.providerStatus}`;
}

// ---- Batches ----

/** A batch still to be accepted (a crash between assigning and sending), if any, oldest first. */
export async function openBatch(db: Db): Promise<PayoutBatchRow | undefined> {
  const [row] = await db<
    PayoutBatchRow[]
  >`select * from affiliate_payout_batches where status = 'open' order by created_at limit 1`;
  return row;
}

/**
 * A new batch (labelled with the sending cycle's period) with up to `limit` held payouts no batch
 * has yet, of any period (one an earlier cycle could not send goes with this one); null when none is left.
 */
export async function assignNewBatch(
  tx: Db,
  input: { period: string; limit: number; senderBatchId: (batchId: string) => string },
): Promise<PayoutBatchRow | null> {
  const waiting = await tx<{ id: string }[]>`
    select id from affiliate_payouts where status = 'held' and batch_id is null
     order by created_at, id limit ${input.limit} for update skip locked`;
  if (waiting.length === 0) return null;
  const [fresh] = await tx<{ id: string }[]>`select gen_random_uuid() as id`;
  const id = fresh!.id;
  const [batch] = await tx<PayoutBatchRow[]>`
    insert into affiliate_payout_batches (id, sender_batch_id, period) values (${id}, ${input.senderBatchId(id)}, ${input.period}) returning *`;
  await tx`update affiliate_payouts set batch_id = ${id}, updated_at = now() where id in ${tx(waiting.map((w) => w.id))}`;
  return batch!;
}

export async function batchPayouts(db: Db, batchId: string): Promise<PayoutRow[]> {
  return db<PayoutRow[]>`select * from affiliate_payouts where batch_id = ${batchId} order by created_at, id`;
}

export async function markBatchSent(
  tx: Db,
  input: { batchId: string; providerBatchId: string; now: Date },
): Promise<void> {
  await tx`
    update affiliate_payout_batches set status = 'sent', provider_batch_id = ${input.providerBatchId}, sent_at = ${input.now}
     where id = ${input.batchId} and status = 'open'`;
}

/** A batch the provider refused: its payouts it did not name go back to wait for another batch. */
export async function markBatchRefused(tx: Db, batchId: string): Promise<void> {
  await tx`update affiliate_payout_batches set status = 'refused' where id = ${batchId} and status = 'open'`;
  await tx`update affiliate_payouts set batch_id = null, updated_at = now() where batch_id = ${batchId} and status = 'held'`;
}

/** Sent batches with a payout still open (created or unclaimed), for the cycle to read back. */
export async function batchesToFollow(db: Db): Promise<PayoutBatchRow[]> {
  return db<PayoutBatchRow[]>`
    select b.* from affiliate_payout_batches b
     where b.status = 'sent' and exists (select 1 from affiliate_payouts p where p.batch_id = b.id and p.status in ('held', 'created', 'unclaimed'))
     order by b.created_at`;
}

export async function countPayoutsByStatus(db: Db, period?: string): Promise<Record<string, number>> {
  const rows = await db<{ status: string; n: number }[]>`
    select status, count(*)::int as n from affiliate_payouts ${period ? db`where period = ${period}` : db``} group by status`;
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

// ---- Forfeiture ----

/** The cause key of the forfeiture of one destination hold: a hold forfeits once. */
export function forfeitureCauseKey(affiliateId: string, holdSince: Date): string {
  return `forfeiture:${affiliateId}:${holdSince.getTime()}`;
}

/** Affiliates whose destination has been held since a return for the forfeiture period or longer, and not yet forfeited for that hold. */
export async function forfeitureCandidates(
  db: Db,
  heldSinceBefore: Date,
  limit: number,
): Promise<{ affiliate_id: string; destination_hold_since: Date }[]> {
  return db<{ affiliate_id: string; destination_hold_since: Date }[]>`
    select s.affiliate_id, s.destination_hold_since from affiliate_payout_settings s
     where s.destination_hold and s.destination_hold_reason = 'returned' and s.destination_hold_since <= ${heldSinceBefore}
       and not exists (select 1 from affiliate_ledger l
                        where l.cause_key = 'forfeiture:' || s.affiliate_id || ':' || round(extract(epoch from s.destination_hold_since) * 1000)::bigint)
     order by s.affiliate_id limit ${limit}`;
}
