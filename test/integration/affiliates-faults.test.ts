/**
 * The affiliate maturation fault test (decision 047): commissions held a few seconds mature while
 * the worker running the commission maturation workflows is killed again and again, and refunds
 * arrive inside the holding period. Afterwards no refunded commission is available, every other one
 * is, each is credited once, and every affiliate's ledger sums to its balances to the cent.
 */
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import type { BillingEvent } from '../../domain/billing/provider-events.js';
import { wakeCommissions } from '../../services/affiliates/maturation.js';
import { handleBillingEvent } from '../../services/billing/events.js';
import { insertAffiliate, insertAffiliateCode } from '../../store/affiliates/affiliates.js';
import { affiliateBalances } from '../../store/affiliates/ledger.js';
import { createWorkspaceWithAdmin } from '../../worker/provisioning.js';
import { commissionMaturationWorkflowId } from '../../workflows/affiliates/commission-maturation.contract.js';
import { useFaultWorkers } from '../support/fault-workers.js';
import { useTestStack } from '../support/test-stack.js';

const { stack } = useTestStack({ workspaces: false });
const faults = useFaultWorkers(stack);
let seed = 7;
const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const holdingMs = 4000;

const event = (workspaceId: string, kind: 'paid' | 'refund', invoiceId: string): BillingEvent => {
  const at = new Date();
  const base = { id: `evt_${randomBytes(6).toString('hex')}`, occurredAt: at, workspaceId, customerId: null };
  return kind === 'paid'
    ? {
        ...base,
        type: 'invoice.paid',
        kind: 'invoice_paid',
        invoiceId,
        subscriptionId: null,
        paymentId: null,
        amountDueCents: 4900,
        amountPaidCents: 4900,
        currency: 'usd',
        periodStart: null,
        periodEnd: null,
        hostedInvoiceUrl: null,
        createdAt: at,
      }
    : {
        ...base,
        type: 'charge.refunded',
        kind: 'charge_refunded',
        paymentId: invoiceId,
        amountCents: 4900,
        refundedCents: 4900,
        currency: 'usd',
        createdAt: at,
      };
};

it('matures every unrefunded commission once and none refunded inside its holding period, through killed workers', async () => {
  const affiliates: { id: string; code: string }[] = [];
  for (let i = 0; i < 4; i += 1) {
    const owner = await stack.createWorkspace('paid');
    const { affiliate } = await insertAffiliate(stack.sql, {
      workspaceId: owner.workspaceId,
      displayName: `A${i}`,
      timeZone: 'UTC',
    });
    const code = `fault-${i}-${randomBytes(3).toString('hex')}`;
    await insertAffiliateCode(stack.sql, {
      affiliateId: affiliate.id,
      workspaceId: owner.workspaceId,
      code,
      isVanity: true,
    });
    affiliates.push({ id: affiliate.id, code });
  }
  const referred: string[] = [];
  for (let i = 0; i < 16; i += 1)
    referred.push(
      (
        await createWorkspaceWithAdmin(stack.sql, {
          name: `R${i}`,
          plan: 'free',
          affiliateCode: affiliates[i % 4]!.code,
        })
      ).workspace_id,
    );

  const wake = (ids: string[], reason: 'created' | 'refund') =>
    wakeCommissions(stack.client, faults.taskQueue, stack.sql, ids, reason);
  const refunded = new Set<string>();
  const all: string[] = [];
  const chaos = (async () => {
    for (let k = 0; k < 8; k += 1) {
      await sleep(1500);
      await faults.replace();
    }
  })();
  const work: Promise<void>[] = [];
  for (let i = 0; i < 60; i += 1) {
    const workspaceId = referred[i % referred.length]!;
    const invoiceId = `in_fault_${i}_${randomBytes(3).toString('hex')}`;
    const { affiliateCommissionIds } = await handleBillingEvent(stack.sql, event(workspaceId, 'paid', invoiceId), {
      holdingMs,
    });
    all.push(...affiliateCommissionIds);
    await wake(affiliateCommissionIds, 'created');
    // Half are refunded at a random moment inside the holding period (the event dated then).
    if (random() < 0.5) {
      work.push(
        (async () => {
          await sleep(random() * (holdingMs - 1000));
          const result = await handleBillingEvent(stack.sql, event(workspaceId, 'refund', invoiceId), { holdingMs });
          for (const id of result.affiliateCommissionIds) refunded.add(id);
          await wake(result.affiliateCommissionIds, 'refund');
        })(),
      );
    }
    await sleep(100);
  }
  await Promise.all(work);
  await chaos;
  expect(faults.workers.length).toBeGreaterThanOrEqual(9);

  // Correctness, not speed (bench:affiliates measures the lag): a loaded CI machine gets time to recover from the kills.
  const deadline = Date.now() + 60_000;
  const held = async () =>
    (
      await stack.sql<
        { n: number }[]
      >`select count(*)::int as n from affiliate_commissions where id = any(${all}::uuid[]) and status = 'held'`
    )[0]!.n;
  while ((await held()) > 0 && Date.now() < deadline) await sleep(500);
  // What a stalled shard looked like, should one stall: its held commissions, its recorded wake, its workflow.
  const stalled = await stack.sql<{ shard: number; held: number; soonest: Date; wake_at: Date | null }[]>`
    select c.maturation_shard as shard, count(*)::int as held, min(c.available_at) as soonest, s.wake_at
      from affiliate_commissions c join affiliate_maturation_shards s on s.shard = c.maturation_shard
     where c.id = any(${all}::uuid[]) and c.status = 'held' group by c.maturation_shard, s.wake_at`;
  const described = await Promise.all(
    stalled.map(async (s) => {
      const d = await stack.client.workflow
        .getHandle(commissionMaturationWorkflowId(faults.taskQueue, s.shard))
        .describe()
        .catch((e: Error) => e.message);
      return {
        ...s,
        workflow:
          typeof d === 'string' ? d : `${d.status.name} since ${d.startTime.toISOString()}, ${d.historyLength} events`,
      };
    }),
  );
  expect(described).toEqual([]);

  const rows = await stack.sql<{ id: string; status: string; affiliate_id: string; amount_cents: number }[]>`
    select id, status, affiliate_id, amount_cents from affiliate_commissions where id = any(${all}::uuid[])`;
  expect(rows).toHaveLength(60);
  expect(refunded.size).toBeGreaterThan(10);
  for (const r of rows)
    expect({ id: r.id, status: r.status }).toEqual({
      id: r.id,
      status: refunded.has(r.id) ? 'clawed_back' : 'available',
    });
  const credited =
    await stack.sql`select commission_id from affiliate_ledger where commission_id = any(${all}::uuid[]) and kind = 'commission' group by commission_id having count(*) <> 1`;
  expect(credited).toEqual([]);
  for (const a of affiliates) {
    const balances = await affiliateBalances(stack.sql, a.id);
    const [sum] = await stack.sql<
      { s: number }[]
    >`select coalesce(sum(amount_cents), 0)::bigint as s from affiliate_ledger where affiliate_id = ${a.id}`;
    expect(balances.availableCents + balances.heldCents).toBe(sum!.s);
    const expected = rows
      .filter((r) => r.affiliate_id === a.id && r.status === 'available')
      .reduce((t, r) => t + r.amount_cents, 0);
    expect(balances).toEqual({ availableCents: expected, heldCents: 0 });
  }
}, 150_000);
