/**
 * `npm run bench:affiliates` (decisions 043, 047): the affiliate program on `npm start`'s stack.
 *
 * - Clicks: BENCH_CLICKS (100,000) public link clicks over BENCH_AFFILIATES (1,000) affiliates'
 *   codes, 32 at a time, against the one-round-trip baseline route (GET /health/postgres/, one
 *   `select 1`) at the same concurrency in the same run; the ratio is clicks/s over baseline/s
 *   (target >= 0.5x). A click is one upsert (counted once per visitor and day).
 * - Maturation: BENCH_CONVERSIONS (5,000) referred workspaces convert and pay BENCH_COMMISSIONS
 *   (20,000) invoices through the billing event handler (the webhook's own transaction), paced at
 *   BENCH_COMMISSION_RATE per second, each held BENCH_HOLD_SECONDS (20) and matured by the
 *   `commission-maturation/<shard>` workflow of its affiliate's shard, woken after the commit only
 *   when it would not look in time by itself (decision 047): the lag from available_at to
 *   available (p50, p99; target p99 < 5 s), how many payments signalled a workflow, and the
 *   largest workflow history (every run of every shard's workflow). The setup's workspaces (6,000 at the defaults) are
 *   marked as having their billing workflow, so the worker's billing keeper does not start 6,000
 *   workflows at once: that burst, which a live service spreads over its workspaces' lives, held
 *   the worker for many minutes (each new workflow's creation in the reusable VM passing the 5 s
 *   script timeout) and is not what this bench measures. The 1-minute load average is printed.
 * - `affiliateBenchPhases`: phases run after maturation on the same stack and data (the payout
 *   cycle's time can be added there; today it has its own bench:affiliate-payouts), each printing its own lines.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, Connection } from '@temporalio/client';
import { createSql, type Sql } from '../db/sql.js';
import type { BillingEvent } from '../domain/billing/provider-events.js';
import { readServiceConfig } from '../integrations/config.js';
import { wakeCommissions } from '../services/affiliates/maturation.js';
import { handleBillingEvent } from '../services/billing/events.js';
import { insertAffiliate, insertAffiliateCode } from '../store/affiliates/affiliates.js';
import { attributeSignup, countHeld, maturationLagsMs } from '../store/affiliates/commissions.js';
import { markBillingWorkflowStarted } from '../store/billing/accounts.js';
import { createWorkspace } from '../store/platform/workspaces.js';
import { startBenchStack } from './stack.js';

const n = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const affiliatesN = n('BENCH_AFFILIATES', 1000);
const clicksN = n('BENCH_CLICKS', 100_000);
const conversionsN = n('BENCH_CONVERSIONS', 5000);
const commissionsN = n('BENCH_COMMISSIONS', 20_000);
const commissionRate = n('BENCH_COMMISSION_RATE', 100);
const holdSeconds = n('BENCH_HOLD_SECONDS', 20);
const concurrency = 32;

/** What a later phase (the payout cycle) gets: the same stack and data. */
export interface AffiliateBenchContext {
  sql: Sql;
  client: Client;
  taskQueue: string;
  apiUrl: string;
  affiliateIds: string[];
  log: (line: string) => void;
}
/** Phases run after maturation, in order, on the same stack and data. */
export const affiliateBenchPhases: { name: string; run: (ctx: AffiliateBenchContext) => Promise<void> }[] = [];

const log = (line: string) => console.log(line);
const load = () => loadavg()[0]!.toFixed(1);
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0
    ? NaN
    : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
};

async function pool<T>(count: number, width: number, run: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < count) {
        const i = next++;
        out[i] = await run(i);
      }
    }),
  );
  return out;
}

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-affiliates-'));
  chmodSync(dataDir, 0o755);
  // The public link is rate limited per address; the bench sends every click from one.
  process.env.AFFILIATE_CLICK_RATE_PER_MINUTE = '0';
  const { serve } = await startBenchStack(dataDir, `${dataDir}.log`, log);
  const base = serve.apiUrl.replace(/\/+$/, '');
  const sql = createSql(serve.databaseUrl, { max: 8 });
  const connection = await Connection.connect({ address: serve.temporalAddress });
  const client = new Client({ connection });
  const { taskQueue } = readServiceConfig(process.env);
  try {
    log(
      `## Affiliates: ${affiliatesN} affiliates, ${clicksN} clicks, ${conversionsN} conversions, ${commissionsN} commissions held ${holdSeconds} s`,
    );
    let t = performance.now();
    const affiliates = await pool(affiliatesN, 8, async (i) =>
      sql.begin(async (tx) => {
        const ws = await createWorkspace(tx, { name: `Affiliate ${i}`, plan: 'paid' });
        await markBillingWorkflowStarted(tx, ws.id);
        const { affiliate } = await insertAffiliate(tx, {
          workspaceId: ws.id,
          displayName: `Affiliate ${i}`,
          timeZone: 'UTC',
        });
        const code = `bench-${i}-${randomBytes(3).toString('hex')}`;
        const row = await insertAffiliateCode(tx, {
          affiliateId: affiliate.id,
          workspaceId: ws.id,
          code,
          isVanity: true,
        });
        return { id: affiliate.id, code: row!.code, codeId: row!.id };
      }),
    );
    log(`setup: ${affiliatesN} affiliates in ${((performance.now() - t) / 1000).toFixed(1)} s`);

    // Clicks against the baseline, same concurrency, one after the other.
    const get = async (path: string) => {
      const res = await fetch(`${base}${path}`, {
        redirect: 'manual',
        headers: { 'user-agent': 'Mozilla/5.0 (bench) Firefox/140.0' },
      });
      await res.arrayBuffer();
      return res.status;
    };
    const baselineN = Math.min(clicksN, 20_000);
    await pool(500, concurrency, () => get('/health/postgres/'));
    t = performance.now();
    await pool(baselineN, concurrency, async () => {
      if ((await get('/health/postgres/')) !== 200) throw new Error('baseline failed');
    });
    const baselinePerSecond = baselineN / ((performance.now() - t) / 1000);
    t = performance.now();
    // Visitors repeat (a tenth of the clicks are a visitor's second click the same day).
    await pool(clicksN, concurrency, async (i) => {
      const a = affiliates[i % affiliatesN]!;
      const visitor = i % 10 === 9 ? i - 1 : i;
      if ((await get(`/affiliate/links/${a.code}/?visitor=v${visitor}`)) !== 302) throw new Error('click failed');
    });
    const clicksPerSecond = clicksN / ((performance.now() - t) / 1000);
    log('| Series | Requests | Per second | Ratio to baseline |');
    log('|---|---|---|---|');
    log(`| baseline GET /health/postgres/ | ${baselineN} | ${baselinePerSecond.toFixed(0)} | 1.00x |`);
    log(
      `| public link clicks | ${clicksN} | ${clicksPerSecond.toFixed(0)} | ${(clicksPerSecond / baselinePerSecond).toFixed(2)}x (target >= 0.5x) |`,
    );

    // Conversions: referred workspaces attributed to affiliates round robin.
    t = performance.now();
    const referred = await pool(conversionsN, 8, async (i) =>
      sql.begin(async (tx) => {
        const ws = await createWorkspace(tx, { name: `Referred ${i}`, plan: 'free' });
        await markBillingWorkflowStarted(tx, ws.id);
        const a = affiliates[i % affiliatesN]!;
        await attributeSignup(tx, {
          workspaceId: ws.id,
          affiliateId: a.id,
          codeId: a.codeId,
          clickId: null,
          at: new Date(),
        });
        return ws.id;
      }),
    );
    log(`setup: ${conversionsN} referred workspaces in ${((performance.now() - t) / 1000).toFixed(1)} s`);

    // Invoices paid at a steady rate through the billing event handler, the affiliate's maturation woken after the commit when needed.
    const terms = { holdingMs: holdSeconds * 1000 };
    const ids: string[] = [];
    let signalled = 0;
    const started = performance.now();
    const loadAtStart = load();
    await pool(commissionsN, 16, async (i) => {
      const due = started + (i / commissionRate) * 1000;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const workspaceId = referred[i % conversionsN]!;
      const at = new Date();
      const invoiceId = `in_bench_${i}_${randomBytes(3).toString('hex')}`;
      const event: BillingEvent = {
        id: `evt_bench_${i}_${randomBytes(3).toString('hex')}`,
        type: 'invoice.paid',
        occurredAt: at,
        workspaceId,
        customerId: null,
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
      };
      const result = await handleBillingEvent(sql, event, terms);
      signalled += await wakeCommissions(client, taskQueue, sql, result.affiliateCommissionIds);
      ids.push(...result.affiliateCommissionIds);
    });
    const paidSeconds = (performance.now() - started) / 1000;
    log(
      `paid: ${ids.length} commissions in ${paidSeconds.toFixed(1)} s (${(ids.length / paidSeconds).toFixed(0)}/s, paced at ${commissionRate}/s); ${signalled} payments signalled a shard's workflow (load ${loadAtStart} -> ${load()})`,
    );
    const deadline = Date.now() + (holdSeconds + 600) * 1000;
    while ((await countHeld(sql, ids)) > 0 && Date.now() < deadline) await sleep(1000);
    const held = await countHeld(sql, ids);
    const lags = await maturationLagsMs(sql, ids);
    log('| Maturation | Commissions | p50 lag | p99 lag | max lag | Still held | Load (1 min) |');
    log('|---|---|---|---|---|---|---|');
    log(
      `| available_at -> available | ${lags.length} | ${(percentile(lags, 50) / 1000).toFixed(2)} s | ${(percentile(lags, 99) / 1000).toFixed(2)} s (target < 5 s) | ${(Math.max(...lags) / 1000).toFixed(2)} s | ${held} | ${load()} |`,
    );
    // Every run (a run continues as new after 50 looks) of every shard's maturation workflow.
    let runs = 0;
    let largest = 0;
    for await (const run of client.workflow.list({ query: `WorkflowType = 'commissionMaturationWorkflow'` })) {
      runs += 1;
      // Visibility records a run's length when it closes; a running one is described.
      const length =
        run.status.name === 'RUNNING'
          ? (await client.workflow.getHandle(run.workflowId, run.runId).describe()).historyLength
          : run.historyLength;
      largest = Math.max(largest, length);
    }
    log(`largest workflow history: ${largest} events (of ${runs} maturation runs)`);

    for (const phase of affiliateBenchPhases) {
      log(`### ${phase.name}`);
      await phase.run({ sql, client, taskQueue, apiUrl: base, affiliateIds: affiliates.map((a) => a.id), log });
    }
  } finally {
    await connection.close();
    await sql.end({ timeout: 5 });
    await serve.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
