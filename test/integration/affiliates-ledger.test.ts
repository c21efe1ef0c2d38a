/**
 * The affiliate ledger's contract (the payout side writes through it too): a cause key writes once,
 * and available + held is always the ledger's sum, held rows counting once their commission matures.
 */
import { describe, expect, it } from 'vitest';
import { insertAffiliate } from '../../store/affiliates/affiliates.js';
import { affiliateBalances, appendAffiliateLedgerEntry, releaseHeldEntries } from '../../store/affiliates/ledger.js';
import { useTestDatabase } from '../support/database.js';

const db = useTestDatabase();

async function affiliate(): Promise<string> {
  const [w] = await db.sql<
    { id: string }[]
  >`insert into workspaces (name, plan) values ('Affiliate', 'paid') returning id`;
  const { affiliate } = await insertAffiliate(db.sql, { workspaceId: w!.id, displayName: 'Ann', timeZone: 'UTC' });
  return affiliate.id;
}

describe('affiliate ledger', () => {
  it('writes a cause once and answers null for the repeat', async () => {
    const affiliateId = await affiliate();
    const first = await appendAffiliateLedgerEntry(db.sql, {
      affiliateId,
      kind: 'adjustment',
      amountCents: 250,
      description: 'goodwill',
      causeKey: `adj:${affiliateId}`,
    });
    expect(first).toMatchObject({ kind: 'adjustment', amount_cents: 250, held: false, currency: 'usd' });
    const again = await appendAffiliateLedgerEntry(db.sql, {
      affiliateId,
      kind: 'adjustment',
      amountCents: 250,
      description: 'goodwill',
      causeKey: `adj:${affiliateId}`,
    });
    expect(again).toBeNull();
    expect(await affiliateBalances(db.sql, affiliateId, new Date())).toEqual({ availableCents: 250, heldCents: 0 });
  });

  it('holds a commission until it matures, and the two balances always sum to the ledger', async () => {
    const affiliateId = await affiliate();
    const [w] = await db.sql<{ workspace_id: string }[]>`select workspace_id from affiliates where id = ${affiliateId}`;
    const availableAt = new Date(Date.now() + 86_400_000);
    const [c] = await db.sql<{ id: string }[]>`
      insert into affiliate_commissions (affiliate_id, workspace_id, invoice_id, payment_id, invoice_cents, amount_cents, earned_at, earned_day, available_at)
      values (${affiliateId}, ${w!.workspace_id}, ${'in_' + affiliateId}, 'pi_1', 4900, 980, now(), current_date, ${availableAt}) returning id`;
    await appendAffiliateLedgerEntry(db.sql, {
      affiliateId,
      kind: 'commission',
      amountCents: 980,
      description: 'c',
      causeKey: `commission:${c!.id}`,
      availableAt,
      commissionId: c!.id,
    });
    await appendAffiliateLedgerEntry(db.sql, {
      affiliateId,
      kind: 'payout',
      amountCents: -100,
      description: 'p',
      causeKey: `payout:${affiliateId}`,
    });
    expect(await affiliateBalances(db.sql, affiliateId, new Date())).toEqual({ availableCents: -100, heldCents: 980 });
    expect(await releaseHeldEntries(db.sql, c!.id)).toBe(1);
    expect(await releaseHeldEntries(db.sql, c!.id)).toBe(0);
    const b = await affiliateBalances(db.sql, affiliateId, new Date());
    expect(b).toEqual({ availableCents: 880, heldCents: 0 });
    const [sum] = await db.sql<
      { s: number }[]
    >`select sum(amount_cents)::bigint as s from affiliate_ledger where affiliate_id = ${affiliateId}`;
    expect(b.availableCents + b.heldCents).toBe(sum!.s);
  });

  it('refuses cents that are not whole', async () => {
    const affiliateId = await affiliate();
    await expect(
      appendAffiliateLedgerEntry(db.sql, {
        affiliateId,
        kind: 'adjustment',
        amountCents: 1.5,
        description: 'x',
        causeKey: `frac:${affiliateId}`,
      }),
    ).rejects.toThrow(/whole cents/);
  });
});
