/**
 * The payout cycle's fault test (decision 044): 200 affiliates (a tenth of them unclaimed at
 * PayPal, a twentieth failing), the worker killed every 1.5 s (three times a cycle) and right after
 * the steps that pay (a page of payouts made, a batch sent, items read back) while the cycle runs,
 * the first batch's answer lost, and the period's cycle run twice; then 30 days later the next
 * month's cycle, killed the same way, takes the returns. Every affiliate is paid exactly once per
 * period (one payout row, one PayPal item), every payout's money moves once, and every ledger sums
 * to its balance to the cent.
 */
import { randomBytes } from 'node:crypto';
import type { WorkflowHandle } from '@temporalio/client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPayPalPayouts } from '../../integrations/payouts/paypal.js';
import { insertAffiliate } from '../../store/affiliates/affiliates.js';
import { affiliateBalances, appendAffiliateLedgerEntry } from '../../store/affiliates/ledger.js';
import { setOperatorGate, setPayoutEmail } from '../../store/affiliates/payouts.js';
import { startPayPalPayoutsTwin, unclaimedReturnMs, type PayPalPayoutsTwin } from '../../sim/paypal-payouts-server.js';
import { payoutCycleWorkflowId, type PayoutCycleResult } from '../../workflows/affiliates/payout-cycle.contract.js';
import { useFaultWorkers } from '../support/fault-workers.js';
import { useTestStack } from '../support/test-stack.js';

const { stack } = useTestStack({ workspaces: false });
const faults = useFaultWorkers(stack);
let twin: PayPalPayoutsTwin;
const affiliates: { id: string; cents: number; email: string }[] = [];
const count = 200;

beforeAll(async () => {
  twin = await startPayPalPayoutsTwin();
  stack.integrations.affiliatePayouts.provider = createPayPalPayouts(
    { clientId: twin.clientId, clientSecret: twin.clientSecret, apiBase: twin.url },
    { sleep: async () => undefined },
  );
  const workspaces = await stack.sql<{ id: string }[]>`
    insert into workspaces (name, plan) select 'Affiliate ' || g, 'paid' from generate_series(1, ${count}) g returning id`;
  let seed = 7;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  for (const [i, w] of workspaces.entries()) {
    const { affiliate } = await insertAffiliate(stack.sql, {
      workspaceId: w.id,
      displayName: `A${i}`,
      timeZone: 'UTC',
    });
    const cents = 5000 + Math.floor(random() * 20_000);
    const tag = i % 10 === 3 ? '+unclaimed' : i % 20 === 7 ? '+fail' : '';
    const email = `a${i}${tag}-${randomBytes(2).toString('hex')}@example.com`;
    await appendAffiliateLedgerEntry(stack.sql, {
      affiliateId: affiliate.id,
      kind: 'commission',
      amountCents: cents,
      description: 'matured',
      causeKey: `fault-commission:${affiliate.id}`,
      occurredAt: new Date('2026-01-01'),
    });
    await setPayoutEmail(stack.sql, { affiliateId: affiliate.id, workspaceId: w.id, email });
    await setOperatorGate(stack.sql, {
      affiliateId: affiliate.id,
      workspaceId: w.id,
      gate: 'identity_verified',
      on: true,
      note: null,
      now: new Date(),
    });
    affiliates.push({ id: affiliate.id, cents, email });
  }
}, 120_000);
afterAll(() => twin?.close());

/** Runs one cycle on the fault workers while killing them: every 1.5 s (three times), and right after each paying step once. */
async function cycleUnderKills(cycleAt: Date, runId: string): Promise<{ result: PayoutCycleResult; kills: number }> {
  const crashes = ['prepareAffiliatePayouts', 'sendAffiliatePayoutBatch', 'followAffiliatePayouts'].map((activity) =>
    faults.crashAfter(activity),
  );
  const handle = await stack.client.workflow.start('affiliatePayoutCycleWorkflow', {
    taskQueue: faults.taskQueue,
    workflowId: `${payoutCycleWorkflowId(faults.taskQueue, cycleAt.toISOString().slice(0, 7))}/${runId}`,
    args: [{ cycleAt: cycleAt.toISOString(), followForMs: 0 }],
  });
  let done = false;
  let kills = 0;
  // One replacement at a time: a crash's kill and the timer's never overlap.
  let chain = Promise.resolve();
  const replace = () =>
    (chain = chain.then(async () => {
      if (done) return;
      await faults.replace();
      kills += 1;
    }));
  const result = handle.result().finally(() => (done = true)) as Promise<PayoutCycleResult>;
  for (const crash of crashes) void crash.then(replace);
  // Timed kills too, a few per cycle: each costs the dead worker's sticky workflow task a few seconds.
  for (let timed = 0; !done && timed < 3; timed += 1) {
    await new Promise((r) => setTimeout(r, 1500));
    await replace();
  }
  await chain;
  return { result: await stalledAfter(handle, result, 60_000), kills };
}

/** The cycle's result, or after `ms` a failure that says where the cycle stood: its pending work, its last events, the worker polling. */
async function stalledAfter(
  handle: WorkflowHandle,
  result: Promise<PayoutCycleResult>,
  ms: number,
): Promise<PayoutCycleResult> {
  let timer: NodeJS.Timeout | undefined;
  const stalled = new Promise<'stalled'>((r) => (timer = setTimeout(() => r('stalled'), ms)));
  const first = await Promise.race([result, stalled]).finally(() => clearTimeout(timer));
  if (first !== 'stalled') return first;
  const described = await handle.describe();
  const events = ((await handle.fetchHistory()).events ?? []).map((e) => `${String(e.eventId)} ${String(e.eventType)}`);
  const raw = described.raw;
  throw new Error(
    `The cycle ${handle.workflowId} stalled: ${described.status.name}; pending activities ${JSON.stringify(raw.pendingActivities?.map((a) => [a.activityType?.name, a.state, a.attempt, a.lastFailure?.message]))}; ` +
      `pending workflow task ${JSON.stringify(raw.pendingWorkflowTask ?? null)}; worker ${faults.current?.name ?? 'none'} of ${faults.workers.length}; last events ${events.slice(-12).join(' | ')}`,
  );
}

it('pays every affiliate exactly once per period through killed workers and a lost answer, and every ledger sums to its balance', async () => {
  twin.loseNextCreateAnswer();
  const december = new Date('2026-12-01T00:00:00Z');
  const first = await cycleUnderKills(december, 'a');
  const second = await cycleUnderKills(december, 'b');
  expect(first.kills + second.kills).toBeGreaterThanOrEqual(3);
  expect(second.result.created).toBe(0);

  const payouts = await stack.sql<
    { affiliate_id: string; id: string; amount_cents: number; status: string; period: string }[]
  >`select * from affiliate_payouts`;
  expect(payouts).toHaveLength(count);
  const byAffiliate = new Map(payouts.map((p) => [p.affiliate_id, p]));
  const items = twin.itemsBySenderItemId();
  const sent = twin.sentCentsByReceiver();
  for (const a of affiliates) {
    const p = byAffiliate.get(a.id)!;
    expect(p).toMatchObject({ period: '2026-12', amount_cents: a.cents });
    expect(items.get(p.id)).toBe(1);
    expect(sent.get(a.email)).toBe(a.cents);
    expect(p.status).toBe(a.email.includes('+unclaimed') ? 'unclaimed' : a.email.includes('+fail') ? 'failed' : 'paid');
  }

  // 30 days later the unclaimed items are returned; the next month's cycle, killed too, puts their money back once.
  twin.advance(unclaimedReturnMs);
  await cycleUnderKills(new Date('2027-01-01T00:00:00Z'), 'c');

  const ledgers = await stack.sql<{ affiliate_id: string; sum: number; backs: number }[]>`
    select affiliate_id, sum(amount_cents)::bigint as sum, count(*) filter (where kind = 'adjustment')::int as backs from affiliate_ledger group by affiliate_id`;
  const ledger = new Map(ledgers.map((l) => [l.affiliate_id, l]));
  for (const a of affiliates) {
    const l = ledger.get(a.id)!;
    const { availableCents, heldCents } = await affiliateBalances(stack.sql, a.id, new Date('2100-01-01'));
    expect(availableCents + heldCents).toBe(l.sum);
    const back = a.email.includes('+unclaimed') || a.email.includes('+fail');
    expect(l.sum).toBe(back ? a.cents : 0);
    expect(l.backs).toBe(back ? 1 : 0);
  }
  const statuses = await stack.sql<
    { status: string; n: number }[]
  >`select status, count(*)::int as n from affiliate_payouts group by status order by status`;
  expect(Object.fromEntries(statuses.map((s) => [s.status, s.n]))).toEqual({ failed: 10, paid: 170, returned: 20 });
}, 180_000);
