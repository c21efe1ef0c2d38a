/**
 * `npm run bench:pnet`: the pnet channel under the load of thousands of browsers.
 *
 * Starts the local stack (bench/serve.ts: embedded Postgres, the Temporal dev server, worker and
 * API) on a temporary DATA_DIR, provisions a workspace with credits and BENCH_BROWSERS sender
 * accounts (3,000), connects one simulated browser to each (identity and lease), then:
 *   max      closed loops of 64 for the heartbeat and the baseline, on the quiet stack, and
 *            the CPU each request costs;
 *   alone    check-ins ramped from 200/s to 1,000/s with no step running yet;
 *   phase 1  check-ins every 15 s (200/s) while test steps arrive at 20/s and are claimed, run
 *            for 1.5–3 s and reported;
 *   phase 2  check-ins ramped to 1,000/s with the same stream of steps;
 *   steps    claim-to-settle in closed loops of 64, and the CPU each settled step costs;
 *   outage   (BENCH_WORKER_APART=1 only) the worker process frozen for 30 s while phase 1's load
 *            goes on: claims and results answered meanwhile, and how late the claims of
 *            browsers that went silent in it lapse;
 * with the baseline route (GET /health/postgres/, one `select 1`) measured at the same rates in
 * the same run, and every browser-step workflow's history read back from Temporal.
 *
 * Open-loop latencies count from each request's scheduled time (no coordinated omission).
 * BENCH_BROWSERS and BENCH_SECONDS (each measured window, default 60) shrink a run, and
 * BENCH_PHASES (a comma list of max, alone, phase1, phase2, steps, outage; default all) picks the parts:
 * `BENCH_PHASES=max,alone` measures the heartbeat alone in a few minutes. The workflows are read
 * back when a part ran steps.
 */
import { Client, Connection } from '@temporalio/client';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { randomUUID } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { readServiceConfig } from '../integrations/config.js';
import { Pool } from 'undici';
import { connectionToken, createSenderProfile, updatePnetSettings } from '../store/pnet/accounts.js';
import { createSql, type Sql } from '../db/sql.js';
import { claimLeaseSeconds } from '../domain/pnet/timing.js';
import { browserStepWorkflowId } from '../workflows/pnet/browser-step.contract.js';
import { createWorkspaceWithAdmin, grantWorkspaceCredits } from '../worker/provisioning.js';
import { cpuPercent, cpuSnapshot, renice, type Component, type CpuSnapshot } from './cpu.js';
import { Recorder, closedLoop, openLoop } from './load.js';
import { histogramChange, labelOf, scrape, type Scrape } from './prometheus.js';
import { sampleWaits, type PgWait } from './pg-waits.js';
import type { ApiWindow } from './serve.js';
import { startBenchStack } from './stack.js';

const browsersWanted = Number(process.env.BENCH_BROWSERS ?? 3000);
const windowSeconds = Number(process.env.BENCH_SECONDS ?? 60);
const warmSeconds = Math.min(20, windowSeconds);
const stepRate = 20;
const closedWorkers = 64;
const allPhases = ['max', 'alone', 'phase1', 'phase2', 'steps', 'outage'] as const;
type PhaseName = (typeof allPhases)[number];
/** The outage freezes the worker's process, so it needs the worker apart from the API (serve.ts). */
const workerApart = process.env.BENCH_WORKER_APART === '1';
const outageSeconds = 30;
const phasesWanted = new Set(
  (process.env.BENCH_PHASES ?? allPhases.filter((p) => p !== 'outage' || workerApart).join(','))
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean),
);
for (const p of phasesWanted) {
  if (!(allPhases as readonly string[]).includes(p))
    throw new Error(`BENCH_PHASES: unknown part "${p}" (parts: ${allPhases.join(', ')})`);
}
const runs = (p: PhaseName) => phasesWanted.has(p);
if (runs('outage') && !workerApart)
  throw new Error('BENCH_PHASES: the outage part needs BENCH_WORKER_APART=1 (the worker in its own process)');
/**
 * BENCH_NICE=bench:-10,temporal:10 sets those processes' scheduling priority (every thread of
 * each) once the stack is up: an experiment, to tell how much of a latency is the CPU the parts
 * share on one machine. `worker` (with BENCH_WORKER_APART=1) is the worker's own process. Off by default.
 */
const niceWanted = (process.env.BENCH_NICE ?? '')
  .split(',')
  .filter(Boolean)
  .map((part) => {
    const m = /^(bench|api|temporal|worker):(-?\d+)$/.exec(part.trim());
    if (!m) throw new Error(`BENCH_NICE: "${part}" is not bench|api|temporal|worker:<nice>`);
    return { component: m[1] as 'bench' | 'api' | 'temporal' | 'worker', nice: Number(m[2]) };
  });

const log = (line: string) => process.stdout.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);

// ---------------------------------------------------------------------------------------------
// Simulated browsers

interface Browser {
  accountId: string;
  headers: Record<string, string>;
  browserId: string;
  nonce: string;
  identity: { member_urn: string; display_name: string };
  running: { action_id: string; claimed_at: string } | null;
  busy: boolean;
  /** Gone quiet after a claim (the outage part): no check-in, no result, ever again. */
  silent?: boolean;
}

interface StepRecord {
  id: string;
  kind: string;
  claimed_at: string;
}

interface AgentStateBody {
  wait: { reason: string } | null;
}

/** Where the step stream records; swapped at window edges so only measured windows count. */
interface StepStats {
  queue: Recorder;
  claim: Recorder;
  result: Recorder;
  settledAt: number[];
  /** Each answered result report: its step, and when it was sent and answered (wall clock, ms). */
  reports: ReportTiming[];
}
const newStepStats = (): StepStats => ({
  queue: new Recorder(),
  claim: new Recorder(),
  result: new Recorder(),
  settledAt: [],
  reports: [],
});

interface ReportTiming {
  stepId: string;
  sentAt: number;
  answeredAt: number;
}

class Sim {
  // One pool per kind of traffic: a browser's check-in never waits behind another browser's
  // claim (each real browser has its own connection), nor the baseline behind either.
  readonly heartbeats: Pool;
  readonly work: Pool;
  readonly baselines: Pool;
  stepsOn = false;
  stats: StepStats | null = null;
  queued = 0;
  settled = 0;
  /** Steps handed out and answered, including the closed-loop phase. */
  settledTotal = 0;
  /** The share of claims after which the browser goes silent (the outage part), and those claims. */
  silentRate = 0;
  readonly silentClaims: { stepId: string; claimedAt: string }[] = [];
  private cursor = 0;

  constructor(
    apiUrl: string,
    readonly browsers: Browser[],
    private readonly apiKey: string,
  ) {
    // A request unanswered for a minute counts as an error instead of stalling the run.
    const options = {
      connections: 256,
      pipelining: 1,
      keepAliveTimeout: 120_000,
      headersTimeout: 60_000,
      bodyTimeout: 60_000,
    };
    this.heartbeats = new Pool(apiUrl, options);
    this.work = new Pool(apiUrl, options);
    this.baselines = new Pool(apiUrl, options);
  }

  close() {
    return Promise.all([this.heartbeats.close(), this.work.close(), this.baselines.close()]);
  }

  private async post(
    pool: Pool,
    path: string,
    headers: Record<string, string>,
    body: object,
  ): Promise<{ status: number; json: unknown }> {
    try {
      const res = await pool.request({
        method: 'POST',
        path,
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const json =
        res.statusCode === 200 || res.statusCode === 201 ? await res.body.json() : (await res.body.text(), null);
      return { status: res.statusCode, json };
    } catch {
      return { status: 0, json: null };
    }
  }

  async baseline(): Promise<number> {
    try {
      const res = await this.baselines.request({ method: 'GET', path: '/health/postgres/' });
      await res.body.dump();
      return res.statusCode;
    } catch {
      return 0;
    }
  }

  nextBrowser(): Browser {
    const b = this.browsers[this.cursor % this.browsers.length]!;
    this.cursor += 1;
    return b;
  }

  /** One check-in as the extension sends it; work waiting sets the browser to claim it. */
  async heartbeat(b: Browser, first = false): Promise<number> {
    if (b.silent) return 204;
    const { status, json } = await this.post(this.heartbeats, '/pnet/agent/heartbeat/', b.headers, {
      browser_id: b.browserId,
      browser_label: 'Chrome (bench)',
      extension_version: '2.0.0',
      identity: b.identity,
      lease_nonce: b.nonce,
      running: first ? null : b.running,
    });
    if (status === 200 && this.stepsOn && !b.busy && (json as AgentStateBody).wait?.reason === 'ready')
      void this.runStep(b);
    return status;
  }

  /** Claim, run for 1.5–3 s (a real page takes seconds), report success. */
  private async runStep(b: Browser) {
    b.busy = true;
    try {
      const stats = this.stats;
      const claimSent = performance.now();
      const claim = await this.post(this.work, '/pnet/agent/claim/', b.headers, { browser_id: b.browserId });
      stats?.claim.add(performance.now() - claimSent, claim.status);
      const step = (claim.json as { step: StepRecord | null } | null)?.step;
      if (!step) return;
      b.running = { action_id: step.id, claimed_at: step.claimed_at };
      if (Math.random() < this.silentRate) {
        // The browser stops here: its claim must lapse on the lease timer alone.
        b.silent = true;
        this.silentClaims.push({ stepId: step.id, claimedAt: step.claimed_at });
        return;
      }
      const runMs = 1500 + Math.random() * 1500;
      await sleep(runMs);
      await this.report(b, step, Math.round(runMs));
    } finally {
      if (!b.silent) {
        b.running = null;
        b.busy = false;
      }
    }
  }

  async report(b: Browser, step: StepRecord, durationMs: number): Promise<number> {
    const stats = this.stats;
    const sent = performance.now();
    const sentAt = Date.now();
    const result = await this.post(this.work, `/pnet/agent/actions/${step.id}/result/`, b.headers, {
      status: 'succeeded',
      claimed_at: step.claimed_at,
      duration_ms: durationMs,
      outcome: { kind: step.kind, page_loaded: true, profile_resolved: true },
    });
    stats?.result.add(performance.now() - sent, result.status);
    if (result.status === 200) stats?.reports.push({ stepId: step.id, sentAt, answeredAt: Date.now() });
    if (result.status === 200) {
      this.settled += 1;
      this.settledTotal += 1;
      stats?.settledAt.push(performance.now());
    }
    return result.status;
  }

  /** An operator's test step (unmetered: no gap, no ceiling, no working hours) for an account. */
  async queueStep(accountId: string, n: number): Promise<number> {
    const stats = this.stats;
    const sent = performance.now();
    const { status } = await this.post(
      this.work,
      '/pnet/steps/',
      { 'x-api-key': this.apiKey },
      {
        account_id: accountId,
        params: { kind: 'profile_view', profile_url: `https://pnet.example/in/bench-${n}` },
        contact_key: `bench-${n}`,
        test: true,
      },
    );
    stats?.queue.add(performance.now() - sent, status);
    if (status === 201) this.queued += 1;
    return status;
  }

  /** Claims the account's next step and reports it at once, for the closed-loop phase. */
  async claimAndSettle(b: Browser): Promise<number> {
    const claim = await this.post(this.work, '/pnet/agent/claim/', b.headers, { browser_id: b.browserId });
    const step = (claim.json as { step: StepRecord | null } | null)?.step;
    if (!step) return claim.status === 200 ? -1 : claim.status;
    return this.report(b, step, 0);
  }
}

/** Runs fn(0..count-1) with at most `workers` at a time. */
async function inParallel(count: number, workers: number, fn: (i: number) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (next < count) await fn(next++);
    }),
  );
}

// ---------------------------------------------------------------------------------------------
// Provisioning: a workspace with credits and one sender account per browser

async function provision(sql: Sql, count: number) {
  const ws = await createWorkspaceWithAdmin(sql, { name: 'Bench', plan: 'paid' });
  await grantWorkspaceCredits(sql, { workspaceId: ws.workspace_id, amount: 10_000_000, causeKey: 'bench-grant' });
  const allWeek = { start: '00:00', end: '00:00', days: [1, 2, 3, 4, 5, 6, 7] };
  await inParallel(count, 8, async (n) => {
    const profile = await createSenderProfile(sql, ws.workspace_id, { name: `Sender ${n}`, timezone: 'UTC' });
    await updatePnetSettings(sql, ws.workspace_id, profile.id, {
      run_mode: 'automatic',
      working_hours: allWeek,
      min_action_interval_seconds: 30,
    });
  });
  const accounts = await sql<{ id: string; connection_token_version: number }[]>`
    select id, connection_token_version from pnet_accounts where workspace_id = ${ws.workspace_id} order by id`;
  const browsers: Browser[] = [];
  for (const a of accounts) {
    const token = await connectionToken(sql, a.id, a.connection_token_version);
    browsers.push({
      accountId: a.id,
      headers: { authorization: `Bearer ${token}` },
      browserId: randomUUID(),
      nonce: `bench-${randomUUID()}`,
      identity: { member_urn: `urn:li:member:${a.id}`, display_name: 'Bench Sender' },
      running: null,
      busy: false,
    });
  }
  return { apiKey: ws.api_key, workspaceId: ws.workspace_id, browsers };
}

// ---------------------------------------------------------------------------------------------
// Temporal: every browser-step workflow's history length and how often it was messaged

const messageEvents = new Set([
  'EVENT_TYPE_WORKFLOW_EXECUTION_STARTED',
  'EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED',
  'EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED',
]);

/** Waits (at most 5 minutes) until the task queue's workflow and activity backlogs stay under 20 for three looks 2 s apart; answers the last backlog. */
async function drainedQueues(
  connection: Connection,
  { taskQueue, temporalNamespace: namespace }: { taskQueue: string; temporalNamespace: string },
): Promise<number> {
  const deadline = performance.now() + 300_000;
  let quiet = 0;
  let backlog = Infinity;
  while (quiet < 3 && performance.now() < deadline) {
    backlog = 0;
    for (const taskQueueType of [1, 2]) {
      const described = await connection.workflowService.describeTaskQueue({
        namespace,
        taskQueue: { name: taskQueue, kind: 1 },
        taskQueueType,
        reportStats: true,
      });
      backlog += Number(described.stats?.approximateBacklogCount ?? 0);
    }
    quiet = backlog < 20 ? quiet + 1 : 0;
    await sleep(2000);
  }
  return backlog;
}

/** Every workflow's history length from the list; message rates from at most 2,000 histories. */
async function inspectWorkflows(client: Client) {
  const ids: string[] = [];
  let maxHistory = 0;
  for await (const wf of client.workflow.list({ query: `WorkflowType = 'browserStepWorkflow'` })) {
    ids.push(wf.workflowId);
    maxHistory = Math.max(maxHistory, wf.historyLength);
  }
  const read = ids.sort(() => Math.random() - 0.5).slice(0, 2000);
  let maxPerSecond = 0;
  let maxLifetimeRate = 0;
  let maxMessages = 0;
  await inParallel(read.length, 16, async (i) => {
    const history = JSON.parse(historyToJSON(await client.workflow.getHandle(read[i]!).fetchHistory())) as {
      events: { eventType: string; eventTime: string }[];
    };
    maxHistory = Math.max(maxHistory, history.events.length);
    const times = history.events.filter((e) => messageEvents.has(e.eventType)).map((e) => Date.parse(e.eventTime));
    maxMessages = Math.max(maxMessages, times.length);
    // The most messages that arrived within any one second.
    for (let k = 0, j = 0; k < times.length; k += 1) {
      while (times[k]! - times[j]! >= 1000) j += 1;
      maxPerSecond = Math.max(maxPerSecond, k - j + 1);
    }
    const span = (times[times.length - 1]! - times[0]!) / 1000;
    if (times.length > 1) maxLifetimeRate = Math.max(maxLifetimeRate, (times.length - 1) / Math.max(span, 1));
  });
  return { workflows: ids.length, read: read.length, maxHistory, maxPerSecond, maxLifetimeRate, maxMessages };
}

/**
 * Where a result report's time goes, read from its workflow's history: the settle is the run's
 * last workflow task, and its Scheduled, Started and Completed events split the wait into the
 * way in (API, the Update reaching the history service), the wait for a worker to pick the task,
 * the worker's task (the activation and the settle's SQL as a local activity), and the way out.
 * Same machine, same clock. Read for the slowest 1% of reports and for a sample of all of them.
 */
const segments = [
  'way in (API, Temporal accepting the Update)',
  'wait for the worker to pick the task',
  'worker: task picked to settle SQL scheduled',
  'worker: settle SQL (local activity)',
  'worker: SQL done to task completed',
  'way out (history written, answer back)',
] as const;

async function resultBreakdown(client: Client, reports: ReportTiming[]) {
  const byLatency = [...reports].sort((a, b) => b.answeredAt - b.sentAt - (a.answeredAt - a.sentAt));
  const slowest = byLatency.slice(0, Math.max(5, Math.ceil(reports.length / 100)));
  const sample = [...reports].sort(() => Math.random() - 0.5).slice(0, 200);
  const split = async (r: ReportTiming): Promise<number[] | null> => {
    const history = JSON.parse(
      historyToJSON(await client.workflow.getHandle(browserStepWorkflowId(r.stepId)).fetchHistory()),
    ) as {
      events: {
        eventType: string;
        eventTime: string;
        markerRecordedEventAttributes?: { details?: { data?: { payloads?: { data?: string }[] } } };
      }[];
    };
    const at = (type: string) => {
      const e = [...history.events].reverse().find((ev) => ev.eventType === `EVENT_TYPE_WORKFLOW_TASK_${type}`);
      return e ? Date.parse(e.eventTime) : NaN;
    };
    const [scheduled, started, completed] = [at('SCHEDULED'), at('STARTED'), at('COMPLETED')];
    // The local activity's marker: when it was scheduled (real time), and its completion as the
    // workflow's time (the task's start) plus how long it ran.
    const marker = [...history.events].reverse().find((ev) => ev.eventType === 'EVENT_TYPE_MARKER_RECORDED');
    const encoded = marker?.markerRecordedEventAttributes?.details?.data?.payloads?.[0]?.data;
    const data = encoded
      ? (JSON.parse(Buffer.from(encoded, 'base64').toString()) as {
          original_schedule_time?: unknown;
          complete_time?: unknown;
        })
      : {};
    const time = (t: unknown) =>
      typeof t === 'string'
        ? Date.parse(t)
        : t && typeof t === 'object' && 'seconds' in t
          ? Number((t as { seconds: number }).seconds) * 1000 + Number((t as { nanos?: number }).nanos ?? 0) / 1e6
          : NaN;
    const laScheduled = time(data.original_schedule_time);
    const laRan = time(data.complete_time) - started;
    if (![scheduled, started, completed, laScheduled, laRan].every(Number.isFinite)) return null;
    return [
      scheduled - r.sentAt,
      started - scheduled,
      laScheduled - started,
      laRan,
      completed - laScheduled - laRan,
      r.answeredAt - completed,
    ];
  };
  const read = async (list: ReportTiming[]) => {
    const rows: number[][] = [];
    await inParallel(list.length, 8, async (i) => {
      const row = await split(list[i]!).catch(() => null);
      if (row) rows.push(row);
    });
    return rows;
  };
  const [slow, typical] = [await read(slowest), await read(sample)];
  const mean = (rows: number[][], k: number) => rows.reduce((sum, r) => sum + r[k]!, 0) / Math.max(rows.length, 1);
  const median = (rows: number[][], k: number) =>
    rows.map((r) => r[k]!).sort((a, b) => a - b)[Math.floor(rows.length / 2)] ?? NaN;
  const rows: { name: string; typical: number; slowest: number }[] = segments.map((name, k) => ({
    name,
    typical: median(typical, k),
    slowest: mean(slow, k),
  }));
  return [...rows, { name: 'reports read', typical: typical.length, slowest: slow.length }];
}
type Breakdown = Awaited<ReturnType<typeof resultBreakdown>>;

/**
 * Temporal's own account of a window: the dev server's persistence (every operation goes through
 * one SQLite connection, so their summed time per second is how many wait on it at once) and the
 * worker SDK's workflow task and local activity latencies.
 */
interface TemporalView {
  /** Persistence operations by total time: name, count, mean ms. */
  persistence: { operation: string; count: number; meanMs: number; totalSeconds: number }[];
  /** Summed persistence time per second of window (main and visibility stores). */
  persistenceInFlight: number;
  worker: { name: string; count: number; meanMs: number; p90BoundMs: number }[];
  /**
   * Workflow tasks handed straight to a waiting poll (sync match) of all handed out, for the
   * task queue's partitions and for the worker's sticky queue. The rest were written to the
   * task queue's backlog first and read back: a persistence write and read each, and a wait.
   */
  matched: { queue: 'normal' | 'sticky'; sync: number; all: number }[];
}

function temporalWindow(
  before: { server: Scrape; worker: Scrape },
  after: { server: Scrape; worker: Scrape },
  seconds: number,
): TemporalView {
  const ops = new Map<string, { count: number; sum: number }>();
  for (const name of ['persistence_latency', 'visibility_persistence_latency']) {
    const operations = new Set([...(after.server.get(name)?.keys() ?? [])].map((l) => labelOf(l, 'operation')));
    for (const op of operations) {
      const change = histogramChange(before.server, after.server, name, (l) => labelOf(l, 'operation') === op);
      if (change.count <= 0) continue;
      const label = name.startsWith('visibility') ? `visibility ${op}` : op;
      ops.set(label, { count: change.count, sum: change.sum });
    }
  }
  const persistence = [...ops]
    .map(([operation, o]) => ({ operation, count: o.count, meanMs: (o.sum / o.count) * 1000, totalSeconds: o.sum }))
    .sort((a, b) => b.totalSeconds - a.totalSeconds);
  const sdk = (label: string, name: string, match: (l: string) => boolean) => {
    const c = histogramChange(before.worker, after.worker, name, match);
    return { name: label, count: c.count, meanMs: c.mean, p90BoundMs: c.p90Bound };
  };
  const worker = [
    sdk('workflow task: scheduled to picked', 'temporal_workflow_task_schedule_to_start_latency', () => true),
    sdk('workflow task: picked to completed', 'temporal_workflow_task_execution_latency', () => true),
    sdk(
      '  claim SQL (local activity)',
      'temporal_local_activity_execution_latency',
      (l) => labelOf(l, 'activity_type') === 'claimStep',
    ),
    sdk(
      '  settle SQL (local activity)',
      'temporal_local_activity_execution_latency',
      (l) => labelOf(l, 'activity_type') === 'settleStep',
    ),
    sdk(
      '  completing it (RespondWorkflowTaskCompleted)',
      'temporal_request_latency',
      (l) => labelOf(l, 'operation') === 'RespondWorkflowTaskCompleted',
    ),
  ];
  const matched = (['normal', 'sticky'] as const).map((queue) => {
    const keep = (l: string) =>
      labelOf(l, 'task_type') === 'Workflow' && (labelOf(l, 'partition') === '__sticky__') === (queue === 'sticky');
    return {
      queue,
      sync: histogramChange(before.server, after.server, 'poll_success_sync', keep).count,
      all: histogramChange(before.server, after.server, 'poll_success', keep).count,
    };
  });
  return {
    persistence,
    persistenceInFlight: persistence.reduce((sum, p) => sum + p.totalSeconds, 0) / seconds,
    worker,
    matched,
  };
}

// ---------------------------------------------------------------------------------------------
// The run

interface OutageResult {
  heartbeat: Recorder;
  during: StepStats;
  silent: number;
  lapsed: number;
  /** Milliseconds from each silent claim's lease end to its lapse. */
  late: Recorder;
}

interface PhaseResult {
  name: string;
  rate: number;
  withSteps: boolean;
  heartbeat: Recorder;
  steps: StepStats;
  stepsPerSecond: number;
  cpu: Record<Component, number>;
  api: ApiWindow;
  temporal: TemporalView;
  pgWaits: PgWait[];
  /** The baseline route at the step rate inside the same window, beside the same load. */
  baselineBeside: Recorder | null;
}

interface BaselineResult {
  rate: number;
  recorder: Recorder;
  cpu: Record<Component, number>;
}

interface MaxResult {
  maxHeartbeat: Recorder;
  maxBaseline: Recorder;
  maxHeartbeatCpu: Record<Component, number>;
  maxBaselineCpu: Record<Component, number>;
  heartbeatCost: RequestCost;
  baselineCost: RequestCost;
}

interface StepsResult {
  queueRate: number;
  queueCpuMs: { api: number; postgres: number; temporal: number };
  maxStepsPerSecond: number;
  maxSteps: StepStats;
  maxStepsCpu: Record<Component, number>;
  stepCpuMs: { api: number; postgres: number; temporal: number };
}

type WorkflowsResult = Awaited<ReturnType<typeof inspectWorkflows>>;

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-pnet-'));
  // As root, Postgres runs as its own user, which must reach its data folder.
  chmodSync(dataDir, 0o755);
  const logFile = `${dataDir}.log`;
  log(`starting the stack (DATA_DIR ${dataDir}, log ${logFile})`);
  const { serve, pids } = await startBenchStack(dataDir, logFile, log);
  for (const { component, nice } of niceWanted) {
    const pid = component === 'worker' ? (serve.workerPid ?? undefined) : pids[component];
    const threads = renice(pid, nice);
    log(`BENCH_NICE: ${component} (pid ${pid}) at nice ${nice}, ${threads} threads`);
  }
  const sql = createSql(serve.databaseUrl, { max: 8 });
  // Its own connection, so sampling never waits behind the bench's other queries.
  const waitSql = createSql(serve.databaseUrl, { max: 1 });
  const connection = await Connection.connect({ address: serve.temporalAddress });
  const temporal = new Client({ connection });
  const snap = () => cpuSnapshot(pids);
  const readMetrics = async () => ({
    server: await scrape(serve.temporalMetricsUrl),
    worker: await scrape(serve.workerMetricsUrl),
  });
  let failed = false;
  try {
    let t = performance.now();
    const { apiKey, browsers } = await provision(sql, browsersWanted);
    log(`provisioned ${browsers.length} sender accounts in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    const sim = new Sim(serve.apiUrl, browsers, apiKey);

    t = performance.now();
    let connected = 0;
    await inParallel(browsers.length, 32, async (i) => {
      if ((await sim.heartbeat(browsers[i]!, true)) === 200) connected += 1;
    });
    log(
      `connected ${connected}/${browsers.length} browsers (first heartbeat with identity and lease) in ${((performance.now() - t) / 1000).toFixed(1)} s`,
    );
    if (connected !== browsers.length) throw new Error('not every browser connected');
    // Connecting starts every account's workflow and its first housekeeping reads (about three
    // step workflows an account) at once: a burst no running service sees. The phases measure the
    // steady state after it, so wait until Temporal's queues have drained.
    t = performance.now();
    const backlog = await drainedQueues(connection, readServiceConfig());
    log(
      `connect burst drained from Temporal's queues in ${((performance.now() - t) / 1000).toFixed(1)} s (backlog now ${backlog})`,
    );

    const heartbeatLoad = (seconds: number, rate: (t: number) => number) =>
      openLoop({ seconds, rate, send: () => sim.heartbeat(sim.nextBrowser()) });
    const baselineAt = async (rate: number, seconds: number): Promise<BaselineResult> => {
      log(`baseline at ${rate}/s for ${seconds} s`);
      const before = snap();
      const recorder = await openLoop({ seconds, rate: () => rate, send: () => sim.baseline() });
      log(
        `  baseline p50 ${fmt(recorder.percentile(50))} p99 ${fmt(recorder.percentile(99))} at ${recorder.rate().toFixed(0)}/s (${recorder.statusSummary()})`,
      );
      return { rate, recorder, cpu: cpuPercent(before, snap()) };
    };
    let stepCounter = 0;
    const produce = (seconds: number) =>
      openLoop({
        seconds,
        rate: () => stepRate,
        send: () => sim.queueStep(browsers[Math.floor(Math.random() * browsers.length)]!.accountId, stepCounter++),
      });

    /** Lets every queued step be claimed and settled, check-ins going on at the phase's rate. */
    const drain = async (rate: number) => {
      const deadline = performance.now() + 90_000;
      // A silent browser's claim settles by lapsing (the outage part), not by a result.
      const open = () => sim.queued - sim.settled - sim.silentClaims.length;
      while (open() > 0 && performance.now() < deadline) await heartbeatLoad(2, () => rate);
      while (browsers.some((b) => b.busy && !b.silent) && performance.now() < deadline) await sleep(100);
      if (open() > 0) log(`  drain: ${open()} steps still unsettled after 90 s`);
    };

    const phase = async (
      name: string,
      rate: number,
      options: { rampFrom?: number; withSteps: boolean },
    ): Promise<PhaseResult> => {
      const lead = options.rampFrom !== undefined ? 20 : warmSeconds;
      const leadText =
        options.rampFrom !== undefined ? `ramp ${options.rampFrom}→${rate}/s over ${lead} s` : `warm-up ${lead} s`;
      log(
        `${name}: ${leadText}, then ${windowSeconds} s at ${rate} heartbeats/s${options.withSteps ? ` with ${stepRate} steps/s` : ', no steps'}`,
      );
      sim.stepsOn = options.withSteps;
      const producer = options.withSteps ? produce(lead + windowSeconds) : Promise.resolve(null);
      const from = options.rampFrom;
      await heartbeatLoad(lead, from !== undefined ? (s) => from + ((rate - from) * s) / lead : () => rate);
      const steps = newStepStats();
      sim.stats = steps;
      const metricsBefore = await readMetrics();
      const before = snap();
      serve.apiWindow.reset();
      const waits = sampleWaits(waitSql);
      const windowStart = performance.now();
      // The one-round-trip baseline at the step rate in the same window: the floor a result report
      // is held to under the same load (the quiet baseline is measured in a window of its own).
      const beside = options.withSteps
        ? openLoop({ seconds: windowSeconds, rate: () => stepRate, send: () => sim.baseline() })
        : null;
      const heartbeat = await heartbeatLoad(windowSeconds, () => rate);
      const windowEnd = performance.now();
      const baselineBeside = beside ? await beside : null;
      const pgWaits = await waits.stop();
      const cpu = cpuPercent(before, snap());
      const api = await serve.apiWindow.read();
      const temporalView = temporalWindow(metricsBefore, await readMetrics(), (windowEnd - windowStart) / 1000);
      sim.stats = null;
      await producer;
      if (options.withSteps) await drain(rate);
      sim.stepsOn = false;
      const settledInWindow = steps.settledAt.filter((at) => at >= windowStart && at <= windowEnd).length;
      const stepsPerSecond = settledInWindow / ((windowEnd - windowStart) / 1000);
      log(
        `  heartbeat p50 ${fmt(heartbeat.percentile(50))} p99 ${fmt(heartbeat.percentile(99))} at ${heartbeat.rate().toFixed(0)}/s (${heartbeat.statusSummary()})` +
          (options.withSteps
            ? `; steps ${stepsPerSecond.toFixed(1)}/s, result p99 ${fmt(steps.result.percentile(99))}`
            : ''),
      );
      return {
        name,
        rate,
        withSteps: options.withSteps,
        heartbeat,
        steps,
        stepsPerSecond,
        cpu,
        api,
        temporal: temporalView,
        pgWaits,
        baselineBeside,
      };
    };

    // Maximum throughput first, on a quiet stack: nothing else queued, no workflow busy.
    const maxSeconds = Math.min(30, windowSeconds);
    let cpuFrom: CpuSnapshot = snap();
    let cpuTo: CpuSnapshot = cpuFrom;
    let max: MaxResult | null = null;
    if (runs('max')) {
      log(`max throughput: closed loops of ${closedWorkers}, ${maxSeconds} s each`);
      const maxHeartbeat = await closedLoop({
        seconds: maxSeconds,
        workers: closedWorkers,
        send: () => sim.heartbeat(sim.nextBrowser()),
      });
      cpuTo = snap();
      const maxHeartbeatCpu = cpuPercent(cpuFrom, cpuTo);
      const heartbeatCost = cpuPerRequest(cpuFrom, cpuTo, maxHeartbeat.count);
      cpuFrom = cpuTo;
      const maxBaseline = await closedLoop({ seconds: maxSeconds, workers: closedWorkers, send: () => sim.baseline() });
      cpuTo = snap();
      const maxBaselineCpu = cpuPercent(cpuFrom, cpuTo);
      const baselineCost = cpuPerRequest(cpuFrom, cpuTo, maxBaseline.count);
      log(
        `  heartbeat ${maxHeartbeat.rate().toFixed(0)}/s (p99 ${fmt(maxHeartbeat.percentile(99))}); baseline ${maxBaseline.rate().toFixed(0)}/s (p99 ${fmt(maxBaseline.percentile(99))})`,
      );
      log(`  CPU per request: heartbeat ${costText(heartbeatCost)}; baseline ${costText(baselineCost)}`);
      max = { maxHeartbeat, maxBaseline, maxHeartbeatCpu, maxBaselineCpu, heartbeatCost, baselineCost };
    }

    // Check-ins alone first, ramped to 1,000/s, while no step workflow is busy: a backlog the step
    // stream leaves behind (see the per-step CPU below) would otherwise be measured with them.
    const rate1 = Math.round(browsers.length / 15);
    const phases: PhaseResult[] = [];
    const baselines = new Map<number, BaselineResult>();
    let baselineSteps: BaselineResult | null = null;
    if (runs('alone')) phases.push(await phase('check-ins alone', 1000, { rampFrom: rate1, withSteps: false }));
    if (runs('alone') || runs('phase2')) baselines.set(1000, await baselineAt(1000, Math.min(30, windowSeconds)));
    if (runs('phase1')) {
      phases.push(await phase('phase 1', rate1, { withSteps: true }));
      baselines.set(rate1, await baselineAt(rate1, Math.min(30, windowSeconds)));
    }
    if (runs('phase1') || runs('phase2') || runs('outage')) baselineSteps = await baselineAt(stepRate, 20);
    if (runs('phase2')) phases.push(await phase('phase 2', 1000, { rampFrom: rate1, withSteps: true }));

    let steps: StepsResult | null = null;
    if (runs('steps')) {
      // Claim-to-settle at its fastest: 64 accounts each with a line of steps, claimed and reported
      // back to back (no run time), so the step workflows and Temporal set the pace.
      const perAccount = Math.max(5, Math.round(maxSeconds * 1.5));
      const busyBrowsers = browsers.slice(0, closedWorkers);
      log(`queueing ${perAccount} steps on each of ${busyBrowsers.length} accounts`);
      const queueStats = newStepStats();
      sim.stats = queueStats;
      const queueStart = performance.now();
      const queueCpuFrom = snap();
      // Bounded in time too: behind a backlog of the step stream, starting workflows slows down.
      const queueDeadline = performance.now() + 120_000;
      await inParallel(perAccount * busyBrowsers.length, 16, async (n) => {
        if (performance.now() < queueDeadline)
          await sim.queueStep(busyBrowsers[n % busyBrowsers.length]!.accountId, stepCounter++);
      });
      sim.stats = null;
      const queueRate = queueStats.queue.count / ((performance.now() - queueStart) / 1000);
      // What queueing a step costs (its row, its workflow's start and first task), apart from its claim and settle.
      const queueCpuTo = snap();
      const perQueued = (c: Component) =>
        queueStats.queue.count ? ((queueCpuTo[c] - queueCpuFrom[c]) * 1000) / queueStats.queue.count : NaN;
      const queueCpuMs = { api: perQueued('api'), postgres: perQueued('postgres'), temporal: perQueued('temporal') };
      log(
        `  queued at ${queueRate.toFixed(0)}/s, p99 ${fmt(queueStats.queue.percentile(99))}; ` +
          `CPU per queued step: API+worker ${queueCpuMs.api.toFixed(0)} ms, Temporal ${queueCpuMs.temporal.toFixed(0)} ms, Postgres ${queueCpuMs.postgres.toFixed(1)} ms`,
      );
      await Promise.all(busyBrowsers.map((b) => sim.heartbeat(b)));
      const maxSteps = newStepStats();
      sim.stats = maxSteps;
      cpuFrom = snap();
      let worker = 0;
      const stepLoop = await closedLoop({
        seconds: maxSeconds,
        workers: closedWorkers,
        send: () => sim.claimAndSettle(busyBrowsers[worker++ % busyBrowsers.length]!),
      });
      cpuTo = snap();
      sim.stats = null;
      const maxStepsPerSecond = maxSteps.settledAt.length / ((stepLoop.ended - stepLoop.started) / 1000);
      // CPU milliseconds each settled step cost each part: where the step stream's ceiling comes from.
      const perStep = (c: Component) =>
        maxSteps.settledAt.length ? ((cpuTo[c] - cpuFrom[c]) * 1000) / maxSteps.settledAt.length : NaN;
      const stepCpuMs = { api: perStep('api'), postgres: perStep('postgres'), temporal: perStep('temporal') };
      log(
        `  claim-to-settle ${maxStepsPerSecond.toFixed(1)} steps/s, result p99 ${fmt(maxSteps.result.percentile(99))}, claim p99 ${fmt(maxSteps.claim.percentile(99))}; ` +
          `CPU per step: API+worker ${stepCpuMs.api.toFixed(0)} ms, Temporal ${stepCpuMs.temporal.toFixed(0)} ms, Postgres ${stepCpuMs.postgres.toFixed(1)} ms`,
      );
      steps = {
        queueRate,
        queueCpuMs,
        maxStepsPerSecond,
        maxSteps,
        maxStepsCpu: cpuPercent(cpuFrom, cpuTo),
        stepCpuMs,
      };
    }

    let outage: OutageResult | null = null;
    if (runs('outage')) {
      // A worker outage (decision 046): claims and results keep answering from Postgres alone, and
      // every claim made in the outage whose browser then goes silent lapses on time.
      const rate = rate1;
      log(
        `outage: warm-up ${warmSeconds} s, then the worker frozen for ${outageSeconds} s at ${rate} heartbeats/s with ${stepRate} steps/s; 5% of browsers go silent after a claim`,
      );
      sim.stepsOn = true;
      const producer = produce(warmSeconds + outageSeconds);
      await heartbeatLoad(warmSeconds, () => rate);
      const during = newStepStats();
      sim.stats = during;
      sim.silentRate = 0.05;
      serve.worker('pause');
      const heartbeat = await heartbeatLoad(outageSeconds, () => rate);
      serve.worker('resume');
      sim.stats = null;
      sim.silentRate = 0;
      await producer;
      await drain(rate);
      sim.stepsOn = false;
      const silent = sim.silentClaims.map((c) => c.stepId);
      log(
        `  claims p99 ${fmt(during.claim.percentile(99))}, results p99 ${fmt(during.result.percentile(99))} during the outage; waiting for ${silent.length} silent claims to lapse`,
      );
      const lapseDeadline = performance.now() + (claimLeaseSeconds + 90) * 1000;
      const stillClaimed = async () =>
        (
          await sql<
            { n: number }[]
          >`select count(*)::int as n from browser_steps where id = any(${silent}::uuid[]) and status = 'claimed'`
        )[0]!.n;
      while ((await stillClaimed()) > 0 && performance.now() < lapseDeadline) await heartbeatLoad(5, () => rate);
      // How long after its lease's end each silent claim lapsed (its row's last change).
      const lapses = await sql<{ late_ms: number; status: string }[]>`
        select status, extract(epoch from (updated_at - (claimed_at + make_interval(secs => ${claimLeaseSeconds})))) * 1000 as late_ms
        from browser_steps where id = any(${silent}::uuid[])`;
      const late = new Recorder();
      for (const l of lapses) if (l.status !== 'claimed') late.add(Number(l.late_ms), 200);
      outage = { heartbeat, during, silent: silent.length, lapsed: late.count, late };
      log(
        `  ${late.count}/${silent.length} silent claims lapsed, after their lease's end p50 ${fmt(late.percentile(50))} p99 ${fmt(late.percentile(99))} max ${fmt(late.percentile(100))}`,
      );
    }

    let wf: WorkflowsResult | null = null;
    if (runs('phase1') || runs('phase2') || runs('steps')) {
      log('reading the browser-step workflows from Temporal');
      wf = await inspectWorkflows(temporal);
    }
    const breakdowns = new Map<string, Breakdown>();
    for (const p of phases)
      if (p.withSteps && p.steps.reports.length)
        breakdowns.set(p.name, await resultBreakdown(temporal, p.steps.reports));

    printTable({ max, phases, baselines, baselineSteps, steps, wf, breakdowns, browsers: browsers.length });
    if (outage) printOutage(outage, baselineSteps);
    await sim.close();
  } catch (error) {
    failed = true;
    process.stderr.write(`bench failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  } finally {
    await connection.close().catch(() => {});
    await sql.end({ timeout: 5 }).catch(() => {});
    await waitSql.end({ timeout: 5 }).catch(() => {});
    log('stopping the stack');
    await serve.stop();
    rmSync(dataDir, { recursive: true, force: true });
    // pino writes JSON lines; level 40 and above are warnings and errors.
    const warnings = readFileSync(logFile, 'utf8')
      .split('\n')
      .filter((l) => /"level":\s*[4-6]\d/.test(l)).length;
    if (failed || warnings > 0) log(`the stack logged ${warnings} warnings or errors: ${logFile}`);
    else rmSync(logFile, { force: true });
  }
  process.exit(failed ? 1 : 0);
}

// ---------------------------------------------------------------------------------------------
// The table

const fmt = (ms: number) => (Number.isFinite(ms) ? `${ms < 10 ? ms.toFixed(1) : ms.toFixed(0)} ms` : 'n/a');
const ratio = (a: number, b: number) => (b > 0 && Number.isFinite(a) ? `${(a / b).toFixed(2)}×` : 'n/a');
interface RequestCost {
  api: number;
  postgres: number;
}

/** CPU microseconds per completed request, API process and Postgres, between two snapshots. */
function cpuPerRequest(from: CpuSnapshot, to: CpuSnapshot, count: number): RequestCost {
  const per = (c: Component) => (count > 0 ? ((to[c] - from[c]) * 1e6) / count : NaN);
  return { api: per('api'), postgres: per('postgres') };
}

const costText = (c: RequestCost) => `${c.api.toFixed(0)} + ${c.postgres.toFixed(0)} µs`;
const cpuText = (c: Record<Component, number>) =>
  `API+worker ${c.api}%, Postgres ${c.postgres}%, Temporal ${c.temporal}%, load generator ${c.bench}%, other ${c.other}%`;

function printTable(r: {
  max: MaxResult | null;
  phases: PhaseResult[];
  baselines: Map<number, BaselineResult>;
  baselineSteps: BaselineResult | null;
  steps: StepsResult | null;
  wf: WorkflowsResult | null;
  breakdowns: Map<string, Breakdown>;
  browsers: number;
}) {
  const rows: string[][] = [];
  const met = (ok: boolean) => (ok ? 'met' : 'MISSED');
  const stepsBase = r.baselineSteps?.recorder;
  // The baseline's closed loop when it ran, else its open loop at 1,000/s, for the steps' ratio.
  const baseMax = r.max?.maxBaseline.rate() ?? NaN;
  if (r.max) {
    const m = r.max;
    const hbMax = m.maxHeartbeat.rate();
    rows.push([
      `max heartbeats per second (closed loop of ${closedWorkers})`,
      hbMax.toFixed(0),
      baseMax.toFixed(0),
      ratio(hbMax, baseMax),
      '≥ 0.5×',
      met(hbMax / baseMax >= 0.5),
    ]);
    rows.push([
      `  p99 at that load`,
      fmt(m.maxHeartbeat.percentile(99)),
      fmt(m.maxBaseline.percentile(99)),
      ratio(m.maxHeartbeat.percentile(99), m.maxBaseline.percentile(99)),
      '',
      '',
    ]);
    // What a request costs the stack in CPU does not depend on what else shares the machine; on a
    // machine of its own, CPU-bound throughput goes as its inverse.
    const hbCost = m.heartbeatCost.api + m.heartbeatCost.postgres;
    const baseCost = m.baselineCost.api + m.baselineCost.postgres;
    rows.push([
      `  CPU per request, API + Postgres`,
      costText(m.heartbeatCost),
      costText(m.baselineCost),
      ratio(hbCost, baseCost),
      '',
      '',
    ]);
  }
  for (const p of r.phases) {
    const base = r.baselines.get(p.rate)!.recorder;
    const at = `${p.name}, ${p.rate}/s${p.withSteps ? ` + ${stepRate} steps/s` : ''}`;
    const target = p.rate === 1000;
    rows.push([
      `${at}: heartbeat p50`,
      fmt(p.heartbeat.percentile(50)),
      fmt(base.percentile(50)),
      ratio(p.heartbeat.percentile(50), base.percentile(50)),
      '',
      '',
    ]);
    rows.push([
      `${at}: heartbeat p99`,
      fmt(p.heartbeat.percentile(99)),
      fmt(base.percentile(99)),
      ratio(p.heartbeat.percentile(99), base.percentile(99)),
      target ? '< 50 ms' : '',
      target ? met(p.heartbeat.percentile(99) < 50) : '',
    ]);
    rows.push([
      `${at}: heartbeats answered per second`,
      p.heartbeat.rate().toFixed(0),
      base.rate().toFixed(0),
      ratio(p.heartbeat.rate(), base.rate()),
      '',
      p.heartbeat.errors ? `${p.heartbeat.errors} errors` : '',
    ]);
    if (!p.withSteps || !stepsBase) continue;
    // The result report's targets (docs/benchmarks.md, bench:pnet): beside 200 check-ins/s, < 50 ms
    // and at most 3x the baseline's p99; beside 1,000/s, < 100 ms.
    const resultP99 = p.steps.result.percentile(99);
    const resultMet = target ? resultP99 < 100 : resultP99 < 50 && resultP99 <= 3 * stepsBase.percentile(99);
    rows.push([
      `${p.name}: result report p99`,
      fmt(resultP99),
      fmt(stepsBase.percentile(99)),
      ratio(resultP99, stepsBase.percentile(99)),
      target ? `< 100 ms at ${stepRate}/s` : `< 50 ms and ≤ 3× the baseline at ${stepRate}/s`,
      met(resultMet && p.stepsPerSecond >= stepRate * 0.9),
    ]);
    if (p.baselineBeside) {
      // The same ratio against the baseline measured beside the same load, in the same window.
      const besideP99 = p.baselineBeside.percentile(99);
      rows.push([
        `${p.name}: result report p99 vs the baseline beside it`,
        fmt(resultP99),
        fmt(besideP99),
        ratio(resultP99, besideP99),
        target ? '' : '≤ 3× the baseline under the same load',
        target ? '' : met(resultP99 <= 3 * besideP99),
      ]);
    }
    rows.push([
      `${p.name}: claim p99 / queue p99`,
      `${fmt(p.steps.claim.percentile(99))} / ${fmt(p.steps.queue.percentile(99))}`,
      fmt(stepsBase.percentile(99)),
      '',
      '',
      '',
    ]);
    rows.push([
      `${p.name}: claim-to-settle steps per second`,
      p.stepsPerSecond.toFixed(1),
      stepsBase.rate().toFixed(1),
      ratio(p.stepsPerSecond, stepsBase.rate()),
      `${stepRate} offered`,
      '',
    ]);
  }
  if (r.steps) {
    const st = r.steps;
    rows.push([
      `max claim-to-settle steps per second (closed loop of ${closedWorkers})`,
      st.maxStepsPerSecond.toFixed(1),
      r.max ? baseMax.toFixed(0) : '',
      r.max ? ratio(st.maxStepsPerSecond, baseMax) : '',
      '',
      '',
    ]);
    rows.push([
      `  its result p99 / claim p99`,
      `${fmt(st.maxSteps.result.percentile(99))} / ${fmt(st.maxSteps.claim.percentile(99))}`,
      '',
      '',
      '',
      '',
    ]);
    const cpuRow = (what: string, ms: StepsResult['stepCpuMs']) => [
      `  CPU per ${what}: API+worker / Temporal / Postgres`,
      `${ms.api.toFixed(0)} / ${ms.temporal.toFixed(0)} / ${ms.postgres.toFixed(1)} ms`,
      ...['', '', '', ''],
    ];
    rows.push(cpuRow('settled step', st.stepCpuMs));
    rows.push([`steps queued per second (16 at a time)`, st.queueRate.toFixed(0), '', '', '', '']);
    rows.push(cpuRow('queued step', st.queueCpuMs));
  }
  if (r.wf) {
    rows.push([
      `browser-step workflows: most history events`,
      String(r.wf.maxHistory),
      '',
      '',
      '≤ 4096',
      met(r.wf.maxHistory <= 4096),
    ]);
    rows.push([
      `browser-step workflows: highest average message rate over a life`,
      `${r.wf.maxLifetimeRate.toFixed(2)}/s`,
      '',
      '',
      '≤ 1/s',
      met(r.wf.maxLifetimeRate <= 1),
    ]);
    rows.push([`browser-step workflows: most messages within one second`, String(r.wf.maxPerSecond), '', '', '', '']);
  }

  const onPostgres = process.env.TEMPORAL_PERSISTENCE === 'postgres';
  const header = ['Measure', 'pnet', 'Baseline (GET /health/postgres/)', 'Ratio', 'Target', 'Result'];
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  const out = [
    '',
    `Machine: ${cpus().length} × ${cpus()[0]?.model.trim() ?? 'CPU'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(
        ' ',
      )}; ${r.browsers} browsers; Temporal: ${onPostgres ? 'the server on Postgres (TEMPORAL_PERSISTENCE=postgres)' : 'the dev server on SQLite'}` +
      (r.wf
        ? `; ${r.wf.workflows} step workflows (${r.wf.read} histories read).`
        : '; parts: ' + [...phasesWanted].join(', ') + '.'),
    '',
    line(header),
    line(header.map(() => '---')),
    ...rows.map(line),
    '',
    'CPU (percent of one core; "other" is everything else on the machine):',
    ...(r.max
      ? [`  max heartbeat: ${cpuText(r.max.maxHeartbeatCpu)}`, `  max baseline: ${cpuText(r.max.maxBaselineCpu)}`]
      : []),
    ...r.phases.flatMap((p) => [
      `  ${p.name} window: ${cpuText(p.cpu)}; the API process's event loop delay p50 ${fmt(p.api.eventLoop.p50Ms)}, p99 ${fmt(p.api.eventLoop.p99Ms)}, max ${fmt(p.api.eventLoop.maxMs)}`,
      `    its check-ins: the request, parsed to answered, p50 ${fmt(p.api.checkIns.requestP50Ms)}, p99 ${fmt(p.api.checkIns.requestP99Ms)}; ` +
        `inside it, waited for a statement p50 ${fmt(p.api.checkIns.waitedP50Ms)}, p99 ${fmt(p.api.checkIns.waitedP99Ms)}; ` +
        `${p.api.checkIns.statements} statements, each sent to answered p50 ${fmt(p.api.checkIns.statementP50Ms)}, p99 ${fmt(p.api.checkIns.statementP99Ms)}`,
    ]),
    ...[...r.baselines.values(), ...(r.baselineSteps ? [r.baselineSteps] : [])].map(
      (b) => `  baseline at ${b.rate}/s: ${cpuText(b.cpu)}`,
    ),
    ...(r.steps ? [`  max claim-to-settle: ${cpuText(r.steps.maxStepsCpu)}`] : []),
    '',
    ...r.phases
      .filter((p) => p.withSteps && p.temporal.persistence.length > 0)
      .flatMap((p) => [
        onPostgres
          ? `Temporal in the ${p.name} window: the server's persistence (Postgres, pools of connections) summed ${p.temporal.persistenceInFlight.toFixed(1)} s per second (that many calls in flight at once, on average):`
          : `Temporal in the ${p.name} window: the dev server's persistence goes through one SQLite connection, ` +
            `and its operations summed ${p.temporal.persistenceInFlight.toFixed(1)} s per second (that many waiting on it at once, on average):`,
        '',
        line(['Operation', 'count', 'mean', 'total']),
        line(['---', '---', '---', '---']),
        ...p.temporal.persistence
          .slice(0, 8)
          .map((o) => line([o.operation, String(o.count), fmt(o.meanMs), `${o.totalSeconds.toFixed(1)} s`])),
        '',
        line(['Worker SDK', 'count', 'mean', '90% under']),
        line(['---', '---', '---', '---']),
        ...p.temporal.worker.map((w) => line([w.name, String(w.count), fmt(w.meanMs), fmt(w.p90BoundMs)])),
        '',
        `Workflow tasks handed straight to a waiting poll (the rest went through the backlog): ` +
          p.temporal.matched.map((m) => `${m.queue} queue ${m.sync} of ${m.all}`).join(', ') +
          '.',
        '',
      ]),
    ...r.phases.flatMap((p) => [
      `Postgres in the ${p.name} window (pg_stat_activity every 20 ms: backends in each state at an average moment; CPU is running or waiting for a core):`,
      '',
      line(['Statement', 'wait', 'backends']),
      line(['---', '---', '---']),
      ...p.pgWaits.slice(0, 8).map((w) => line([w.statement, w.wait, w.average.toFixed(2)])),
      '',
    ]),
    ...[...r.breakdowns].flatMap(([phase, rows]) => [
      `Where a result report's time goes, ${phase} (from each step's history; median of a sample, mean of the slowest 1%):`,
      '',
      line(['Part', 'median', 'slowest 1%']),
      line(['---', '---', '---']),
      ...rows.map((row) =>
        line([
          row.name,
          row.name === 'reports read' ? String(row.typical) : fmt(row.typical),
          row.name === 'reports read' ? String(row.slowest) : fmt(row.slowest),
        ]),
      ),
      '',
    ]),
  ];
  process.stdout.write(out.join('\n') + '\n');
}

await main();

function printOutage(o: OutageResult, baseline: BaselineResult | null) {
  const rows = [
    ['claim (during the outage)', o.during.claim],
    ['result report (during the outage)', o.during.result],
    ['heartbeat (during the outage)', o.heartbeat],
  ] as const;
  console.log(`\nWorker outage of ${outageSeconds} s (the worker process frozen), ${stepRate} steps/s offered`);
  console.log('| Request | Answered | p50 | p99 | vs baseline p99 |');
  console.log('|---|---|---|---|---|');
  for (const [name, r] of rows) {
    console.log(
      `| ${name} | ${r.count} (${r.statusSummary()}) | ${fmt(r.percentile(50))} | ${fmt(r.percentile(99))} | ${baseline ? ratio(r.percentile(99), baseline.recorder.percentile(99)) : 'n/a'} |`,
    );
  }
  console.log(
    `| silent claims made in the outage | ${o.lapsed} of ${o.silent} lapsed | late ${fmt(o.late.percentile(50))} | late ${fmt(o.late.percentile(99))} | max ${fmt(o.late.percentile(100))} |`,
  );
}
