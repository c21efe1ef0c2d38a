/**
 * `npm run bench:affiliate-payouts` (decision 044): the payout cycle's time for BENCH_AFFILIATES
 * (1,000) affiliates on the stack `npm start` runs (bench/stack.ts: API and worker in one process,
 * embedded Postgres, the Temporal dev server), paid through the PayPal twin
 * (sim/paypal-payouts-server.ts, in this process) as PAYPAL_API_BASE. Target: the cycle for all of
 * them < 60 s.
 *
 * - Ceiling: the twin alone from this process, the same items sent as one client's batches of 500
 *   and read back, no database.
 * - Cycle: every affiliate enrolled with an available balance, a payout email and identity verified
 *   (a tenth of them unclaimed at PayPal); the cycle workflow started on the stack's task queue for
 *   a period, the time to its result (every payout made, sent and read back once). Then the same
 *   period's cycle again: the time to find there is nothing to pay. The workflow's history length.
 */
import { Client, Connection } from '@temporalio/client';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createSql } from '../db/sql.js';
import { payoutBatchSize } from '../domain/affiliates/payouts.js';
import { readServiceConfig } from '../integrations/config.js';
import { createPayPalPayouts } from '../integrations/payouts/paypal.js';
import { startPayPalPayoutsTwin } from '../sim/paypal-payouts-server.js';
import { insertAffiliate } from '../store/affiliates/affiliates.js';
import { appendAffiliateLedgerEntry } from '../store/affiliates/ledger.js';
import { countPayoutsByStatus, setOperatorGate, setPayoutEmail } from '../store/affiliates/payouts.js';
import { createWorkspace } from '../store/platform/workspaces.js';
import { payoutCycleWorkflowId, type PayoutCycleResult } from '../workflows/affiliates/payout-cycle.contract.js';
import { startBenchStack } from './stack.js';

const affiliatesN = Number(process.env.BENCH_AFFILIATES ?? 1000);
const log = (line: string) => process.stdout.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);

const twin = await startPayPalPayoutsTwin();

// ---- the ceiling: the twin alone ----
const bare = createPayPalPayouts({ clientId: twin.clientId, clientSecret: twin.clientSecret, apiBase: twin.url });
const bareStarted = performance.now();
for (let i = 0; i < affiliatesN; i += payoutBatchSize) {
  const items = Array.from({ length: Math.min(payoutBatchSize, affiliatesN - i) }, (_, k) => ({
    senderItemId: `bare-${i + k}`,
    receiverEmail: `bare${i + k}@bench.example`,
    amountCents: 5000 + k,
    currency: 'USD' as const,
    note: 'bench',
  }));
  const batch = await bare.createBatch({ senderBatchId: `bare-${i}`, emailSubject: 'bench', items });
  await bare.getBatch(batch.providerBatchId);
}
const bareSeconds = (performance.now() - bareStarted) / 1000;
log(`ceiling: ${affiliatesN} items sent and read back by the twin alone in ${bareSeconds.toFixed(2)} s`);

// ---- the stack ----
process.env.PAYPAL_CLIENT_ID = twin.clientId;
process.env.PAYPAL_CLIENT_SECRET = twin.clientSecret;
process.env.PAYPAL_API_BASE = twin.url;
const dataDir = mkdtempSync(join(tmpdir(), 'bench-affiliate-payouts-'));
chmodSync(dataDir, 0o755);
const { serve } = await startBenchStack(dataDir, `${dataDir}.log`, log, { onFailure: () => twin.close() });
const sql = createSql(serve.databaseUrl, { max: 8 });
const connection = await Connection.connect({ address: serve.temporalAddress });
const client = new Client({ connection });
const { taskQueue } = readServiceConfig(process.env);

try {
  const seedStarted = performance.now();
  let expectedCents = 0;
  const ids = Array.from({ length: affiliatesN }, (_, i) => i);
  await Promise.all(
    Array.from({ length: 8 }, async (_, lane) => {
      for (let k = lane; k < ids.length; k += 8) {
        const i = ids[k]!;
        const cents = 5000 + ((i * 7919) % 20_000);
        expectedCents += cents;
        await sql.begin(async (tx) => {
          const ws = await createWorkspace(tx, { name: `Affiliate ${i}`, plan: 'paid' });
          const { affiliate } = await insertAffiliate(tx, {
            workspaceId: ws.id,
            displayName: `Affiliate ${i}`,
            timeZone: 'UTC',
          });
          await appendAffiliateLedgerEntry(tx, {
            affiliateId: affiliate.id,
            kind: 'commission',
            amountCents: cents,
            description: 'bench',
            causeKey: `bench-commission:${affiliate.id}`,
            occurredAt: new Date('2026-01-01'),
          });
          await setPayoutEmail(tx, {
            affiliateId: affiliate.id,
            workspaceId: ws.id,
            email: `aff${i}${i % 10 === 3 ? '+unclaimed' : ''}@bench.example`,
          });
          await setOperatorGate(tx, {
            affiliateId: affiliate.id,
            workspaceId: ws.id,
            gate: 'identity_verified',
            on: true,
            note: null,
            now: new Date(),
          });
        });
      }
    }),
  );
  log(`seeded ${affiliatesN} affiliates in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s`);

  const cycleAt = '2026-12-01T00:00:00.000Z';
  const run = async (suffix: string) => {
    const started = performance.now();
    const handle = await client.workflow.start('affiliatePayoutCycleWorkflow', {
      taskQueue,
      workflowId: `${payoutCycleWorkflowId(taskQueue, '2026-12')}/${suffix}`,
      args: [{ cycleAt, followForMs: 0 }],
    });
    const result = (await handle.result()) as PayoutCycleResult;
    const seconds = (performance.now() - started) / 1000;
    const history = Number((await handle.describe()).historyLength);
    return { result, seconds, history };
  };
  const first = await run('bench-1');
  const again = await run('bench-2');
  const statuses = await countPayoutsByStatus(sql, '2026-12');
  const sentCents = [...twin.sentCentsByReceiver().entries()]
    .filter(([r]) => r.endsWith('@bench.example') && r.startsWith('aff'))
    .reduce((s, [, c]) => s + c, 0);
  const twice = [...twin.itemsBySenderItemId().values()].filter((n) => n > 1).length;

  log('| Payout cycle | Affiliates | Payouts made | Sent | Time | Target | History events |');
  log('|---|---|---|---|---|---|---|');
  log(
    `| first run of the period | ${affiliatesN} | ${first.result.created} | ${first.result.sent} | ${first.seconds.toFixed(2)} s | < 60 s | ${first.history} |`,
  );
  log(
    `| same period again | ${affiliatesN} | ${again.result.created} | ${again.result.sent} | ${again.seconds.toFixed(2)} s | | ${again.history} |`,
  );
  log(
    `statuses: ${JSON.stringify(statuses)}; cents sent ${sentCents} of ${expectedCents} expected; items sent twice: ${twice}`,
  );
  log(
    `ratio: the cycle took ${(first.seconds / bareSeconds).toFixed(1)}x the twin's bare send and read-back of the same items`,
  );
} finally {
  await connection.close();
  await sql.end({ timeout: 5 });
  await serve.stop();
  await twin.close();
  rmSync(dataDir, { recursive: true, force: true });
}
