/**
 * The whole service in one process tree: Postgres (DATABASE_URL or embedded), Temporal
 * (TEMPORAL_ADDRESS or the dev server), migrations, the worker and the API. Stopping it drains
 * the API, lets the worker finish its tasks, then stops Temporal and Postgres.
 */
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Runtime } from '@temporalio/worker';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { buildApp } from '../api/app.js';
import { findLiveKey } from '../store/platform/api-keys.js';
import { keepBillingWorkflowsStarted } from '../services/billing/billing-client.js';
import { keepPayoutScheduleEnsured } from '../services/affiliates/payouts-client.js';
import { keepCommissionMaturationsWoken } from '../services/affiliates/maturation.js';
import { keepStepSignalSweeperStarted } from '../services/pnet/browser-step-client.js';
import { createTokenVerifier } from '../services/platform/tokens.js';
import { migrate } from '../db/migrate.js';
import { createSql, type Sql } from '../db/sql.js';
import { createIntegrations, readIntegrationsConfig } from '../integrations/config.js';
import { resolveTokenConfig } from './auth-config.js';
import type { ServiceConfig } from './config.js';
import { startEmbeddedPostgres } from './embedded-postgres.js';
import { createWorkspaceWithAdmin, grantWorkspaceCredits } from './provisioning.js';
import { startTemporalDevServer } from './temporal-dev-server.js';
import { startTemporalOnPostgres } from './temporal-postgres.js';
import { startEventDispatcher } from '../services/notifications/dispatcher.js';
import { createServiceWorker, runtimeTelemetry } from './worker.js';
import { databaseName, ensureDatabase, stackFilePath, type StackFile } from './stack-file.js';

/** The development key survives restarts in a local file (only its hash is in the database). */
async function ensureDevCredentials(sql: Sql, dataDir: string) {
  const file = join(dataDir, 'dev-credentials.json');
  if (existsSync(file)) {
    const saved = JSON.parse(readFileSync(file, 'utf8')) as { api_key: string; workspace_id: string };
    if (await findLiveKey(sql, saved.api_key)) return saved;
  }
  const created = await createWorkspaceWithAdmin(sql, { name: 'Development', plan: 'paid', email: 'dev@localhost' });
  await grantWorkspaceCredits(sql, { workspaceId: created.workspace_id, amount: 1000, causeKey: 'dev-stack-welcome' });
  writeFileSync(file, JSON.stringify({ workspace_id: created.workspace_id, api_key: created.api_key }, null, 2));
  chmodSync(file, 0o600);
  return created;
}

export interface RunningStack {
  apiUrl: string | null;
  docsUrl: string | null;
  temporalUiUrl: string | null;
  /** The embedded Temporal dev server's metrics (null for an external Temporal). */
  temporalMetricsUrl: string | null;
  temporalAddress: string;
  databaseUrl: string;
  devApiKey: string | null;
  stop: () => Promise<void>;
}

export async function startStack(config: ServiceConfig): Promise<RunningStack> {
  // The stack orders its own shutdown (API, worker, Temporal, Postgres) instead of the SDK's, and
  // runs Postgres and Temporal in process groups of their own so a terminal's Ctrl-C reaches them
  // only through it (worker/server-process.ts).
  // The SDK's own metrics (workflow task latencies, local activity times, poll results) when asked.
  Runtime.install({ shutdownSignals: [], ...runtimeTelemetry(config.workerMetricsAddress) });
  const log = pino({ level: config.logLevel });
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch((err) => log.error({ err }, 'stop failed'));
  };
  try {
    mkdirSync(config.dataDir, { recursive: true });
    let databaseUrl = config.databaseUrl;
    if (!databaseUrl) {
      log.info('starting embedded Postgres');
      const pg = await startEmbeddedPostgres({
        dataDir: join(config.dataDir, 'postgres'),
        avoidPorts: [config.port],
        ownGroup: true,
      });
      stops.push(pg.stop);
      await ensureDatabase(pg.url('postgres'), databaseName);
      databaseUrl = pg.url(databaseName);
    }
    let temporalAddress = config.temporalAddress;
    let temporalUiUrl: string | null = null;
    let temporalMetricsUrl: string | null = null;
    if (!temporalAddress) {
      log.info(
        `starting Temporal (${config.temporalPersistence === 'postgres' ? 'the server on Postgres' : 'the dev server on SQLite'})`,
      );
      const temporal =
        config.temporalPersistence === 'postgres'
          ? await startTemporalOnPostgres({
              databaseUrl,
              dataDir: config.dataDir,
              namespace: config.temporalNamespace,
              avoidPorts: [config.port],
              log: (line) => log.info(line),
              ownGroup: true,
            })
          : await startTemporalDevServer({ dataDir: config.dataDir, avoidPorts: [config.port], ownGroup: true });
      stops.push(temporal.stop);
      temporalAddress = temporal.address;
      temporalUiUrl = temporal.uiUrl;
      temporalMetricsUrl = temporal.metricsUrl;
    }
    const sql = createSql(databaseUrl);
    stops.push(() => sql.end({ timeout: 5 }));
    const applied = await migrate(sql);
    if (applied.length) log.info({ applied }, 'migrations applied');
    // The outside services (SMTP, the chat model, providers, agent tools), built once from the
    // environment and shared by the worker and the API of this process.
    const integrations = createIntegrations(readIntegrationsConfig());

    let workerConnection: NativeConnection | null = null;
    if (config.role !== 'api') {
      const { worker, connection, clientConnection } = await createServiceWorker({
        sql,
        address: temporalAddress,
        namespace: config.temporalNamespace,
        taskQueue: config.taskQueue,
        integrations,
        ...(config.workflowBundle ? { bundle: { codePath: config.workflowBundle } } : {}),
      });
      workerConnection = connection;
      const running = worker.run();
      stops.push(async () => {
        if (worker.getState() === 'RUNNING') worker.shutdown();
        await running;
        await connection.close();
        await clientConnection.close();
      });
      // Workspace events go to their delivery workflows from the worker role (services/notifications/dispatcher.ts).
      const dispatcher = startEventDispatcher({
        sql,
        client: new Client({ connection: clientConnection, namespace: config.temporalNamespace }),
        taskQueue: config.taskQueue,
      });
      stops.push(() => dispatcher.stop());
    }

    // The app is built in every role: the API role serves it, and in the worker role the assistant's
    // tool cards call its operations in-process (api/operation-door.ts) without it listening.
    // With the worker in this process, the API's client shares the worker's native connection, so
    // a step's workflow starts eagerly: its first task comes back with the start, to that worker.
    const connection = workerConnection ?? (await Connection.connect({ address: temporalAddress }));
    if (!workerConnection) stops.push(() => connection.close());
    const app = await buildApp({
      sql,
      temporal: {
        client: new Client({ connection, namespace: config.temporalNamespace }),
        taskQueue: config.taskQueue,
        eagerStart: workerConnection !== null,
      },
      verifyToken: createTokenVerifier(await resolveTokenConfig(sql)),
      rateLimit: { limit: config.rateLimitPerMinute, windowSeconds: 60 },
      logger: log,
      integrations,
    });
    stops.push(() => app.close());
    let apiUrl: string | null = null;
    if (config.role !== 'worker') {
      await app.listen({ port: config.port, host: config.host });
      apiUrl = `http://${config.host}:${config.port}`;
    } else {
      await app.ready();
    }

    // Only the embedded local stack mints a development workspace; a real database gets its
    // workspaces from the admin command line.
    const dev = config.databaseUrl ? null : await ensureDevCredentials(sql, config.dataDir);
    if (workerConnection) {
      // Every workspace's billing clock (grants, grace and period ends) runs as its own workflow.
      const stopBilling = keepBillingWorkflowsStarted({
        client: new Client({ connection, namespace: config.temporalNamespace }),
        taskQueue: config.taskQueue,
        sql,
        onError: (error) => log.warn({ err: error }, 'billing workflows not started; retrying in a minute'),
      });
      stops.push(stopBilling);
      // The affiliate payout cycle's monthly Temporal Schedule (decision 044), made once.
      stops.push(
        keepPayoutScheduleEnsured(
          { client: new Client({ connection, namespace: config.temporalNamespace }), taskQueue: config.taskQueue },
          integrations.affiliatePayouts.dayOfMonth,
          (error) => log.warn({ err: error }, 'affiliate payout schedule not made; retrying in a minute'),
        ),
      );
      // Commission maturation wakes lost between an event's commit and its signal (decision 047).
      stops.push(
        keepCommissionMaturationsWoken({
          client: new Client({ connection, namespace: config.temporalNamespace }),
          taskQueue: config.taskQueue,
          sql,
          onError: (error) => log.warn({ err: error }, 'commission maturations not woken; retrying in 10 s'),
        }),
      );
      // Signals of browsers' step transitions lost with an API process are sent again (decision 046).
      const stopSweeper = keepStepSignalSweeperStarted({
        client: new Client({ connection, namespace: config.temporalNamespace }),
        taskQueue: config.taskQueue,
        onError: (error) => log.warn({ err: error }, 'step-signal sweeper not started; retrying in a minute'),
      });
      stops.push(stopSweeper);
    }
    const stackFile: StackFile = {
      pid: process.pid,
      database_url: databaseUrl,
      temporal_address: temporalAddress,
      api_url: apiUrl,
    };
    writeFileSync(stackFilePath(config.dataDir), JSON.stringify(stackFile, null, 2));
    stops.push(async () => rmSync(stackFilePath(config.dataDir), { force: true }));

    return {
      apiUrl,
      docsUrl: apiUrl && `${apiUrl}/docs/`,
      temporalUiUrl,
      temporalMetricsUrl,
      temporalAddress,
      databaseUrl,
      devApiKey: dev?.api_key ?? null,
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
