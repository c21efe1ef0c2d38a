/**
 * Commission maturation on the time-skipping server (decision 047): the shard's
 * `commission-maturation/<shard>` workflow, woken the way the webhook wakes it, sleeps until the
 * next available_at and marks what is due available; a refund inside the holding period claws it
 * back and it never becomes available, a refund after it changes nothing, a dispute claws back and
 * a won one gives it back; a holding period across a daylight-saving change matures on the right
 * local day; many commissions due at one moment mature in one look; and a lost wake is caught by
 * the sweeper.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createCommissionMaturationActivities } from '../../activities/affiliates/maturation.js';
import type { BillingEvent } from '../../domain/billing/provider-events.js';
import { handleBillingEvent } from '../../services/billing/events.js';
import { affiliateMaturities } from '../../services/affiliates/affiliates.js';
import { sweepLostMaturationWakes, wakeCommissions } from '../../services/affiliates/maturation.js';
import { insertAffiliate, insertAffiliateCode } from '../../store/affiliates/affiliates.js';
import { affiliateBalances } from '../../store/affiliates/ledger.js';
import type { commissionMaturationWorkflow } from '../../workflows/affiliates/commission-maturation.js';
import { commissionMaturationWorkflowId } from '../../workflows/affiliates/commission-maturation.contract.js';
import { createWorkspaceWithAdmin } from '../../worker/provisioning.js';
import { useTestStack } from '../support/test-stack.js';
import { useTimeSkippingWorker } from '../support/time-skipping.js';

const { stack } = useTestStack({ workspaces: false });
const taskQueue = 'affiliate-maturation';
const ctx = useTimeSkippingWorker(taskQueue, () => createCommissionMaturationActivities({ sql: stack.sql }));
const day = 86_400_000;
const holding = { holdingMs: 30 * day };

const envNow = async () => new Date(await ctx.env.currentTimeMs());
const base = (kind: string, workspaceId: string, at: Date) => ({
  id: `evt_${randomBytes(6).toString('hex')}`,
  type: kind,
  occurredAt: at,
  workspaceId,
  customerId: null,
});

async function referredWorkspace(timeZone = 'UTC') {
  const owner = await stack.createWorkspace('paid');
  const { affiliate } = await insertAffiliate(stack.sql, {
    workspaceId: owner.workspaceId,
    displayName: 'Ann',
    timeZone,
  });
  const code = `mat-${randomBytes(4).toString('hex')}`;
  await insertAffiliateCode(stack.sql, {
    affiliateId: affiliate.id,
    workspaceId: owner.workspaceId,
    code,
    isVanity: true,
  });
  const referred = await createWorkspaceWithAdmin(stack.sql, { name: 'Referred', plan: 'free', affiliateCode: code });
  return { affiliateId: affiliate.id, ownerWorkspaceId: owner.workspaceId, workspaceId: referred.workspace_id };
}

/** Pays an invoice through the billing event handler and wakes the affiliate's maturation as the webhook does after the commit. */
async function pay(
  workspaceId: string,
  invoiceId: string,
  cents: number,
  terms = holding,
  options: { at?: Date; wake?: boolean } = {},
) {
  const at = options.at ?? (await envNow());
  const event: BillingEvent = {
    ...base('invoice.paid', workspaceId, at),
    kind: 'invoice_paid',
    invoiceId,
    subscriptionId: null,
    paymentId: null,
    amountDueCents: cents,
    amountPaidCents: cents,
    currency: 'usd',
    periodStart: null,
    periodEnd: null,
    hostedInvoiceUrl: null,
    createdAt: at,
  };
  const result = await handleBillingEvent(stack.sql, event, terms);
  expect(result.affiliateCommissionIds, result.outcome).toHaveLength(1);
  const commissionId = result.affiliateCommissionIds[0]!;
  if (options.wake !== false)
    await wakeCommissions(ctx.env.client, taskQueue, stack.sql, result.affiliateCommissionIds);
  return { commissionId, handle: await shardWorkflow(commissionId) };
}

async function refund(workspaceId: string, paymentId: string, amount: number, refunded: number) {
  const at = await envNow();
  return handleBillingEvent(
    stack.sql,
    {
      ...base('charge.refunded', workspaceId, at),
      kind: 'charge_refunded',
      paymentId,
      amountCents: amount,
      refundedCents: refunded,
      currency: 'usd',
      createdAt: at,
    },
    holding,
  );
}

async function dispute(workspaceId: string, paymentId: string, amount: number, status: 'open' | 'won' | 'lost') {
  const at = await envNow();
  return handleBillingEvent(
    stack.sql,
    {
      ...base('charge.dispute.updated', workspaceId, at),
      kind: 'dispute',
      paymentId,
      disputeStatus: status,
      amountCents: amount,
      currency: 'usd',
      createdAt: at,
    },
    holding,
  );
}

/** 23:30 EST on the Saturday before the next second Sunday of March (New York springs forward at 02:00 that Sunday). */
function nextSpringForward(after: Date): Date {
  for (let year = after.getUTCFullYear(); ; year += 1) {
    const secondSunday = [8, 9, 10, 11, 12, 13, 14].find((d) => new Date(Date.UTC(year, 2, d)).getUTCDay() === 0)!;
    const at = new Date(Date.UTC(year, 2, secondSunday - 1, 23 + 5, 30));
    if (at > after) return at;
  }
}

const status = async (id: string) =>
  (await stack.sql<{ status: string }[]>`select status from affiliate_commissions where id = ${id}`)[0]!.status;
const shardOf = async (commissionId: string) =>
  (
    await stack.sql<{ s: number }[]>`select maturation_shard as s from affiliate_commissions where id = ${commissionId}`
  )[0]!.s;
/** The maturation workflow of the commission's shard (its affiliate's). */
const shardWorkflow = async (commissionId: string) =>
  ctx.env.client.workflow.getHandle<typeof commissionMaturationWorkflow>(
    commissionMaturationWorkflowId(taskQueue, await shardOf(commissionId)),
  );
/** The wake the commission's shard recorded. */
const wakeAt = async (commissionId: string) =>
  (
    await stack.sql<
      { w: Date | null }[]
    >`select wake_at as w from affiliate_maturation_shards where shard = ${await shardOf(commissionId)}`
  )[0]!.w;
/** A workflow task runs in real time after a skip: how long (a few seconds at most) to poll for what it writes. */
const eventually = { timeout: 10_000, interval: 50 };

describe('commission maturation', () => {
  it('matures at available_at, not a moment before', async () => {
    const { affiliateId, workspaceId } = await referredWorkspace();
    const { commissionId, handle } = await pay(workspaceId, `in_${randomBytes(5).toString('hex')}`, 4900);
    await ctx.env.sleep(30 * day - 60_000);
    expect(await status(commissionId)).toBe('held');
    expect(await affiliateBalances(stack.sql, affiliateId)).toEqual({ availableCents: 0, heldCents: 980 });
    // Nothing else is held: the workflow ends once it matured the commission, its wake cleared.
    expect(await handle.result()).toEqual({ matured: 1, nextAt: null });
    expect(await status(commissionId)).toBe('available');
    expect(await wakeAt(commissionId)).toBeNull();
    expect(await affiliateBalances(stack.sql, affiliateId)).toEqual({ availableCents: 980, heldCents: 0 });
    // A refund after the holding period leaves the commission as it is.
    const invoice = (
      await stack.sql<{ invoice_id: string }[]>`select invoice_id from affiliate_commissions where id = ${commissionId}`
    )[0]!.invoice_id;
    await refund(workspaceId, invoice, 4900, 4900);
    expect(await status(commissionId)).toBe('available');
    expect(await affiliateBalances(stack.sql, affiliateId)).toEqual({ availableCents: 980, heldCents: 0 });
  });

  it('claws back a refund made before the commission matures, and the workflow ends without making it available', async () => {
    const { affiliateId, workspaceId } = await referredWorkspace();
    const invoice = `in_${randomBytes(5).toString('hex')}`;
    const { commissionId, handle } = await pay(workspaceId, invoice, 10000);
    await ctx.env.sleep(30 * day - 1000);
    const refunded = await refund(workspaceId, invoice, 10000, 10000);
    // A clawed-back commission is no longer held: the webhook's wake signals no one.
    expect(await wakeCommissions(ctx.env.client, taskQueue, stack.sql, refunded.affiliateCommissionIds, 'refund')).toBe(
      0,
    );
    expect(await handle.result()).toEqual({ matured: 0, nextAt: null });
    await ctx.env.sleep(5 * day);
    expect(await status(commissionId)).toBe('clawed_back');
    expect(await affiliateBalances(stack.sql, affiliateId)).toEqual({ availableCents: 0, heldCents: 0 });
  });

  it('claws back while a dispute is open and gives it back when it is won; a lost one stands', async () => {
    const { affiliateId, workspaceId } = await referredWorkspace();
    const invoice = `in_${randomBytes(5).toString('hex')}`;
    const { handle } = await pay(workspaceId, invoice, 5000);
    await ctx.env.sleep(5 * day);
    await dispute(workspaceId, invoice, 5000, 'open');
    expect(await affiliateBalances(stack.sql, affiliateId)).toEqual({ availableCents: 0, heldCents: 0 });
    await ctx.env.sleep(5 * day);
    await dispute(workspaceId, invoice, 5000, 'won');
    expect(await affiliateBalances(stack.sql, affiliateId)).toEqual({ availableCents: 0, heldCents: 1000 });
    expect(await handle.result()).toEqual({ matured: 1, nextAt: null });
    expect(await affiliateBalances(stack.sql, affiliateId)).toEqual({ availableCents: 1000, heldCents: 0 });

    // A closed dispute is never reopened.
    await dispute(workspaceId, invoice, 5000, 'open');
    expect(await affiliateBalances(stack.sql, affiliateId)).toEqual({ availableCents: 1000, heldCents: 0 });
    // A dispute after the commission matured takes from the available balance; lost, it stays taken.
    // (The time-skipping server may run far ahead once nothing waits: a fresh referral keeps the next payment inside its commission months.)
    const other = await referredWorkspace();
    const second = `in_${randomBytes(5).toString('hex')}`;
    const { commissionId, handle: h2 } = await pay(other.workspaceId, second, 5000);
    expect(await h2.result()).toEqual({ matured: 1, nextAt: null });
    expect(await status(commissionId)).toBe('available');
    expect(await affiliateBalances(stack.sql, other.affiliateId)).toEqual({ availableCents: 1000, heldCents: 0 });
    await dispute(other.workspaceId, second, 5000, 'open');
    expect(await affiliateBalances(stack.sql, other.affiliateId)).toEqual({ availableCents: 0, heldCents: 0 });
    await dispute(other.workspaceId, second, 5000, 'lost');
    expect(await status(commissionId)).toBe('clawed_back');
    expect(await affiliateBalances(stack.sql, other.affiliateId)).toEqual({ availableCents: 0, heldCents: 0 });
  });

  it('matures on the right local day across a daylight-saving change', async () => {
    const { affiliateId, ownerWorkspaceId, workspaceId } = await referredWorkspace('America/New_York');
    // Pay at 23:30 local time in March just before the change, held until 23:30 local after it.
    const now = await envNow();
    const beforeChange = nextSpringForward(now);
    await ctx.env.sleep(beforeChange.getTime() - now.getTime());
    const { commissionId, handle } = await pay(workspaceId, `in_${randomBytes(5).toString('hex')}`, 2000, {
      holdingMs: day,
    });
    const [row] = await stack.sql<{ available_at: Date; earned_at: Date; earned_day: string }[]>`
      select available_at, earned_at, to_char(earned_day, 'YYYY-MM-DD') as earned_day from affiliate_commissions where id = ${commissionId}`;
    const paidAt = row!.earned_at;
    // 24 hours, though the local clock moves 25 hours across the change (23:30 EST to 00:30 EDT two days later).
    expect(row!.available_at.getTime() - paidAt.getTime()).toBe(day);
    const localDay = (d: Date) => new Intl.DateTimeFormat('en-CA', { timeZone: 'America/New_York' }).format(d);
    expect(row!.earned_day).toBe(localDay(paidAt));
    const { maturities } = await affiliateMaturities(stack.sql, ownerWorkspaceId);
    expect(maturities).toEqual([{ day: localDay(row!.available_at), amount_cents: 400, running_available_cents: 400 }]);
    // Paid on Saturday evening EST; available on Monday 00:30 EDT (24 hours later, two local days on).
    expect(
      new Intl.DateTimeFormat('en-US', {
        timeZone: 'America/New_York',
        weekday: 'short',
        hour: '2-digit',
        hourCycle: 'h23',
      }).format(row!.available_at),
    ).toMatch(/^Mon,? 00$/);
    await ctx.env.sleep(day - 120_000);
    expect(await status(commissionId)).toBe('held');
    expect(await handle.result()).toEqual({ matured: 1, nextAt: null });
    expect(await status(commissionId)).toBe('available');
    expect(await affiliateBalances(stack.sql, affiliateId)).toEqual({ availableCents: 400, heldCents: 0 });
  });

  it('matures many commissions of one affiliate due at the same moment in one wake', async () => {
    const { affiliateId, workspaceId } = await referredWorkspace();
    const at = await envNow();
    const ids: string[] = [];
    for (let i = 0; i < 20; i += 1)
      ids.push((await pay(workspaceId, `in_${randomBytes(5).toString('hex')}`, 1000, holding, { at })).commissionId);
    const handle = await shardWorkflow(ids[0]!);
    expect(await handle.result()).toEqual({ matured: 20, nextAt: null });
    const rows = await stack.sql<
      { status: string; matured_at: Date }[]
    >`select status, matured_at from affiliate_commissions where id = any(${ids}::uuid[])`;
    expect(rows.map((r) => r.status)).toEqual(Array(20).fill('available'));
    // One look at the workflow's time marked them all (one matured_at), after the one timer that ran to their available_at.
    expect(new Set(rows.map((r) => r.matured_at.getTime())).size).toBe(1);
    const events = (await handle.fetchHistory()).events ?? [];
    expect(events.filter((e) => e.timerFiredEventAttributes)).toHaveLength(1);
    expect(await affiliateBalances(stack.sql, affiliateId)).toEqual({ availableCents: 4000, heldCents: 0 });
  });

  it('catches a lost wake with the sweeper: a commission due before the recorded wake, whose signal never came', async () => {
    const { affiliateId, workspaceId } = await referredWorkspace();
    const first = await pay(workspaceId, `in_${randomBytes(5).toString('hex')}`, 5000);
    const [late] = await stack.sql<
      { available_at: Date }[]
    >`select available_at from affiliate_commissions where id = ${first.commissionId}`;
    await expect
      .poll(async () => (await wakeAt(first.commissionId))?.getTime(), eventually)
      .toBe(late!.available_at.getTime());
    const sweepAt = async () => ({
      now: new Date(Math.max((await envNow()).getTime(), Date.now()) + 1000),
      graceMs: 0,
    });
    // A healthy shard is left alone.
    expect(await sweepLostMaturationWakes(ctx.env.client, taskQueue, stack.sql, await sweepAt())).toBe(0);
    // A commission held one day, its signal lost (a crash between the commit and the wake).
    const soon = await pay(
      workspaceId,
      `in_${randomBytes(5).toString('hex')}`,
      5000,
      { holdingMs: day },
      { wake: false },
    );
    expect(await sweepLostMaturationWakes(ctx.env.client, taskQueue, stack.sql, await sweepAt())).toBe(1);
    const [due] = await stack.sql<
      { available_at: Date }[]
    >`select available_at from affiliate_commissions where id = ${soon.commissionId}`;
    await expect
      .poll(async () => (await wakeAt(soon.commissionId))?.getTime(), eventually)
      .toBe(due!.available_at.getTime());
    await ctx.env.sleep(day + 60_000);
    await expect.poll(() => status(soon.commissionId), eventually).toBe('available');
    expect(await status(first.commissionId)).toBe('held');
    expect(await affiliateBalances(stack.sql, affiliateId)).toEqual({ availableCents: 1000, heldCents: 1000 });
    expect(await first.handle.result()).toEqual({ matured: 2, nextAt: null });
  });
});
