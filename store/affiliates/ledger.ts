/**
 * The affiliate ledger (decision 043): every money movement of an affiliate is one row of signed
 * USD cents with a unique cause key, so a redelivered event, a retried activity or a killed worker
 * never moves money twice. A row is held (a commission in its holding period, and what clawed it
 * back or reversed that while it was held) or available; the maturation flips a commission's held
 * rows in the transaction that marks it available. So available + held is always the ledger's sum.
 * Payouts and forfeitures (store/affiliates/payouts.ts) write their rows through
 * appendAffiliateLedgerEntry.
 */
import type { Db } from '../../db/sql.js';
import type { AffiliateLedgerKind } from '../../domain/affiliates/affiliates.js';

export interface AffiliateLedgerRow {
  id: string;
  affiliate_id: string;
  kind: AffiliateLedgerKind;
  amount_cents: number;
  currency: string;
  description: string;
  cause_key: string;
  commission_id: string | null;
  held: boolean;
  available_at: Date | null;
  occurred_at: Date;
}

export interface AffiliateLedgerEntryInput {
  affiliateId: string;
  kind: AffiliateLedgerKind;
  /** Signed integer USD cents: credits positive, clawbacks, payouts and forfeitures negative. */
  amountCents: number;
  description: string;
  /** Unique across the service: 'commission:<invoice>', 'payout:<payout id>', ... */
  causeKey: string;
  /** A commission's maturity: the row is held until its commission is marked available. */
  availableAt?: Date | null;
  commissionId?: string | null;
  /** Counted as held (default: held when availableAt is given and still ahead, else available). */
  held?: boolean;
  occurredAt?: Date;
}

/** Writes one ledger row inside the caller's transaction; null when its cause key was written before. */
export async function appendAffiliateLedgerEntry(
  tx: Db,
  e: AffiliateLedgerEntryInput,
): Promise<AffiliateLedgerRow | null> {
  if (!Number.isSafeInteger(e.amountCents)) throw new Error(`A ledger amount is whole cents, not ${e.amountCents}.`);
  const occurredAt = e.occurredAt ?? new Date();
  const held = e.held ?? (e.availableAt != null && e.availableAt > occurredAt);
  const rows = await tx<AffiliateLedgerRow[]>`
    insert into affiliate_ledger (affiliate_id, kind, amount_cents, description, cause_key, commission_id, held, available_at, occurred_at)
    values (${e.affiliateId}, ${e.kind}, ${e.amountCents}, ${e.description}, ${e.causeKey}, ${e.commissionId ?? null},
            ${held}, ${e.availableAt ?? null}, ${occurredAt})
    on conflict (cause_key) do nothing
    returning *`;
  return rows[0] ?? null;
}

export interface AffiliateBalances {
  availableCents: number;
  heldCents: number;
}

/**
 * What a payout may take (available: matured commissions minus clawbacks, payouts and forfeitures,
 * plus reversals and returns) and what is still in its holding period. Both are sums of the
 * ledger's rows, so they add up to the ledger to the cent. A commission counts as available once
 * its maturation marked it so (the durable timer), not merely once `available_at` has passed, so
 * a refund arriving while the worker was down is still in time; `_now` is kept for the callers'
 * contract and changes nothing.
 */
export async function affiliateBalances(db: Db, affiliateId: string, _now?: Date): Promise<AffiliateBalances> {
  const [row] = await db<{ available: number; held: number }[]>`
    select coalesce(sum(amount_cents) filter (where not held), 0)::bigint as available,
           coalesce(sum(amount_cents) filter (where held), 0)::bigint as held
      from affiliate_ledger
     where affiliate_id = ${affiliateId}`;
  return { availableCents: row!.available, heldCents: row!.held };
}

/** Releases a matured commission's held rows (its credit and any clawback or reversal made while held). */
export async function releaseHeldEntries(tx: Db, commissionId: string): Promise<number> {
  const rows =
    await tx`update affiliate_ledger set held = false where commission_id = ${commissionId} and held returning id`;
  return rows.length;
}

/** Releases the held rows of commissions matured together (decision 047: one statement for all of an affiliate's due commissions). */
export async function releaseHeldEntriesOf(tx: Db, commissionIds: readonly string[]): Promise<number> {
  if (commissionIds.length === 0) return 0;
  const rows =
    await tx`update affiliate_ledger set held = false where commission_id = any(${commissionIds as string[]}::uuid[]) and held returning id`;
  return rows.length;
}

/** The ledger, newest first, a page at a time. */
export async function ledgerPage(
  db: Db,
  affiliateId: string,
  page: { limit: number; offset: number },
): Promise<AffiliateLedgerRow[]> {
  return db<AffiliateLedgerRow[]>`
    select * from affiliate_ledger where affiliate_id = ${affiliateId}
     order by occurred_at desc, id desc limit ${page.limit} offset ${page.offset}`;
}
