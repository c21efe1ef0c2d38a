/**
 * `npm run bench:affiliates` (issue 20): the affiliate program on the stack `npm start` runs.
 *
 * - Clicks: BENCH_CLICKS (100,000) public link clicks over BENCH_AFFILIATES (1,000) affiliates'
 *   codes, 32 at a time, against the one-round-trip baseline route (GET /health/postgres/, one
 *   `select 1`) at the same concurrency in the same run; the ratio is clicks/s over baseline/s
 *   (target >= 0.5x). A click is one upsert (counted once per visitor and day).
 * - Maturation: BENCH_CONVERSIONS (5,000) referred workspaces convert and pay BENCH_COMMISSIONS
 *   (20,000) invoices through the billing event handler (the webhook's own transaction), paced at
 *   BENCH_COMMISSION_RATE per second, each held BENCH_HOLD_SECONDS (20) and matured by its
 *   commission/<id> workflow: the lag from available_at to available (p50, p99; target p99 < 5 s)
 *   and the largest workflow history among a sample.
 * - `affiliateBenchPhases`: phases run after maturation on the same stack and data (the payout
 *   cycle's time can be added there; today it has its own bench:affiliate-payouts), each printing its own lines.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
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
import { createWorkspace } from '../store/platform/workspaces.js';
import { commissionWorkflowId } from '../workflows/affiliates/commission.contract.js';
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
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
};

async function pool<T>(count: number, width: number, run: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(count);
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < count) {
      const i = next++;
      out[i] = await run(i);
    }
  }));
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
    log(`## Affiliates (issue 20): ${affiliatesN} affiliates, ${clicksN} clicks, ${conversionsN} conversions, ${commissionsN} commissions held ${holdSeconds} s`);
    let t = performance.now();
    const affiliates = await pool(affiliatesN, 8, async (i) =>
      sql.begin(async (tx) => {
        const ws = await createWorkspace(tx, { name: `Affiliate ${i}`, plan: 'paid' });
        const { affiliate } = await insertAffiliate(tx, { workspaceId: ws.id, displayName: `Affiliate ${i}`, timeZone: 'UTC' });
        const code = `bench-${i}-${randomBytes(3).toString('hex')}`;
        const row = await insertAffiliateCode(tx, { affiliateId: affiliate.id, workspaceId: ws.id, code, isVanity: true });
        return { id: affiliate.id, code: row!.code, codeId: row!.id };
      }),
    );
    log(`setup: ${affiliatesN} affiliates in ${((performance.now() - t) / 1000).toFixed(1)} s`);

    // Clicks against the baseline, same concurrency, one after the other.
    const get = async (path: string) => {
      const res = await fetch(`${base}${path}`, { redirect: 'manual', headers: { 'user-agent': 'Mozilla/5.0 (bench) Firefox/140.0' } });
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
    log(`| public link clicks | ${clicksN} | ${clicksPerSecond.toFixed(0)} | ${(clicksPerSecond / baselinePerSecond).toFixed(2)}x (target >= 0.5x) |`);

    // Conversions: referred workspaces attributed to affiliates round robin.
    t = performance.now();
    const referred = await pool(conversionsN, 8, async (i) =>
      sql.begin(async (tx) => {
        const ws = await createWorkspace(tx, { name: `Referred ${i}`, plan: 'free' });
        const a = affiliates[i % affiliatesN]!;
        await attributeSignup(tx, { workspaceId: ws.id, affiliateId: a.id, codeId: a.codeId, clickId: null, at: new Date() });
        return ws.id;
      }),
    );
    log(`setup: ${conversionsN} referred workspaces in ${((performance.now() - t) / 1000).toFixed(1)} s`);

    // Invoices paid at a steady rate through the billing event handler, each commission's workflow woken after the commit.
    const terms = { holdingMs: holdSeconds * 1000 };
    const ids: string[] = [];
    const started = performance.now();
    await pool(commissionsN, 16, async (i) => {
      const due = started + (i / commissionRate) * 1000;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      const workspaceId = referred[i % conversionsN]!;
      const at = new Date();
      const invoiceId = `in_bench_${i}_${randomBytes(3).toString('hex')}`;
      const event: BillingEvent = {
        id: `evt_bench_${i}_${randomBytes(3).toString('hex')}`, type: 'invoice.paid', occurredAt: at, workspaceId, customerId: null,
        kind: 'invoice_paid', invoiceId, subscriptionId: null, paymentId: null, amountDueCents: 4900, amountPaidCents: 4900, currency: 'usd',
        periodStart: null, periodEnd: null, hostedInvoiceUrl: null, createdAt: at,
      };
      const result = await handleBillingEvent(sql, event, terms);
      await wakeCommissions(client, taskQueue, sql, result.affiliateCommissionIds);
      ids.push(...result.affiliateCommissionIds);
    });
    const paidSeconds = (performance.now() - started) / 1000;
    log(`paid: ${ids.length} commissions in ${paidSeconds.toFixed(1)} s (${(ids.length / paidSeconds).toFixed(0)}/s, paced at ${commissionRate}/s)`);
    const deadline = Date.now() + (holdSeconds + 600) * 1000;
    while ((await countHeld(sql, ids)) > 0 && Date.now() < deadline) await sleep(1000);
    const held = await countHeld(sql, ids);
    const lags = await maturationLagsMs(sql, ids);
    log('| Maturation | Commissions | p50 lag | p99 lag | max lag | Still held |');
    log('|---|---|---|---|---|---|');
    log(`| available_at -> available | ${lags.length} | ${(percentile(lags, 50) / 1000).toFixed(2)} s | ${(percentile(lags, 99) / 1000).toFixed(2)} s (target < 5 s) | ${(Math.max(...lags) / 1000).toFixed(2)} s | ${held} |`);
    const sample = ids.filter((_, i) => i % Math.max(1, Math.floor(ids.length / 200)) === 0);
    const lengths = await pool(sample.length, 8, async (i) => Number((await client.workflow.getHandle(commissionWorkflowId(sample[i]!)).describe()).historyLength));
    log(`largest workflow history: ${Math.max(...lengths)} events (of ${sample.length} commission workflows sampled)`);

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
