/**
 * bench:notifications (decision 045): 10,000 workspace events, each fanned out to 3 channels (three
 * webhook endpoints on three local receivers), offered at BENCH_EVENTS_PER_SECOND (200) through the
 * real path: an outbox row committed, the dispatcher woken by NOTIFY, one delivery workflow per
 * batch of events (decision 045), a signed POST per channel. Reports deliveries per second, the
 * p50/p99 from the event's commit to the receiver's 2xx, the batches (how many, events per batch,
 * the largest history among them), and, in the same run, the rate at which the same receivers take
 * bare signed POSTs from this one Node process (64 at a time), with the ratio. The stack runs in
 * its own process (bench/stack.ts).
 *
 *   npm run bench:notifications            (BENCH_EVENTS=10000 BENCH_EVENTS_PER_SECOND=200)
 */
import { Client, Connection } from '@temporalio/client';
import { createServer, type Server } from 'node:http';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createSql } from '../db/sql.js';
import { signedHeaders } from '../integrations/webhooks/signing.js';
import { mapLimit } from '../sim/chaos-run.js';
import { recordWorkspaceEvent } from '../store/notifications/outbox.js';
import { createWorkspaceWithAdmin } from '../worker/provisioning.js';
import { startBenchStack } from './stack.js';

const eventsTotal = Number(process.env.BENCH_EVENTS ?? 10_000);
const perSecond = Number(process.env.BENCH_EVENTS_PER_SECOND ?? 200);
const channels = 3;
const log = (line: string) => process.stdout.write(`${line}\n`);

interface Receiver {
  url: string;
  server: Server;
  /** First 2xx per event id: when it arrived. */
  firsts: Map<string, number>;
  requests: number;
}

async function receiver(): Promise<Receiver> {
  const r = { firsts: new Map<string, number>(), requests: 0 } as Receiver;
  r.server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      r.requests += 1;
      const at = Date.now();
      try {
        const id = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: string }).id;
        if (id && !r.firsts.has(id)) r.firsts.set(id, at);
      } catch {
        // a bare POST's body is not an event
      }
      res.writeHead(204).end();
    });
  });
  r.server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => r.server.listen(0, '127.0.0.1', resolve));
  const address = r.server.address() as { port: number };
  r.url = `http://127.0.0.1:${address.port}/hook`;
  return r;
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;

const receivers = await Promise.all(Array.from({ length: channels }, () => receiver()));
process.env.WEBHOOKS_ALLOW_PRIVATE_NETWORKS = 'true';
const dataDir = mkdtempSync(join(tmpdir(), 'bench-notifications-'));
// The embedded Postgres runs as its own user: the folder must be readable by it.
chmodSync(dataDir, 0o755);
const { serve } = await startBenchStack(dataDir, `${dataDir}.log`, log);
const sql = createSql(serve.databaseUrl, { max: 8 });
const connection = await Connection.connect({ address: serve.temporalAddress });
const temporal = new Client({ connection });
try {
  const workspace = await createWorkspaceWithAdmin(sql, { name: 'Bench notifications', plan: 'paid' });
  for (const r of receivers) {
    const res = await fetch(`${serve.apiUrl}/webhooks/endpoints/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': workspace.api_key },
      body: JSON.stringify({ url: r.url, event_types: ['credits.low'] }),
    });
    if (res.status !== 201) throw new Error(`endpoint not created: ${res.status} ${await res.text()}`);
  }

  // Offer the events at the rate asked, each committed in its own transaction.
  log(`offering ${eventsTotal} events at ${perSecond}/s to ${channels} endpoints each`);
  const loadAtStart = loadavg()[0]!.toFixed(1);
  const committed = new Map<string, number>();
  const started = Date.now();
  const interval = 1000 / perSecond;
  await mapLimit(
    Array.from({ length: eventsTotal }, (_, i) => i),
    16,
    async (i) => {
      const due = started + i * interval;
      const wait = due - Date.now();
      if (wait > 0) await sleep(wait);
      const id = await sql.begin((tx) =>
        recordWorkspaceEvent(tx, {
          workspaceId: workspace.workspace_id,
          type: 'credits.low',
          payload: { balance: i, threshold: 100 },
        }),
      );
      committed.set(id, Date.now());
    },
  );
  const offeredFor = (Date.now() - started) / 1000;
  log(`committed ${committed.size} events in ${offeredFor.toFixed(1)} s`);

  const deadline = Date.now() + 10 * 60_000;
  const delivered = () => receivers.reduce((n, r) => n + r.firsts.size, 0);
  while (delivered() < eventsTotal * channels && Date.now() < deadline) await sleep(200);
  const lastAt = Math.max(...receivers.flatMap((r) => [...r.firsts.values()]));
  const latencies: number[] = [];
  for (const r of receivers)
    for (const [id, at] of r.firsts) if (committed.has(id)) latencies.push(at - committed.get(id)!);
  latencies.sort((a, b) => a - b);
  const deliveryRate = delivered() / ((lastAt - started) / 1000);

  // The batch workflows of the run: how many, and the largest history among them (at most 500 read).
  let largest = 0;
  let batches = 0;
  const sampledIds: string[] = [];
  for await (const w of temporal.workflow.list({ query: "WorkflowType = 'notificationBatchWorkflow'" })) {
    batches += 1;
    if (sampledIds.length < 500) sampledIds.push(w.workflowId);
  }
  await mapLimit(sampledIds, 16, async (id) => {
    const described = await temporal.workflow
      .getHandle(id)
      .describe()
      .catch(() => null);
    if (described) largest = Math.max(largest, described.historyLength);
  });
  const sampled = sampledIds.length;

  // The same receivers taking bare signed POSTs from this one process.
  const bareTotal = Math.min(eventsTotal * channels, 30_000);
  const secret = 'whsec_' + Buffer.alloc(24, 7).toString('base64');
  const bareStarted = Date.now();
  await mapLimit(
    Array.from({ length: bareTotal }, (_, i) => i),
    64,
    async (i) => {
      const body = JSON.stringify({ bare: i });
      const res = await fetch(receivers[i % channels]!.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...signedHeaders([secret], `msg_bare${i}`, Math.floor(Date.now() / 1000), body),
        },
        body,
      });
      await res.arrayBuffer();
    },
  );
  const bareRate = bareTotal / ((Date.now() - bareStarted) / 1000);

  const duplicates = receivers.reduce((n, r) => n + (r.requests - r.firsts.size), 0) - bareTotal;
  log('');
  log(`events offered            ${eventsTotal} at ${perSecond}/s (${offeredFor.toFixed(1)} s)`);
  log(`deliveries (first 2xx)    ${delivered()} of ${eventsTotal * channels}`);
  log(`deliveries per second     ${deliveryRate.toFixed(0)}`);
  log(
    `commit → 2xx p50 / p99    ${percentile(latencies, 50)} ms / ${percentile(latencies, 99)} ms (target p99 < 1000 ms)`,
  );
  log(
    `batch workflows           ${batches} (${(eventsTotal / Math.max(1, batches)).toFixed(1)} events each on average)`,
  );
  log(`largest history           ${largest} events (of ${sampled} batch workflows read)`);
  log(`bare signed POSTs/s       ${bareRate.toFixed(0)} (one Node process, 64 at a time)`);
  log(`ratio                     ${(deliveryRate / bareRate).toFixed(2)}x of bare (target ≥ 0.5x)`);
  log(`repeated POSTs            ${Math.max(0, duplicates)}`);
  log(
    `load average (1/5 min)    ${loadavg()[0]!.toFixed(1)} / ${loadavg()[1]!.toFixed(1)} on ${cpus().length} cores (${loadAtStart} when the events started)`,
  );
} finally {
  await connection.close();
  await sql.end();
  await serve.stop();
  for (const r of receivers) r.server.close();
  rmSync(dataDir, { recursive: true, force: true });
}
