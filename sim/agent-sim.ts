/**
 * `npm run agent:sim -- --token T [--browsers N] [--fail-rate R] [--api URL] [--duration S]`:
 * N simulated browsers of one sender account (they share its connection token; the lease holder
 * claims, the others read `lease_granted: false`). Without --api it finds the running local
 * stack in $DATA_DIR/stack.json. Prints a summary at the end and on Ctrl-C.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { readConfig } from '../worker/config.js';
import type { StackFile } from '../worker/stack-file.js';
import { AgentClient } from './agent-client.js';
import { SimBrowser, formatCounters, sumCounters } from './browser.js';
import { UsageError, numberFlag, rangeFlag, seededRandom } from './cli.js';
import { SimLog, type ClaimFate } from './sim-log.js';

const usage = `Usage: npm run agent:sim -- --token TOKEN [options]

  --token T           the account's connection token (GET /sender-profiles/{id}/pnet/)
  --browsers N        browsers sharing the token (default 1); only the lease holder claims
  --fail-rate R       share of steps reported failed (default 0.1)
  --skip-rate R       share of steps reported skipped (default 0.05)
  --api URL           the API (default: api_url of $DATA_DIR/stack.json, the running npm start)
  --duration S        stop after S seconds (default: run until Ctrl-C)
  --max-poll S        cap on the server's poll_after_seconds (default 15)
  --run-ms MIN-MAX    how long running a step takes (default 500-4000)
  --duplicate-rate R  share of results posted 2 to 5 times at once (default 0)
  --stale-rate R      share of results also posted naming an earlier claim (default 0)
  --late-rate R       share of results posted after going silent past the claim lease (default 0)
  --silence-rate R    share of steps abandoned by going silent mid-step (default 0)
  --identity URN      member URN the browsers are signed in as (default: derived from the token)
  --seed N            repeatable randomness`;

/** The API of the stack `npm start` runs with this DATA_DIR. */
export function localStackApiUrl(dataDir = readConfig().dataDir): string {
  const file = join(dataDir, 'stack.json');
  if (!existsSync(file))
    throw new UsageError(
      `No --api given and no running stack found (${file} is missing). Start one with "npm start", or pass --api URL.`,
    );
  const stack = JSON.parse(readFileSync(file, 'utf8')) as StackFile;
  if (!stack.api_url) throw new UsageError(`The stack in ${file} runs no API (SERVICE_ROLE=worker?). Pass --api URL.`);
  return stack.api_url;
}

async function main() {
  const { values } = parseArgs({
    options: {
      token: { type: 'string' },
      browsers: { type: 'string' },
      'fail-rate': { type: 'string' },
      'skip-rate': { type: 'string' },
      api: { type: 'string' },
      duration: { type: 'string' },
      'max-poll': { type: 'string' },
      'run-ms': { type: 'string' },
      'duplicate-rate': { type: 'string' },
      'stale-rate': { type: 'string' },
      'late-rate': { type: 'string' },
      'silence-rate': { type: 'string' },
      identity: { type: 'string' },
      seed: { type: 'string' },
      help: { type: 'boolean' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    return;
  }
  if (!values.token) throw new UsageError('--token is required.');
  const rate = (name: string, fallback: number) => numberFlag(values, name, fallback, { min: 0, max: 1 });
  const count = numberFlag(values, 'browsers', 1, { min: 1, max: 1000 });
  const duration = numberFlag(values, 'duration', 0, { min: 0 });
  const apiUrl = values.api ?? localStackApiUrl();
  const random = values.seed === undefined ? Math.random : seededRandom(numberFlag(values, 'seed', 0));
  const identity = {
    member_urn:
      values.identity ?? `urn:li:member:sim-${createHash('sha256').update(values.token).digest('hex').slice(0, 16)}`,
  };
  const client = new AgentClient({ apiUrl, token: values.token });
  const log = new SimLog();
  const browsers = Array.from({ length: Math.floor(count) }, (_, i) =>
    new SimBrowser({
      client,
      identity,
      label: `Sim browser ${i + 1}`,
      log,
      random,
      maxPollSeconds: numberFlag(values, 'max-poll', 15, { min: 0.2 }),
      runMs: rangeFlag(values, 'run-ms', [500, 4000]),
      failRate: rate('fail-rate', 0.1),
      skipRate: rate('skip-rate', 0.05),
      duplicateRate: rate('duplicate-rate', 0),
      staleRate: rate('stale-rate', 0),
      lateRate: rate('late-rate', 0),
      silenceRate: rate('silence-rate', 0),
    }).start(),
  );
  const started = Date.now();
  process.stdout.write(
    `${browsers.length} simulated browser(s) checking in at ${apiUrl} as ${identity.member_urn}. Ctrl-C prints the summary.\n`,
  );

  const progress = setInterval(() => {
    const c = sumCounters(browsers.map((b) => b.counters));
    const holder = browsers.find((b) => b.lastState?.lease_granted);
    process.stdout.write(
      `[${Math.round((Date.now() - started) / 1000)}s] claims ${c.claims}, settled ${c.settled.succeeded + c.settled.failed + c.settled.skipped}, ` +
        `queued ${holder?.lastState?.queued_count ?? '?'}, lease ${holder ? holder.label : 'not held'}\n`,
    );
  }, 10_000);

  let finished = false;
  const finish = async (how: 'halt' | 'stop') => {
    if (finished) return;
    finished = true;
    clearInterval(progress);
    await Promise.all(browsers.map((b) => (how === 'halt' ? b.halt() : b.stop())));
    process.stdout.write(`\n${summary(browsers, log, Date.now() - started)}\n`);
  };
  process.once('SIGINT', () => void finish('halt').then(() => process.exit(0)));
  process.once('SIGTERM', () => void finish('halt').then(() => process.exit(0)));

  const allStopped = Promise.all(browsers.map((b) => b.whenDone()));
  if (duration > 0) await Promise.race([sleep(duration * 1000), allStopped]);
  else await allStopped; // only an account mismatch ends every browser by itself
  await finish('stop');
}

function summary(browsers: SimBrowser[], log: SimLog, elapsedMs: number): string {
  const fates = new Map<ClaimFate, number>();
  for (const claim of log.claims) fates.set(claim.fate, (fates.get(claim.fate) ?? 0) + 1);
  const perBrowser = browsers.map(
    (b) =>
      `  ${b.label}: ${b.counters.claims} claims, lease granted on ${b.counters.leaseGranted} of ${b.counters.leaseGranted + b.counters.leaseDenied} check-ins`,
  );
  return [
    `Summary after ${(elapsedMs / 1000).toFixed(1)} s`,
    formatCounters(sumCounters(browsers.map((b) => b.counters))),
    `claims by fate     ${[...fates].map(([fate, n]) => `${fate} ${n}`).join(', ') || 'none'}`,
    ...perBrowser,
  ].join('\n');
}

main().catch((error: unknown) => {
  if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    process.stderr.write(`${(error as Error).message}\n\n${usage}\n`);
    process.exit(2);
  }
  process.stderr.write(
    `agent:sim failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
