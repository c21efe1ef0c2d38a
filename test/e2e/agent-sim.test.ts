/**
 * The browser simulator against the real API over HTTP (the test stack listening on a port):
 * steps settle exactly as the simulated browser reported them, duplicate copies of a result are
 * answered alike and stale ones refused, only the lease holder claims, and a `lost` check-in
 * stops a running step.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { AgentClient } from '../../sim/agent-client.js';
import { SimBrowser } from '../../sim/browser.js';
import {
  checkLedger,
  checkNoOverlap,
  checkSettles,
  terminalStatuses,
  type StepRowLite,
} from '../../sim/chaos-checks.js';
import { seededRandom } from '../../sim/cli.js';
import { SimLog } from '../../sim/sim-log.js';
import { allWeek, senderAccount } from '../support/pnet.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid } = useTestStack();
let apiUrl: string;
beforeAll(async () => {
  await stack.app.listen({ port: 0, host: '127.0.0.1' });
  apiUrl = `http://127.0.0.1:${(stack.app.server.address() as AddressInfo).port}`;
});

/** A sender account in automatic mode, open all week, and the token its browsers use. */
async function account() {
  const headers = withKey(paid.apiKey);
  const { accountId, token } = await senderAccount(stack, paid, {
    name: `Sim ${randomUUID()}`,
    settings: { run_mode: 'automatic', working_hours: allWeek },
  });
  const queue = async (params: object) => {
    const answer = await stack.app.inject({
      method: 'POST',
      url: '/pnet/steps/',
      headers,
      payload: { account_id: accountId, params, test: true },
    });
    expect(answer.statusCode).toBe(201);
    return answer.json().id as string;
  };
  return { accountId, token, identity: { member_urn: `urn:li:member:${randomUUID()}` }, queue };
}

const until = (what: string, done: () => boolean | Promise<boolean>, timeoutMs = 30_000) =>
  vi.waitFor(
    async () => {
      if (!(await done())) throw new Error(`timed out waiting until ${what}`);
    },
    { timeout: timeoutMs, interval: 50 },
  );

const rowsOf = (ids: string[]) =>
  stack.sql<StepRowLite[]>`
    select id, account_id, kind, metered, status, held, claimed_at, finished_at, error_code from browser_steps where id = any(${ids}::uuid[])`;

describe('the browser simulator', () => {
  it('settles every step as the browser reported it, once, through duplicate and stale copies', async () => {
    const a = await account();
    const log = new SimLog();
    const client = new AgentClient({ apiUrl, token: a.token });
    const common = {
      client,
      identity: a.identity,
      log,
      maxPollSeconds: 0.2,
      runMs: [20, 120] as [number, number],
      renewEveryMs: 50,
    };
    // Every result posted 2 to 5 times at once plus a copy naming an earlier claim; a third fail, a sixth skip.
    const misbehaving = { failRate: 0.35, skipRate: 0.2, duplicateRate: 1, staleRate: 1 };
    const holder = new SimBrowser({ ...common, ...misbehaving, label: 'Holder', random: seededRandom(11) }).start();
    await until('the first browser holds the lease', () => holder.counters.leaseGranted > 0);
    const second = new SimBrowser({ ...common, ...misbehaving, label: 'Second', random: seededRandom(12) }).start();

    const kinds = [
      'check_inbox',
      'profile_view',
      'send_message',
      'check_connections',
      'follow_contact',
      'like_latest_post',
      'connection_request',
      'read_conversation',
    ];
    const ids: string[] = [];
    for (const [i, kind] of kinds.entries()) {
      const url = `https://pnet.example/in/sim-${i}`;
      const params =
        kind === 'send_message'
          ? { kind, profile_url: url, body: 'Hi' }
          : kind === 'read_conversation'
            ? { kind, thread_url: url }
            : kind.startsWith('check_')
              ? { kind }
              : { kind, profile_url: url };
      ids.push(await a.queue(params));
    }
    await until('every step settled', async () => (await rowsOf(ids)).every((r) => terminalStatuses.has(r.status)));
    await Promise.all([holder.stop(), second.stop()]);

    const rows = await rowsOf(ids);
    const statuses = new Set<string>();
    for (const row of rows) {
      // The one claim of the step, and the result that settled it, are the row's.
      const claims = log.claims.filter((c) => c.stepId === row.id);
      expect(claims).toHaveLength(1);
      expect(claims[0]!.fate).toBe('settled');
      expect(claims[0]!.browser).toBe('Holder');
      expect(row.status).toBe(claims[0]!.result!.status);
      expect(row.error_code).toBe(claims[0]!.result!.error_code);
      expect(row.finished_at!.getTime()).toBe(claims[0]!.settledAt);
      statuses.add(row.status);
      const copies = log.reports.filter((r) => r.stepId === row.id);
      // The same result again is answered 200; a result naming an earlier claim is refused.
      expect(copies.filter((r) => r.copy !== 'stale').map((r) => r.http)).toEqual(
        copies.filter((r) => r.copy !== 'stale').map(() => 200),
      );
      expect(copies.filter((r) => r.copy === 'stale').map((r) => r.http)).toEqual([409]);
      expect(copies.filter((r) => r.copy !== 'stale').length).toBeGreaterThanOrEqual(2);
    }
    // The seeds above give each outcome at least once.
    expect([...statuses].sort()).toEqual(['failed', 'skipped', 'succeeded']);
    expect(
      holder.counters.settled.succeeded + holder.counters.settled.failed + holder.counters.settled.skipped,
    ).toBeGreaterThanOrEqual(ids.length);

    // Only the lease holder claims; the other reads lease_granted false.
    expect(second.counters.claims).toBe(0);
    expect(second.counters.leaseDenied).toBeGreaterThan(0);
    expect(second.lastState).toMatchObject({ lease_granted: false, lease_holder_label: 'Holder' });

    for (const check of [checkSettles(log, rows), checkNoOverlap(log, [], []), await checkLedger(stack.sql, rows)]) {
      expect(check.violations, check.name).toEqual([]);
    }
  });

  it('stops a running step whose check-in answers running_claim lost, and reports nothing for it', async () => {
    const a = await account();
    const log = new SimLog();
    const browser = new SimBrowser({
      client: new AgentClient({ apiUrl, token: a.token }),
      identity: a.identity,
      log,
      maxPollSeconds: 0.2,
      runMs: [5000, 5000],
      renewEveryMs: 100,
    }).start();
    const id = await a.queue({ kind: 'check_inbox' });
    await until('the step is claimed', () => log.claims.some((c) => c.stepId === id));
    // Another claim replaces this one under the browser's feet (as a lapse and a new hand-out would).
    await stack.sql`update browser_steps set claimed_at = claimed_at + interval '1 second' where id = ${id}`;
    await until('the browser gave the step up', () => log.claims[0]!.fate !== 'running', 10_000);
    await browser.stop();
    expect(log.claims[0]!.fate).toBe('lost');
    expect(browser.counters.lostClaims).toBe(1);
    // Nothing for the lost claim. The row's claim is this browser's session's, as a claim whose
    // answer was lost would be: a claim before the stop lands is answered it again, and may run.
    expect(log.reports.filter((r) => r.namedClaim === log.claims[0]!.claimedAtIso)).toEqual([]);
    for (const again of log.claims.slice(1)) expect(again.claimedAtIso).not.toBe(log.claims[0]!.claimedAtIso);
  });
});
