/**
 * What every chaos run needs around its own scenario: a clean data folder (stopping servers an
 * earlier, killed run left holding it), a log line with the run's elapsed time, cleanups that stop
 * what the run started in reverse order whatever way it ends, bounded parallel work, and the
 * PASS/FAIL lines of its invariant checks.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CheckResult } from './chaos-checks.js';

export type Say = (line: string) => void;

/** Log lines prefixed with the seconds since the run began. */
export function elapsedSay(started: number): Say {
  return (line) => process.stdout.write(`[${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s] ${line}\n`);
}

/** A process left running by an earlier run that was killed still holds the data folder. */
async function stopLeftovers(dataDir: string) {
  const pids = [
    existsSync(join(dataDir, 'postgres', 'postmaster.pid'))
      ? Number(readFileSync(join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0])
      : 0,
    existsSync(join(dataDir, 'temporal.pid')) ? Number(readFileSync(join(dataDir, 'temporal.pid'), 'utf8')) : 0,
  ];
  for (const pid of pids.filter((p) => Number.isInteger(p) && p > 0)) {
    try {
      process.kill(pid, 'SIGINT');
      for (let i = 0; i < 100; i += 1) {
        process.kill(pid, 0);
        await sleep(100);
      }
    } catch {
      // gone
    }
  }
}

/** Empties the run's data folder, stopping what an earlier run left in it. */
export async function freshDataDir(dataDir: string) {
  await stopLeftovers(dataDir);
  rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });
  // As root, Postgres runs as its own user, which must reach its data folder.
  chmodSync(dataDir, 0o755);
}

/**
 * What the run started, stopped in reverse order; anything started after stopping began is
 * stopped at once. Ctrl-C, SIGTERM and an unhandled rejection stop everything too, so the
 * servers a run started never outlive it.
 */
export function runCleanups(say: Say) {
  const cleanups: Array<() => Promise<void>> = [];
  let stopping = false;
  const onCleanup = (fn: () => Promise<void>) => {
    if (stopping) void fn().catch(() => undefined);
    else cleanups.push(fn);
  };
  const cleanup = async () => {
    stopping = true;
    for (const fn of cleanups.splice(0).reverse()) {
      const at = Date.now();
      await fn().catch((error: unknown) => say(`cleanup: ${(error as Error).message}`));
      if (Date.now() - at > 5000) say(`a cleanup step took ${((Date.now() - at) / 1000).toFixed(1)} s`);
    }
  };
  const interrupt = (signal: NodeJS.Signals) => {
    say(`${signal}: stopping everything`);
    void cleanup().then(() => process.exit(130));
  };
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
  process.on('unhandledRejection', (error) => {
    say(`unexpected: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    void cleanup().then(() => process.exit(2));
  });
  return { onCleanup, cleanup };
}

/** `fn` over `items`, at most `limit` at a time, results in item order. */
export async function mapLimit<T, R>(
  items: T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}

/** One PASS/FAIL line per check, with its first violations and its notes. */
export function checkLines(checks: CheckResult[]): string[] {
  return checks.flatMap((c) => [
    `${c.ok ? 'PASS' : 'FAIL'}  ${c.name}: ${c.summary}`,
    ...c.violations.slice(0, 20).map((v) => `        violation: ${v}`),
    ...(c.violations.length > 20 ? [`        ... and ${c.violations.length - 20} more`] : []),
    ...c.notes.map((n) => `        note: ${n}`),
  ]);
}

/**
 * Ends a chaos run: prints its summary, the checks and where the service logs are, cleans up and
 * exits 1 when a check failed (else 0).
 */
export async function reportAndExit(
  summary: string[],
  checks: CheckResult[],
  logs: readonly string[],
  cleanup: () => Promise<void>,
): Promise<never> {
  const lines = [...summary, '', ...checkLines(checks), '', `logs: ${logs.join(', ')}`];
  process.stdout.write(`${lines.join('\n')}\n`);
  const failed = checks.filter((c) => !c.ok).length;
  process.stdout.write(failed ? `\n${failed} check(s) failed.\n` : '\nAll checks passed.\n');
  await cleanup();
  process.exit(failed ? 1 : 0);
}

/** A chaos run that could not run at all (set-up failed): says why, cleans up and exits 2. */
export async function couldNotRun(
  name: string,
  error: unknown,
  say: Say,
  cleanup: () => Promise<void>,
): Promise<never> {
  say(`${name} could not run: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  await cleanup();
  process.exit(2);
}
