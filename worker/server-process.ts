/**
 * The server processes the stack and the tests run beside them (Postgres, Temporal): started,
 * read from and stopped the same way.
 *
 * `npm start` runs them in process groups of their own (`ownGroup`), so a terminal's Ctrl-C,
 * which signals the whole foreground group, reaches only the stack, and the stack stops them in
 * order after the API drained and the worker finished (docs/decisions/057-stack-stops-its-servers-in-order.md).
 * Should the stack's process exit without stopping them (an error on the way out), they are
 * signalled as it exits, so none outlives it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

export interface ServerProcess {
  child: ChildProcess;
  exited: Promise<void>;
}

const owned = new Map<ChildProcess, NodeJS.Signals>();
let exitHookInstalled = false;

function signalOwnedOnExit() {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const [child, signal] of owned) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    }
  });
}

export function spawnServer(
  command: string,
  args: string[],
  options: {
    /** A process group of its own: the terminal's Ctrl-C does not reach it. */
    ownGroup?: boolean;
    /** The signal that stops it in good order (Postgres: SIGINT, its fast shutdown). */
    stopSignal?: NodeJS.Signals;
    uid?: number;
    gid?: number;
    env?: NodeJS.ProcessEnv;
  } = {},
): ServerProcess {
  const child = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.ownGroup ?? false,
    ...(options.uid !== undefined ? { uid: options.uid } : {}),
    ...(options.gid !== undefined ? { gid: options.gid } : {}),
    ...(options.env ? { env: options.env } : {}),
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  if (options.ownGroup) {
    signalOwnedOnExit();
    owned.set(child, options.stopSignal ?? 'SIGTERM');
    void exited.then(() => owned.delete(child));
  }
  return { child, exited };
}

/**
 * A server process's output for its error messages. A Go panic puts its reason first and pages
 * of stack after it: keep both ends. `seen` says whether `watch` ever matched a chunk.
 */
export function captureOutput(child: ChildProcess, watch?: RegExp) {
  let head = '';
  let tail = '';
  let seen = false;
  const keep = (chunk: Buffer) => {
    const text = chunk.toString();
    if (watch?.test(text)) seen = true;
    if (head.length < 3000) head += text.slice(0, 3000 - head.length);
    tail = (tail + text).slice(-3000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return { output: () => (head.length < 3000 ? head : `${head}\n...\n${tail}`), seen: () => seen };
}

/** `signal` (SIGTERM unless told), then SIGKILL if it is still there after `graceMs`. */
export async function stopProcess(
  { child, exited }: ServerProcess,
  graceMs: number,
  signal: NodeJS.Signals = 'SIGTERM',
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill(signal);
  // The grace timer is cancelled once it exits, so it keeps no caller waiting.
  const grace = new AbortController();
  const done = await Promise.race([
    exited.then(() => true),
    sleep(graceMs, false, { signal: grace.signal }).catch(() => false),
  ]);
  grace.abort();
  if (!done) child.kill('SIGKILL');
  await exited;
}
