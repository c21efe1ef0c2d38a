/**
 * The Temporal server itself (not the CLI's dev server) on Postgres persistence, for the local
 * stack when TEMPORAL_PERSISTENCE=postgres. The dev server sends every persistence call through
 * one SQLite connection (bench:pnet measured it as the limit of the result p99); this is the
 * server a production deployment runs, with a pool of connections per store, on the stack's own
 * Postgres. No wheel carries it, so it is built once from the Go module proxy into `.tools/`
 * (about five minutes on two cores); its schema files come from the same module.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import Long from 'long';
import { createSql } from '../db/sql.js';
import { searchAttributes } from '../domain/shared/search-attributes.js';
import { childEnvironment } from '../integrations/config.js';
import { freePort } from './ports.js';
import { captureOutput, spawnServer, stopProcess } from './server-process.js';
import { waitForFrontend, type TemporalDevServerHandle } from './temporal-dev-server.js';
import { ToolMissingError, toolsDir } from './tools.js';

/** The server the Temporal CLI's dev server embeds (`temporal --version`), so both run the same code. */
export const temporalServerVersion = '1.32.0';

export interface TemporalServerBuild {
  server: string;
  sqlTool: string;
  /** `schema/postgresql/v12` of the server module: `temporal/` and `visibility/`, each with `versioned/`. */
  schemaDir: string;
}

function buildPaths(): TemporalServerBuild & { dir: string } {
  const dir = join(toolsDir, 'temporal-server', `v${temporalServerVersion}`);
  return {
    dir,
    server: join(dir, 'temporal-server'),
    sqlTool: join(dir, 'temporal-sql-tool'),
    schemaDir: join(dir, 'schema'),
  };
}

/** The built server, building it first when `.tools/` has none (needs Go and the module proxy). */
export function resolveTemporalServer(log: (line: string) => void = () => {}): TemporalServerBuild {
  const paths = buildPaths();
  if (existsSync(paths.server) && existsSync(paths.sqlTool) && existsSync(join(paths.schemaDir, 'temporal')))
    return paths;
  const go = (args: string[], cwd: string) =>
    execFileSync('go', args, {
      cwd,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: childEnvironment({ GOFLAGS: '-mod=mod' }),
    });
  const src = join(paths.dir, 'src');
  mkdirSync(src, { recursive: true });
  writeFileSync(join(src, 'go.mod'), 'module outreach/temporal-server\n\ngo 1.23\n');
  try {
    log(
      `building the Temporal server ${temporalServerVersion} from the Go module proxy into ${paths.dir} (once; about five minutes on two cores)`,
    );
    go(['get', `go.temporal.io/server@v${temporalServerVersion}`], src);
    go(['build', '-o', paths.server, 'go.temporal.io/server/cmd/server'], src);
    go(['build', '-o', paths.sqlTool, 'go.temporal.io/server/cmd/tools/sql'], src);
    const moduleDir = execFileSync('go', ['list', '-m', '-f', '{{.Dir}}', 'go.temporal.io/server'], {
      cwd: src,
      encoding: 'utf8',
    }).trim();
    cpSync(join(moduleDir, 'schema', 'postgresql', 'v12'), paths.schemaDir, { recursive: true });
    // The module cache is read-only, and the copy kept its modes: let `rm -r .tools` remove it.
    execFileSync('chmod', ['-R', 'u+w', paths.schemaDir]);
  } catch (error) {
    const reason =
      (error as { code?: string }).code === 'ENOENT'
        ? 'there is no `go` on PATH'
        : String((error as { stderr?: Buffer }).stderr ?? error)
            .trim()
            .split('\n')
            .slice(-3)
            .join(' ');
    throw new ToolMissingError(
      `Cannot build the Temporal server for TEMPORAL_PERSISTENCE=postgres: ${reason}. It needs Go (the server asks for 1.26.8; an older go fetches that toolchain itself) ` +
        `and the Go module proxy; or leave TEMPORAL_PERSISTENCE unset for the dev server (SQLite).`,
    );
  }
  return paths;
}

export interface PostgresTarget {
  host: string;
  port: number;
  user: string;
  password: string;
}

/** Host, port and credentials of a postgres:// URL (the stack's database) for the server's stores. */
export function postgresTarget(databaseUrl: string): PostgresTarget {
  const url = new URL(databaseUrl);
  return {
    host: url.hostname,
    port: Number(url.port || 5432),
    user: decodeURIComponent(url.username),
    password: decodeURIComponent(url.password),
  };
}

const stores = { default: 'temporal', visibility: 'temporal_visibility' } as const;

/** Creates or brings up to date both schemas; every step is idempotent, so it runs at each start. */
function setupSchemas(build: TemporalServerBuild, pg: PostgresTarget) {
  for (const [folder, database] of [
    ['temporal', stores.default],
    ['visibility', stores.visibility],
  ] as const) {
    const tool = (...args: string[]) =>
      execFileSync(
        build.sqlTool,
        [
          '--plugin',
          'postgres12',
          '--ep',
          pg.host,
          '--port',
          String(pg.port),
          '--user',
          pg.user,
          '--password',
          pg.password,
          '--db',
          database,
          ...args,
        ],
        {
          stdio: ['ignore', 'ignore', 'pipe'],
        },
      );
    tool('create-database');
    tool('setup-schema', '-v', '0.0');
    tool('update-schema', '-d', join(build.schemaDir, folder, 'versioned'));
  }
}

/**
 * Commits that wait for no WAL flush: the dev server's SQLite (WAL, synchronous=NORMAL) keeps
 * what a killed process wrote and may lose the last commits to an OS crash, and so does this.
 * With a flush per commit, every persistence write of the server waited on the disk.
 */
async function relaxCommits(databaseUrl: string) {
  const admin = createSql(databaseUrl, { max: 1 });
  try {
    for (const database of Object.values(stores))
      await admin`alter database ${admin(database)} set synchronous_commit = off`;
  } finally {
    await admin.end();
  }
}

interface Ports {
  frontend: number;
  frontendHttp: number;
  frontendMembership: number;
  history: number;
  historyMembership: number;
  matching: number;
  matchingMembership: number;
  worker: number;
  workerMembership: number;
  metrics: number;
}

export async function pickPorts(preferred: number, avoid: number[]): Promise<Ports> {
  const taken = [...avoid];
  const next = async (from: number) => {
    const port = await freePort(from, taken);
    taken.push(port);
    return port;
  };
  // The frontend where the dev server would be; the rest off to the side, in the server's own order.
  const frontend = await next(preferred);
  return {
    frontend,
    metrics: await next(frontend + 2000),
    frontendHttp: await next(frontend + 10),
    history: await next(frontend + 11),
    matching: await next(frontend + 12),
    worker: await next(frontend + 13),
    frontendMembership: await next(frontend + 20),
    historyMembership: await next(frontend + 21),
    matchingMembership: await next(frontend + 22),
    workerMembership: await next(frontend + 23),
  };
}

export function serverConfig(pg: PostgresTarget, ports: Ports, dynamicConfigFile: string): string {
  const store = (database: string, maxConns: number) => ({
    sql: {
      pluginName: 'postgres12',
      databaseName: database,
      connectAddr: `${pg.host}:${pg.port}`,
      connectProtocol: 'tcp',
      user: pg.user,
      password: pg.password,
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const service = (grpcPort: number, membershipPort: number, httpPort?: number) => ({
    rpc: { grpcPort, membershipPort, bindOnIP: '127.0.0.1', ...(httpPort ? { httpPort } : {}) },
  });
  // JSON is YAML: the server reads this file with its YAML loader.
  return JSON.stringify(
    {
      log: { stdout: true, level: 'error' },
      persistence: {
        defaultStore: 'default',
        visibilityStore: 'visibility',
        // As the dev server: one shard, so a comparison of the two differs only in persistence.
        numHistoryShards: 1,
        datastores: { default: store(stores.default, 20), visibility: store(stores.visibility, 10) },
      },
      global: {
        membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' },
        metrics: { prometheus: { listenAddress: `127.0.0.1:${ports.metrics}`, handlerPath: '/metrics' } },
      },
      services: {
        frontend: service(ports.frontend, ports.frontendMembership, ports.frontendHttp),
        history: service(ports.history, ports.historyMembership),
        matching: service(ports.matching, ports.matchingMembership),
        worker: service(ports.worker, ports.workerMembership),
      },
      clusterMetadata: {
        enableGlobalNamespace: false,
        failoverVersionIncrement: 10,
        masterClusterName: 'active',
        currentClusterName: 'active',
        clusterInformation: {
          active: {
            enabled: true,
            initialFailoverVersion: 1,
            rpcName: 'frontend',
            rpcAddress: `127.0.0.1:${ports.frontend}`,
          },
        },
      },
      dcRedirectionPolicy: { policy: 'noop' },
      archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } },
      namespaceDefaults: { archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } } },
      publicClient: { hostPort: `127.0.0.1:${ports.frontend}` },
      dynamicConfigClient: { filepath: dynamicConfigFile, pollInterval: '10s' },
    },
    null,
    2,
  );
}

/** The dev server's own overrides of the server's defaults, so the two compare on persistence alone. */
const dynamicConfig = [
  'history.hostLevelCacheMaxSize:',
  '  - value: 8096',
  'frontend.namespaceRPS.visibility:',
  '  - value: 100',
  '',
].join('\n');

/**
 * The namespace and our search attributes, added where missing. The server caches its search
 * attributes for up to a minute, so a start that added any is followed by a restart (`true`).
 */
async function registerNamespace(connection: Connection, namespace: string): Promise<boolean> {
  const exists = await connection.workflowService.describeNamespace({ namespace }).then(
    () => true,
    () => false,
  );
  if (!exists) {
    await connection.workflowService.registerNamespace({
      namespace,
      // A protobuf Duration (int64 seconds, as Temporal's generated types take them): one day.
      workflowExecutionRetentionPeriod: { seconds: Long.fromNumber(86_400) },
    });
  }
  // The namespace registry is refreshed every few seconds: until then the operator service does not know it.
  for (let attempt = 0; ; attempt += 1) {
    try {
      const listed = await connection.operatorService.listSearchAttributes({ namespace });
      const missing = Object.entries(searchAttributes).filter(([name]) => !(name in (listed.customAttributes ?? {})));
      if (missing.length === 0) return !exists;
      // IndexedValueType in Temporal's API: KEYWORD is 2, INT is 3.
      const types = { Keyword: 2, Int: 3 } as const;
      await connection.operatorService.addSearchAttributes({
        namespace,
        searchAttributes: Object.fromEntries(missing.map(([name, type]) => [name, types[type]])),
      });
      return true;
    } catch (error) {
      if (attempt >= 60) throw error;
      await sleep(500);
    }
  }
}

export async function startTemporalOnPostgres(options: {
  databaseUrl: string;
  dataDir: string;
  namespace: string;
  preferredPort?: number;
  avoidPorts?: number[];
  log?: (line: string) => void;
  /** Its own process group, for the stack that stops it itself (worker/server-process.ts). */
  ownGroup?: boolean;
}): Promise<TemporalDevServerHandle> {
  const build = resolveTemporalServer(options.log);
  const pg = postgresTarget(options.databaseUrl);
  setupSchemas(build, pg);
  await relaxCommits(options.databaseUrl);
  const ports = await pickPorts(options.preferredPort ?? 7233, options.avoidPorts ?? []);
  const configDir = join(options.dataDir, 'temporal-server');
  mkdirSync(configDir, { recursive: true });
  const dynamicConfigFile = join(configDir, 'dynamicconfig.yaml');
  writeFileSync(dynamicConfigFile, dynamicConfig);
  writeFileSync(join(configDir, 'config.yaml'), serverConfig(pg, ports, dynamicConfigFile));
  const pidFile = join(options.dataDir, 'temporal.pid');
  const address = `127.0.0.1:${ports.frontend}`;

  const launch = async () => {
    const server = spawnServer(
      build.server,
      ['--config-file', join(configDir, 'config.yaml'), '--allow-no-auth', 'start'],
      {
        ownGroup: options.ownGroup ?? false,
      },
    );
    const { child } = server;
    const { output } = captureOutput(child);
    writeFileSync(pidFile, String(child.pid));
    const stop = async () => {
      await stopProcess(server, 15_000);
      rmSync(pidFile, { force: true });
    };
    try {
      return { connection: await waitForFrontend('The Temporal server', address, child, output, 120), stop };
    } catch (error) {
      await stop();
      throw error;
    }
  };

  let running = await launch();
  const added = await registerNamespace(running.connection, options.namespace).catch(async (error: unknown) => {
    await running.connection.close();
    await running.stop();
    throw error;
  });
  await running.connection.close();
  if (added) {
    await running.stop();
    running = await launch();
    await running.connection.close();
  }
  return { address, uiUrl: null, metricsUrl: `http://127.0.0.1:${ports.metrics}/metrics`, stop: running.stop };
}
