/**
 * `npm run chaos:pnet -- [--steps 1000] [--accounts 50] [--seconds 900]`: the pnet channel under
 * faults. Real Postgres and a Temporal dev server (its SQLite file kept across a restart), the
 * worker and the API as child processes; simulated browsers work through the steps while the
 * worker is SIGKILLed and restarted every few seconds, the API is restarted once and Temporal
 * once, the API SIGKILLs itself between a claim's commit and its signal every N claims, and
 * results are posted up to 5 times at once, some naming stale claims. At the end it
 * checks the invariants (chaos-checks.ts), prints the counts, and exits 1 on any violation.
 */
import { existsSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { migrate } from '../db/migrate.js';
import { createSql, type Sql } from '../db/sql.js';
import { ActionKindSchema, messageKinds, type ActionKind } from '../domain/pnet/limits.js';
import { claimLeaseSeconds } from '../domain/pnet/timing.js';
import { startEmbeddedPostgres } from '../worker/embedded-postgres.js';
import { freePort } from '../worker/ports.js';
import { createWorkspaceWithAdmin, grantWorkspaceCredits } from '../worker/provisioning.js';
import { startTemporalDevServer, type TemporalDevServerHandle } from '../worker/temporal-dev-server.js';
import { projectRoot } from '../worker/tools.js';
import { AgentClient } from './agent-client.js';
import { startApiBalancer, type ApiBalancer } from './api-balancer.js';
import { SimBrowser, formatCounters, sumCounters } from './browser.js';
import {
  checkExpiredClaims,
  checkLedger,
  checkLine,
  checkNoOverlap,
  checkSettles,
  terminalStatuses,
  type CheckResult,
  type StepRowLite,
} from './chaos-checks.js';
import { couldNotRun, reportAndExit, elapsedSay, freshDataDir, mapLimit, runCleanups } from './chaos-run.js';
import { ClaimObserver } from './claim-observer.js';
import { UsageError, numberFlag, rangeFlag, seededRandom } from './cli.js';
import { ServiceProcess, allDown, buildServiceScripts } from './service-process.js';
import { SimLog } from './sim-log.js';

const usage = `Usage: npm run chaos:pnet -- [options]

  --steps N              steps to queue (default 1000)
  --accounts N           sender accounts (default 50)
  --browsers N           simulated browsers per account (default 2)
  --seconds S            give up waiting for the steps after S seconds (default 1200)
  --kill-every S         SIGKILL the worker about every S seconds (default 5; 0: never)
  --max-kills N          stop killing after N kills (default: keep killing until the steps settle)
  --apis N               API processes behind one load balancer (default 2; 1: the browsers talk to it directly)
  --kill-api-after-claim N  each API process SIGKILLs itself between the commit of every N-th claim it makes
                         and that claim's signal to the step's workflow (default 25; 0: never)
  --metered N            metered steps per account, the rest unmetered tests (default 2; the gap is 30 s)
  --fail-rate R          (default 0.1)     --skip-rate R       (default 0.05)
  --duplicate-rate R     results posted 2 to 5 times at once (default 0.5)
  --stale-rate R         results also posted naming an earlier claim (default 0.2)
  --late-rate R          results posted after going silent past the claim lease (default 0.01)
  --silence-rate R       steps abandoned mid-run by a silent browser (default 0.01)
  --release-rate R       steps given back after looking (default 0.02)
  --run-ms MIN-MAX       how long running a step takes (default 100-1500)
  --no-api-restart       --no-temporal-restart
  --data-dir DIR         where Postgres, Temporal's SQLite and the logs go (default $DATA_DIR/chaos-pnet; wiped first)
  --database-url URL     use this (migrated or empty) database instead of starting Postgres
  --workflow-bundle FILE a prebuilt workflow bundle instead of building one
  --seed N               repeatable randomness`;

const allKinds: readonly ActionKind[] = ActionKindSchema.options;
/** Metered kinds whose first-week (warm-up) daily ceiling leaves room for a few each. */
const meteredKinds: ActionKind[] = [
  'profile_view',
  'follow_contact',
  'like_latest_post',
  'send_message',
  'connection_request',
  'check_inbox',
  'read_conversation',
];
const allWeek = { start: '00:00', end: '00:00', days: [1, 2, 3, 4, 5, 6, 7] };

function paramsFor(kind: ActionKind, n: number): Record<string, unknown> {
  const profile_url = `https://pnet.example/in/chaos-contact-${n}`;
  switch (kind) {
    case 'connection_request':
      return { kind, profile_url, note: null };
    case 'send_message':
      return { kind, profile_url, body: `Hello ${n}` };
    case 'inmail':
      return { kind, profile_url, subject: 'Hello', body: `Hello ${n}` };
    case 'read_conversation':
      return { kind, thread_url: `https://pnet.example/messaging/thread/${n}` };
    case 'check_sent_invitations':
    case 'check_connections':
    case 'check_inbox':
      return { kind };
    default:
      return { kind, profile_url };
  }
}

interface Options {
  steps: number;
  accounts: number;
  browsers: number;
  seconds: number;
  killEvery: number;
  maxKills: number;
  killApiAfterClaim: number;
  apis: number;
  metered: number;
  failRate: number;
  skipRate: number;
  duplicateRate: number;
  staleRate: number;
  lateRate: number;
  silenceRate: number;
  releaseRate: number;
  runMs: [number, number];
  apiRestart: boolean;
  temporalRestart: boolean;
  dataDir: string;
  databaseUrl: string | undefined;
  workflowBundle: string | undefined;
  seed: number;
}

function readOptions(): Options {
  const { values } = parseArgs({
    options: {
      steps: { type: 'string' },
      accounts: { type: 'string' },
      browsers: { type: 'string' },
      seconds: { type: 'string' },
      'kill-every': { type: 'string' },
      'max-kills': { type: 'string' },
      'kill-api-after-claim': { type: 'string' },
      apis: { type: 'string' },
      metered: { type: 'string' },
      'fail-rate': { type: 'string' },
      'skip-rate': { type: 'string' },
      'duplicate-rate': { type: 'string' },
      'stale-rate': { type: 'string' },
      'late-rate': { type: 'string' },
      'silence-rate': { type: 'string' },
      'release-rate': { type: 'string' },
      'run-ms': { type: 'string' },
      'no-api-restart': { type: 'boolean' },
      'no-temporal-restart': { type: 'boolean' },
      'data-dir': { type: 'string' },
      'database-url': { type: 'string' },
      'workflow-bundle': { type: 'string' },
      seed: { type: 'string' },
      help: { type: 'boolean' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  const rate = (name: string, fallback: number) => numberFlag(values, name, fallback, { min: 0, max: 1 });
  const accounts = numberFlag(values, 'accounts', 50, { min: 1, max: 1000 });
  return {
    steps: numberFlag(values, 'steps', 1000, { min: 1, max: 100_000 }),
    accounts,
    browsers: numberFlag(values, 'browsers', 2, { min: 1, max: 10 }),
    seconds: numberFlag(values, 'seconds', 1200, { min: 10 }),
    killEvery: numberFlag(values, 'kill-every', 5, { min: 0 }),
    maxKills: numberFlag(values, 'max-kills', Infinity, { min: 0 }),
    killApiAfterClaim: numberFlag(values, 'kill-api-after-claim', 25, { min: 0 }),
    apis: numberFlag(values, 'apis', 2, { min: 1, max: 8 }),
    metered: numberFlag(values, 'metered', 2, { min: 0, max: meteredKinds.length }),
    failRate: rate('fail-rate', 0.1),
    skipRate: rate('skip-rate', 0.05),
    duplicateRate: rate('duplicate-rate', 0.5),
    staleRate: rate('stale-rate', 0.2),
    lateRate: rate('late-rate', 0.01),
    silenceRate: rate('silence-rate', 0.01),
    releaseRate: rate('release-rate', 0.02),
    runMs: rangeFlag(values, 'run-ms', [100, 1500]),
    apiRestart: !values['no-api-restart'],
    temporalRestart: !values['no-temporal-restart'],
    dataDir: resolve(values['data-dir'] ?? join(resolve(projectRoot, process.env.DATA_DIR ?? '.data'), 'chaos-pnet')),
    databaseUrl: values['database-url'],
    workflowBundle: values['workflow-bundle'],
    seed: numberFlag(values, 'seed', Math.floor(Math.random() * 1e9)),
  };
}

const started = Date.now();
const say = elapsedSay(started);

/** The operator's side of the API (X-API-Key), for setting up accounts and queueing steps. */
function operatorApi(baseUrl: () => string, apiKey: string) {
  return async <T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> => {
    for (let attempt = 1; ; attempt += 1) {
      try {
        const response = await fetch(baseUrl() + path, {
          method,
          headers: { 'x-api-key': apiKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        return { status: response.status, body: (await response.json().catch(() => null)) as T };
      } catch (error) {
        // Only reads and idempotent writes are retried; a lost POST is reported, not repeated.
        if (method === 'POST' || attempt >= 20) throw error;
        await sleep(500);
      }
    }
  };
}

async function main() {
  const o = readOptions();
  const random = seededRandom(o.seed);
  say(
    `chaos:pnet: ${o.steps} steps, ${o.accounts} accounts, ${o.browsers} browser(s) each, seed ${o.seed}; data in ${o.dataDir}`,
  );
  await freshDataDir(o.dataDir);

  const { onCleanup, cleanup } = runCleanups(say);

  try {
    // Postgres, Temporal and the workflow bundle, side by side.
    const startPostgres = async () => {
      if (o.databaseUrl) return o.databaseUrl;
      const pg = await startEmbeddedPostgres({ dataDir: join(o.dataDir, 'postgres'), fast: true });
      onCleanup(() => pg.stop());
      const admin = createSql(pg.url('postgres'), { max: 1 });
      await admin`create database chaos`;
      await admin.end();
      return pg.url('chaos');
    };
    let temporal: TemporalDevServerHandle | null = null;
    const startTemporal = async () => {
      temporal = await startTemporalDevServer({ dataDir: o.dataDir, ui: false });
      // Whichever server runs at the end (it is restarted once) is the one to stop.
      onCleanup(async () => temporal?.stop());
    };
    const [databaseUrl, , built] = await Promise.all([
      startPostgres(),
      startTemporal(),
      buildServiceScripts(o.workflowBundle),
    ]);
    onCleanup(async () => built.remove());
    const { scripts } = built;
    const sql = createSql(databaseUrl, { max: 5 });
    onCleanup(() => sql.end({ timeout: 5 }));
    await migrate(sql);
    let temporalAddress = temporal!.address;
    say(`Postgres ready, Temporal at ${temporalAddress}`);

    const apiPorts: number[] = [];
    for (let i = 0; i < o.apis; i += 1) apiPorts.push(await freePort(18300 + i * 10));
    // The API fault's token (sim/run-api.ts): with several processes, one kills itself only once it takes it.
    const faultToken = join(o.dataDir, 'api-fault-token');
    const gated = o.killApiAfterClaim > 0 && o.apis > 1;
    const childEnv = (port = apiPorts[0]!): NodeJS.ProcessEnv => ({
      ...process.env,
      DATABASE_URL: databaseUrl,
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_NAMESPACE: 'default',
      TEMPORAL_TASK_QUEUE: 'chaos-pnet',
      HOST: '127.0.0.1',
      PORT: String(port),
      RATE_LIMIT_PER_MINUTE: '0',
      LOG_LEVEL: 'warn',
      WORKFLOW_BUNDLE: scripts.workflowBundle,
      // Read by the API only (sim/run-api.ts).
      CHAOS_KILL_AFTER_CLAIM: String(o.killApiAfterClaim),
      ...(gated ? { CHAOS_FAULT_TOKEN: faultToken } : {}),
      // The children go when this process goes, however it goes.
      EXIT_WITH_PARENT: '1',
    });
    const worker = new ServiceProcess(
      'worker',
      scripts.worker,
      childEnv,
      join(o.dataDir, 'worker.log'),
      'worker ready',
    );
    // Production runs several API processes behind a balancer; the browsers and the operator
    // reach them through one (sim/api-balancer.ts), so one process's death is not an outage.
    const apis = apiPorts.map(
      (port, i) =>
        new ServiceProcess(
          o.apis > 1 ? `api ${i + 1}` : 'api',
          scripts.api,
          () => childEnv(port),
          join(o.dataDir, o.apis > 1 ? `api-${i + 1}.log` : 'api.log'),
          'api ready',
        ),
    );
    onCleanup(() => worker.stop());
    for (const api of apis) onCleanup(() => api.stop());
    await Promise.all([worker.start(), ...apis.map((api) => api.start())]);
    const balancer =
      o.apis > 1 ? await startApiBalancer(() => apiPorts.map((port) => `http://127.0.0.1:${port}`)) : null;
    if (balancer) onCleanup(() => balancer.close());
    const apiUrl = balancer?.url ?? `http://127.0.0.1:${apiPorts[0]}`;
    say(
      `worker (pid ${worker.pid}) and ${o.apis} API process(es) (pids ${apis.map((a) => a.pid).join(', ')}) ready; the API at ${apiUrl}`,
    );
    // The token is there while at least two API processes answer (up, not being restarted, no
    // victim of the fault still dying), so the fault never takes the last one (decision 050).
    // With one process there is no token: every fault is an outage, the shape of `--apis 1`.
    const restarting = new Set<ServiceProcess>();
    const answering = () => apis.filter((api) => api.up && !restarting.has(api)).length;
    // A victim renames the token to `<token>.<its pid>` and dies; until the run has seen it go
    // (a new process in its place), it counts as down.
    const victimStillHere = () => {
      const pids = new Set(apis.map((api) => String(api.pid)));
      const taken = readdirSync(o.dataDir).filter((name) => name.startsWith(`${basename(faultToken)}.`));
      for (const name of taken) if (!pids.has(name.split('.').pop()!)) rmSync(join(o.dataDir, name), { force: true });
      return taken.some((name) => pids.has(name.split('.').pop()!));
    };
    const keepFaultToken = setInterval(() => {
      if (gated && !existsSync(faultToken) && !victimStillHere() && answering() >= 2) writeFileSync(faultToken, '');
    }, 200);
    onCleanup(async () => clearInterval(keepFaultToken));
    const restartApis = async (signal: NodeJS.Signals, graceMs: number) => {
      // A rolling restart: one process at a time, so the others answer meanwhile. Before each,
      // the run takes the token away (the rename is atomic, as the victims' is, and waits for the
      // last victim to be back); the token returns only if two others still answer.
      for (const api of apis) {
        while (gated && !tryRename(faultToken, `${faultToken}.run`)) await sleep(200);
        rmSync(`${faultToken}.run`, { force: true });
        restarting.add(api);
        try {
          await api.restart(signal, graceMs);
        } finally {
          restarting.delete(api);
        }
      }
    };

    // A workspace with plenty of credits, and its sender accounts as an operator sets them up.
    const ws = await createWorkspaceWithAdmin(sql, { name: `Chaos ${o.seed}`, plan: 'paid' });
    await grantWorkspaceCredits(sql, { workspaceId: ws.workspace_id, amount: 1_000_000, causeKey: 'chaos-pnet-grant' });
    const operator = operatorApi(() => apiUrl, ws.api_key);
    const accounts = await mapLimit(
      Array.from({ length: o.accounts }, (_, i) => i),
      5,
      async (i) => {
        const profile = await operator<{ id: string }>('POST', '/sender-profiles/', { name: `Chaos sender ${i + 1}` });
        if (profile.status !== 201)
          throw new Error(`creating a sender profile answered ${profile.status}: ${JSON.stringify(profile.body)}`);
        const settings = await operator('PATCH', `/sender-profiles/${profile.body.id}/pnet/settings/`, {
          run_mode: 'automatic',
          working_hours: allWeek,
          min_action_interval_seconds: 30,
          resume_enabled: true,
        });
        if (settings.status !== 200)
          throw new Error(`updating settings answered ${settings.status}: ${JSON.stringify(settings.body)}`);
        const wrapper = await operator<{ connection_token: string }>(
          'GET',
          `/sender-profiles/${profile.body.id}/pnet/`,
        );
        const [account] = await sql<
          { id: string }[]
        >`select id from pnet_accounts where sender_profile_id = ${profile.body.id}`;
        return { index: i, profileId: profile.body.id, accountId: account!.id, token: wrapper.body.connection_token };
      },
    );

    // The browsers: every account's share one token and one identity; the lease picks the claimer.
    const log = new SimLog();
    const browsers = accounts.flatMap((account) => {
      const client = new AgentClient({ apiUrl, token: account.token, timeoutMs: 180_000 });
      return Array.from(
        { length: o.browsers },
        (_, b) =>
          new SimBrowser({
            client,
            identity: { member_urn: `urn:li:member:chaos-${o.seed}-${account.index}` },
            label: `Account ${account.index + 1} browser ${b + 1}`,
            log,
            random: seededRandom(o.seed + 1 + account.index * 16 + b),
            maxPollSeconds: 2,
            renewEveryMs: 2000,
            runMs: o.runMs,
            failRate: o.failRate,
            skipRate: o.skipRate,
            duplicateRate: o.duplicateRate,
            maxCopies: 5,
            staleRate: o.staleRate,
            lateRate: o.lateRate,
            silenceRate: o.silenceRate,
            releaseRate: o.releaseRate,
          }),
      );
    });
    onCleanup(async () => void (await Promise.all(browsers.map((b) => b.halt()))));
    say(`${accounts.length} accounts set up, ${browsers.length} browsers`);

    // The steps, spread evenly and queued round-robin so every account has work at once.
    type Planned = { accountId: string; params: Record<string, unknown>; test: boolean; contact: string };
    const plan: Planned[][] = accounts.map(() => []);
    const meteredOf = accounts.map(() => [...meteredKinds].sort(() => random() - 0.5).slice(0, o.metered));
    for (let n = 0; n < o.steps; n += 1) {
      const a = n % accounts.length;
      // Each account's first few are metered (distinct kinds, inside the warm-up ceilings); unmetered go first anyway.
      const meteredKind = meteredOf[a]![plan[a]!.length];
      const kind = meteredKind ?? allKinds[Math.floor(random() * allKinds.length)]!;
      plan[a]!.push({
        accountId: accounts[a]!.accountId,
        params: paramsFor(kind, n),
        test: !meteredKind,
        contact: `chaos-contact-${n}`,
      });
    }
    const queueOrder = plan
      .flatMap((steps, a) => steps.map((step, i) => ({ step, order: i * accounts.length + a })))
      .sort((x, y) => x.order - y.order);
    const queueAnswers = await mapLimit(queueOrder, 8, async ({ step }) =>
      operator<{ id: string; status: string }>('POST', '/pnet/steps/', {
        account_id: step.accountId,
        params: step.params,
        contact_key: step.contact,
        test: step.test,
      }),
    );
    const refused = queueAnswers.filter((a) => a.status !== 201);
    const mine = queueAnswers.filter((a) => a.status === 201).map((a) => a.body.id);
    const meteredQueued = queueOrder.filter(({ step }, i) => !step.test && queueAnswers[i]!.status === 201).length;
    say(
      `${mine.length} steps queued (${meteredQueued} metered)${refused.length ? `; ${refused.length} refused: ${[...new Set(refused.map((r) => r.status))].join(', ')}` : ''}`,
    );
    // The browsers start once every step is queued: their claims arm the API's kill between a
    // claim's commit and its signal, and a queueing POST lost with the API is not repeated (it may
    // have committed), so a kill during the queueing ended the run before it began.
    browsers.forEach((b) => b.start());
    say(`${browsers.length} browsers checking in`);

    // The faults, while the browsers work.
    const observer = new ClaimObserver(sql, ws.workspace_id).start();
    onCleanup(() => observer.stop());
    const faults = {
      kills: 0,
      apiRestarts: 0,
      temporalRestarts: 0,
      temporalDownMs: 0,
      workerRestartMs: [] as number[],
    };
    const stopFaults = new AbortController();
    const pause = (ms: number) =>
      sleep(ms, undefined, { signal: stopFaults.signal }).then(
        () => true,
        () => false,
      );
    const mineDone = async () =>
      (
        await sql<{ n: number }[]>`
      select count(*)::int as n from browser_steps where id = any(${mine}::uuid[]) and status in ${sql([...terminalStatuses])}`
      )[0]!.n;
    let settledSoFar = 0;
    /**
     * Messages of this run that correctly wait past the deadline: their account's inbox read failed
     * and its retry is due after the run ends (decision 017: no message while a reply may be unseen).
     * They are reported, not counted as stranded, and the run does not wait them out.
     */
    const heldForInboxRead = async (deadlineAt: number) =>
      (
        await sql<{ id: string }[]>`
      select s.id from browser_steps s join pnet_accounts a on a.id = s.account_id
      where s.id = any(${mine}::uuid[]) and s.status not in ${sql([...terminalStatuses])}
        and s.kind in ${sql([...messageKinds])} and a.replies_failing
        and a.inbox_next_check_at > ${new Date(deadlineAt)}`
      ).map((r) => r.id);

    const killer = (async () => {
      while (o.killEvery > 0 && faults.kills < o.maxKills && (await pause(o.killEvery * 1000 * (0.5 + random())))) {
        const at = Date.now();
        await worker.restart('SIGKILL');
        faults.kills += 1;
        faults.workerRestartMs.push(Date.now() - at);
      }
    })().catch((error: unknown) => say(`the worker could not be restarted: ${(error as Error).message}`));
    const milestones = (async () => {
      while (!stopFaults.signal.aborted) {
        const progress = settledSoFar / Math.max(1, mine.length);
        if (o.apiRestart && faults.apiRestarts === 0 && progress >= 0.25) {
          // A deploy's drain: in-flight requests get 15 s to finish (they may wait on a killed
          // worker), then the process is killed and their answers are lost.
          say('restarting the API (SIGTERM: it drains for up to 15 s, then a new one starts)');
          await restartApis('SIGTERM', 15_000);
          faults.apiRestarts += 1;
          say('API back');
        }
        if (o.temporalRestart && faults.temporalRestarts === 0 && progress >= 0.5) {
          say('stopping the Temporal server (its SQLite file kept)');
          const before = temporalAddress;
          const at = Date.now();
          await temporal!.stop();
          temporal = null;
          temporal = await startTemporalDevServer({
            dataDir: o.dataDir,
            preferredPort: Number(before.split(':').pop()),
            ui: false,
          });
          temporalAddress = temporal.address;
          faults.temporalDownMs = Date.now() - at;
          faults.temporalRestarts += 1;
          say(`Temporal back at ${temporalAddress} after ${(faults.temporalDownMs / 1000).toFixed(1)} s`);
          if (temporalAddress !== before)
            await Promise.all([restartApis('SIGTERM', 15_000), worker.restart('SIGKILL')]);
        }
        const planned =
          (!o.apiRestart || faults.apiRestarts > 0) && (!o.temporalRestart || faults.temporalRestarts > 0);
        if (planned || !(await pause(500))) return;
      }
    })().catch((error: unknown) => say(`a restart failed: ${(error as Error).message}`));

    /** When a claim must have lapsed by: its lease from its last renewal, plus 15 s. */
    const lapseBy = (stepId: string, claimedAt: number) => {
      const known = log.claims.find((c) => c.stepId === stepId && c.claimedAt === claimedAt);
      return Math.max(claimedAt, known?.lastRenewalSentAt ?? 0) + (claimLeaseSeconds + 15) * 1000;
    };

    // Wait for every step queued here to settle (and the planned faults to have happened).
    const deadline = started + o.seconds * 1000;
    let lastPrint = 0;
    let heldIds: string[] = [];
    for (;;) {
      settledSoFar = await mineDone().catch(() => settledSoFar);
      heldIds = await heldForInboxRead(deadline).catch(() => heldIds);
      const planned = (!o.apiRestart || faults.apiRestarts > 0) && (!o.temporalRestart || faults.temporalRestarts > 0);
      if (
        (settledSoFar + heldIds.length === mine.length &&
          planned &&
          (o.killEvery === 0 || faults.kills >= Math.min(2, o.maxKills))) ||
        Date.now() > deadline
      )
        break;
      if (Date.now() - lastPrint > 5000) {
        lastPrint = Date.now();
        const c = sumCounters(browsers.map((b) => b.counters));
        // A claim still held well past its lease with no browser renewing it will not end by itself.
        const overdue = [...observer.claims.values()].filter(
          (seen) => seen.lastSeen >= Date.now() - 2000 && Date.now() - lapseBy(seen.stepId, seen.claimedAt) > 0,
        ).length;
        say(
          `settled ${settledSoFar}/${mine.length}, claimed now ${observer.counts.get('claimed') ?? 0}${overdue ? ` (${overdue} past their lease)` : ''}; claims ${c.claims}, ` +
            `worker kills ${faults.kills}, API restarts ${faults.apiRestarts}, Temporal restarts ${faults.temporalRestarts}`,
        );
      }
      await sleep(500);
    }
    const timedOut = settledSoFar + heldIds.length < mine.length;
    if (timedOut) say(`gave up waiting after ${o.seconds} s with ${mine.length - settledSoFar} steps not settled`);
    if (heldIds.length > 0) {
      say(
        `${heldIds.length} message step(s) wait for their account's next inbox read, due after the run's ${o.seconds} s (decision 017)`,
      );
    }
    stopFaults.abort();
    await Promise.all([killer, milestones]);
    say(`faults stopped; stopping the browsers (each finishes its step first)`);
    await Promise.race([Promise.all(browsers.map((b) => b.stop())), sleep(30_000)]);
    await Promise.all(browsers.map((b) => b.halt()));
    const browsersStoppedAt = Date.now();

    // A claim whose answer was lost to a restart lapses on its own within its lease: give each
    // claimed step until then (from its last renewal), no longer.
    for (;;) {
      await observer.sample().catch(() => undefined);
      const claimedNow = [...observer.claims.values()].filter((c) => c.lastSeen >= Date.now() - 2000);
      const waitUntil = Math.max(0, ...claimedNow.map((c) => lapseBy(c.stepId, c.claimedAt)));
      if (!claimedNow.length || Date.now() > waitUntil) break;
      if (Date.now() - lastPrint > 10_000) {
        lastPrint = Date.now();
        say(
          `${claimedNow.length} step(s) still claimed with no browser running them; waiting up to ${Math.round((waitUntil - Date.now()) / 1000)} s for the lease to lapse`,
        );
      }
      await sleep(1000);
    }
    await observer.stop();
    await observer.sample();

    const rows = await sql<StepRowLite[]>`
      select id, account_id, kind, metered, status, held, claimed_at, finished_at, error_code
      from browser_steps where workspace_id = ${ws.workspace_id}`;
    const observed = [...observer.claims.values()];
    const checks: CheckResult[] = [
      checkLine(rows, log),
      checkSettles(log, rows),
      await checkLedger(sql, rows),
      checkNoOverlap(log, observed, observer.doubleClaims),
      checkExpiredClaims(log, observed, rows, {
        leaseSeconds: claimLeaseSeconds,
        slackSeconds: 15,
        endedAt: browsersStoppedAt,
        apiDown: allDown(apis.map((api) => api.downs)),
      }),
    ];
    if (timedOut) {
      const waiting = rows.filter(
        (r) => mine.includes(r.id) && !terminalStatuses.has(r.status) && !heldIds.includes(r.id),
      );
      checks.push({
        name: `the steps settled within ${o.seconds} s`,
        ok: false,
        summary: `${waiting.length} steps queued here never settled`,
        violations: await stranded(sql, waiting),
        notes: [],
      });
    }
    const counters = sumCounters(browsers.map((b) => b.counters));
    const elapsed = (Date.now() - started) / 1000;
    const restartAvg = faults.workerRestartMs.length
      ? sum(faults.workerRestartMs) / faults.workerRestartMs.length / 1000
      : 0;
    const lines = [
      '',
      `chaos:pnet finished in ${elapsed.toFixed(0)} s (seed ${o.seed})`,
      `faults             worker SIGKILLed ${faults.kills} times (back in ${restartAvg.toFixed(1)} s on average), ` +
        `API restarted ${faults.apiRestarts}, Temporal restarted ${faults.temporalRestarts} (down ${(faults.temporalDownMs / 1000).toFixed(1)} s); ` +
        apiFaults(apis, o.killApiAfterClaim, balancer) +
        `exits nobody asked for: worker ${worker.unexpectedExits}`,
      `steps              ${mine.length} queued here (${meteredQueued} metered), ${rows.length - mine.length} scheduled by the accounts themselves; ` +
        `${settledSoFar} of the ${mine.length} settled` +
        (heldIds.length ? `, ${heldIds.length} waiting for their account's next inbox read` : ''),
      formatCounters(counters),
      `database poller    ${observer.samples} samples, ${observed.length} distinct claims seen`,
      timings(log),
    ];
    await reportAndExit(
      lines,
      checks,
      [worker, ...apis].map((p) => p.logFile),
      cleanup,
    );
  } catch (error) {
    await couldNotRun('chaos:pnet', error, say, cleanup);
  }
}

const sum = (ms: number[]) => ms.reduce((a, b) => a + b, 0);

/** The API processes' own deaths (the claim fault, decision 050), how long each was down, and when none answered. */
function apiFaults(apis: readonly ServiceProcess[], every: number, balancer: ApiBalancer | null): string {
  const downMs = apis.flatMap((api) => api.downMs);
  const none = allDown(apis.map((api) => api.downs)).map((d) => d.to - d.from);
  const kills = sum(apis.map((api) => api.unexpectedExits));
  return (
    `API SIGKILLed between a claim's commit and its signal ${kills} times (every ${every || 'no'} claim${every === 1 ? '' : 's'} of a process` +
    `${downMs.length ? `; a process back in ${(sum(downMs) / downMs.length / 1000).toFixed(1)} s on average` : ''}` +
    `${apis.length > 1 ? `; ${apis.length} processes, none answering ${(sum(none) / 1000).toFixed(0)} s in all` : downMs.length ? `, down ${(sum(downMs) / 1000).toFixed(0)} s in all` : ''}` +
    `${balancer ? `; balancer: ${balancer.counts.forwarded.join(' / ')} requests forwarded, ${balancer.counts.diedMidRequest} cut off mid-request, ${balancer.counts.refusedEverywhere} refused everywhere` : ''}); `
  );
}

const percentile = (values: number[], p: number) => {
  if (!values.length) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

/** How long a result took to be answered, and a claim to be settled, as the browsers saw it. */
function timings(log: SimLog): string {
  const results = log.reports.filter((r) => r.copy === 'first' && r.http === 200).map((r) => r.answeredAt - r.sentAt);
  const settles = log.claims
    .filter((c) => c.fate === 'settled' && c.settledAt !== null)
    .map((c) => c.settledAt! - c.claimedAt);
  const s = (ms: number) => (Number.isNaN(ms) ? 'n/a' : `${(ms / 1000).toFixed(2)} s`);
  return (
    `timings            result answered p50 ${s(percentile(results, 50))}, p99 ${s(percentile(results, 99))}, max ${s(Math.max(...results))}; ` +
    `claim to settle p50 ${s(percentile(settles, 50))}, p99 ${s(percentile(settles, 99))}`
  );
}

/** Why the steps left waiting at the deadline still wait: a step of their account held claimed, the gap, or a failing inbox read. */
async function stranded(sql: Sql, waiting: StepRowLite[]): Promise<string[]> {
  const byAccount = new Map<string, StepRowLite[]>();
  for (const row of waiting) byAccount.set(row.account_id, [...(byAccount.get(row.account_id) ?? []), row]);
  const out: string[] = [];
  for (const [accountId, rows] of byAccount) {
    const [running] = await sql<{ id: string; claimed_at: Date }[]>`
      select id, claimed_at from browser_steps where account_id = ${accountId} and status = 'claimed'`;
    const [account] = await sql<
      { next_metered_at: Date | null; replies_failing: boolean; inbox_next_check_at: Date | null }[]
    >`
      select next_metered_at, replies_failing, inbox_next_check_at from pnet_accounts where id = ${accountId}`;
    const why = running
      ? `behind step ${running.id.slice(0, 8)}, claimed since ${running.claimed_at.toISOString()} (${Math.round((Date.now() - running.claimed_at.getTime()) / 1000)} s)`
      : account?.next_metered_at && account.next_metered_at.getTime() > Date.now()
        ? `waiting for the gap until ${account.next_metered_at.toISOString()}`
        : account?.replies_failing
          ? `held back by the account's failing inbox read (next read due ${account.inbox_next_check_at?.toISOString() ?? 'unknown'})`
          : 'with nothing holding them';
    out.push(
      `account ${accountId.slice(0, 8)}: ${rows.length} step(s) still ${[...new Set(rows.map((r) => r.status))].join('/')} ${why}`,
    );
  }
  return out;
}

main().catch((error: unknown) => {
  if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    process.stderr.write(`${(error as Error).message}\n\n${usage}\n`);
    process.exit(2);
  }
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(2);
});

/** Renames `from` to `to`; false when `from` is not there (someone else took it). */
function tryRename(from: string, to: string): boolean {
  try {
    renameSync(from, to);
    return true;
  } catch {
    return false;
  }
}
