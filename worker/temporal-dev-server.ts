/**
 * `temporal server start-dev` for the local stack and the tests: SQLite under the data folder
 * (or in memory), the Web UI, and our search attributes registered at launch.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '@temporalio/client';
import { searchAttributes } from '../domain/shared/search-attributes.js';
import { freePort } from './ports.js';
import { captureOutput, spawnServer, stopProcess } from './server-process.js';
import { resolveTool, temporalCli } from './tools.js';

export interface TemporalDevServerHandle {
  address: string;
  uiUrl: string | null;
  /** The server's own metrics (Prometheus text): persistence latency per operation, among others. */
  metricsUrl: string;
  stop: () => Promise<void>;
}

function stopStaleServer(pidFile: string) {
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8'));
  try {
    if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGTERM');
  } catch {
    // already gone
  }
  rmSync(pidFile, { force: true });
}

/** Waits until the frontend answers, and hands back the connection that saw it (the caller closes it). */
export async function waitForFrontend(
  label: string,
  address: string,
  child: ChildProcess,
  output: () => string,
  seconds: number,
): Promise<Connection> {
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${label} exited (code ${child.exitCode}):\n${output()}`);
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1000 });
      await connection.workflowService.getSystemInfo({});
      return connection;
    } catch {
      await sleep(250);
    }
  }
  throw new Error(`${label} did not answer on ${address} within ${seconds} s:\n${output()}`);
}

export async function startTemporalDevServer(options: {
  /** Folder for its SQLite file and pid file; omitted keeps everything in memory. */
  dataDir?: string;
  preferredPort?: number;
  ui?: boolean;
  avoidPorts?: number[];
  /** Its own process group, for the stack that stops it itself (worker/server-process.ts). */
  ownGroup?: boolean;
}): Promise<TemporalDevServerHandle> {
  // Another process may take a probed port before the server binds it: retry on fresh ports.
  const avoid = [...(options.avoidPorts ?? [])];
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await startOnce(options, avoid);
    } catch (error) {
      if (attempt >= 3 || !(error instanceof PortRaceError)) throw error;
    }
  }
}

class PortRaceError extends Error {}

async function startOnce(
  options: { dataDir?: string; preferredPort?: number; ui?: boolean; ownGroup?: boolean },
  avoid: number[],
): Promise<TemporalDevServerHandle> {
  const cli = resolveTool(temporalCli);
  const port = await freePort(options.preferredPort ?? 7233, avoid);
  const uiPort = options.ui === false ? null : await freePort(port + 1000, [port, ...avoid]);
  // The server serves its metrics anyway (on a random port unless told): choose it, to report it.
  const metricsPort = await freePort(port + 2000, [port, ...(uiPort ? [uiPort] : []), ...avoid]);
  avoid.push(port, metricsPort, ...(uiPort ? [uiPort] : []));
  const args = [
    'server',
    'start-dev',
    '--ip',
    '127.0.0.1',
    '--port',
    String(port),
    '--metrics-port',
    String(metricsPort),
    '--log-level',
    'error',
  ];
  args.push(...(uiPort ? ['--ui-port', String(uiPort)] : ['--headless']));
  if (options.dataDir) {
    // WAL with synchronous=NORMAL: a commit is an append, not a journal file written and synced,
    // and still survives the process being killed (only an OS crash may lose the last commits).
    // It cut the server's CPU per workflow more than half (45 to 20 ms in a 1,000-workflow trial).
    args.push('--db-filename', join(options.dataDir, 'temporal.sqlite'));
    args.push('--sqlite-pragma', 'journal_mode=wal', '--sqlite-pragma', 'synchronous=normal');
    // Reads from a mapped file and a 64 MiB page cache instead of a read call per page and 2 MiB:
    // every persistence call waits on the one connection, so each call's time is everyone's
    // (the summed persistence time per second fell from 2.3 to 1.8 in bench:pnet's phase 1).
    args.push('--sqlite-pragma', 'mmap_size=268435456', '--sqlite-pragma', 'cache_size=-65536');
  }
  for (const [name, type] of Object.entries(searchAttributes)) args.push('--search-attribute', `${name}=${type}`);
  // Our search attributes exist from launch, so their cache never needs re-reading. The CLI's
  // default (for people who add attributes while testing) re-reads the cluster metadata from
  // SQLite on every search-attribute lookup: some 300 reads a second at 20 steps a second, a fifth
  // of the time of the one connection all of the server's persistence shares (bench:pnet).
  args.push('--dynamic-config-value', 'system.forceSearchAttributesCacheRefreshOnRead=false');
  const pidFile = options.dataDir ? join(options.dataDir, 'temporal.pid') : undefined;
  if (pidFile) stopStaleServer(pidFile);

  const server = spawnServer(cli, args, { ownGroup: options.ownGroup ?? false });
  const { child, exited } = server;
  const { output, seen: portTaken } = captureOutput(child, /address already in use/i);
  if (pidFile) writeFileSync(pidFile, String(child.pid));
  const address = `127.0.0.1:${port}`;
  try {
    await (await waitForFrontend('The Temporal dev server', address, child, output, 60)).close();
  } catch (error) {
    child.kill('SIGKILL');
    await exited;
    if (portTaken()) throw new PortRaceError((error as Error).message);
    throw error;
  }
  return {
    address,
    uiUrl: uiPort ? `http://127.0.0.1:${uiPort}` : null,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    stop: async () => {
      await stopProcess(server, 10_000);
      if (pidFile) rmSync(pidFile, { force: true });
    },
  };
}
