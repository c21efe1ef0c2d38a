/**
 * Claims and results (reportStepResult; the interface spec's Browser action step status) through
 * the real API, worker and Temporal.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { backendErrorCodes, browserReportedErrorCodes } from '../../domain/pnet/steps.js';
import { claimLeaseSeconds, overdueClaimGraceSeconds } from '../../domain/pnet/timing.js';
import { browserStepStateQuery } from '../../workflows/pnet/browser-step.contract.js';
import { connectedAccount as connected, holdContact, until } from '../support/pnet.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid } = useTestStack();

const url = 'https://pnet.example/in/grace-hopper';

const connectedAccount = (settings: object = {}) => connected(stack, paid, settings);
const readStep = async (id: string) =>
  (await stack.app.inject({ method: 'GET', url: `/pnet/steps/${id}/`, headers: withKey(paid.apiKey) })).json();

describe('claiming', () => {
  it('hands out unmetered test steps first, then queued steps oldest first, one at a time', async () => {
    const a = await connectedAccount();
    const first = await a.queue({ kind: 'profile_view', profile_url: url });
    await a.queue({ kind: 'follow_contact', profile_url: url });
    const test = await a.queue({ kind: 'check_inbox' }, { test: true });
    const claimed = await a.claim();
    expect(claimed.statusCode).toBe(200);
    expect(claimed.json().step).toMatchObject({ id: test.id, status: 'claimed', metered: false });
    // One running step per account: asking again hands back the same claim (its answer may have been lost).
    expect((await a.claim()).json()).toMatchObject({
      step: { id: test.id, claimed_at: claimed.json().step.claimed_at },
      verification: null,
    });
    await a.report(test.id, { status: 'succeeded' });
    const next = (await a.claim()).json();
    expect(next.step).toMatchObject({ id: first.id, status: 'claimed' });
    expect(next.step.claimed_at).not.toBeNull();
  });

  it('never hands out a held step, and refuses a browser that does not hold the lease', async () => {
    const a = await connectedAccount();
    const held = await a.queue({ kind: 'check_inbox' });
    await stack.sql`update browser_steps set held = true where id = ${held.id}`;
    expect((await a.claim()).json()).toEqual({ step: null, verification: null, reason: null, wait: null });
    await stack.sql`update browser_steps set held = false where id = ${held.id}`;
    const other = randomUUID();
    await a.agent('/pnet/agent/heartbeat/', {
      browser_id: other,
      browser_label: 'Firefox',
      extension_version: '2.0.0',
      lease_nonce: 'lease-nonce-2',
    });
    const refused = await a.agent('/pnet/agent/claim/', { browser_id: other });
    expect(refused.statusCode).toBe(409);
    expect(refused.json().detail).toMatch(/lease/);
  });

  it('passes over a kind at its daily ceiling, telling why, and keeps the gap between metered steps', async () => {
    const a = await connectedAccount({ min_action_interval_seconds: 600 });
    const capped = await a.queue({ kind: 'connection_request', profile_url: url });
    const other = await a.queue({ kind: 'profile_view', profile_url: url });
    // First warm-up week: 20 invitations a day ramp to 5.
    await stack.sql`insert into pnet_usage (account_id, local_date, limit_kind, used) values (${a.accountId}, (now() at time zone 'UTC')::date, 'connection_request', 5)`;
    const claimed = (await a.claim()).json();
    expect(claimed.step.id).toBe(other.id);
    await a.report(other.id, { status: 'succeeded' });
    const usage = await stack.sql<
      { used: number }[]
    >`select used from pnet_usage where account_id = ${a.accountId} and limit_kind = 'profile_view'`;
    expect(usage[0]!.used).toBe(1);
    const gap = (await a.claim()).json();
    expect(gap).toMatchObject({ step: null, reason: 'gap' });
    expect(Date.parse(gap.wait.next_at) - Date.now()).toBeGreaterThan(590_000);
    await stack.sql`update pnet_accounts set next_metered_at = null where id = ${a.accountId}`;
    const stillCapped = (await a.claim()).json();
    expect(stillCapped).toMatchObject({ step: null, reason: 'daily_cap' });
    expect(stillCapped.wait.resets_at).toBe(stillCapped.wait.next_at);
    expect(
      (
        await stack.app.inject({ method: 'GET', url: `/pnet/steps/${capped.id}/`, headers: withKey(paid.apiKey) })
      ).json().status,
    ).toBe('queued');
  });

  it('passes over a kind at its weekly ceiling until Monday, and hands it out one below both ceilings', async () => {
    const a = await connectedAccount();
    const step = await a.queue({ kind: 'connection_request', profile_url: url });
    // First warm-up week: 100 invitations a week ramp to 25 and 20 a day to 5. The week's earlier
    // invitations went out on another day of this (UTC) week.
    const now = new Date();
    const otherDay = new Date(now.getTime() + (now.getUTCDay() === 1 ? 1 : -1) * 86_400_000);
    const used = (day: Date, count: number) => stack.sql`
      insert into pnet_usage (account_id, local_date, limit_kind, used)
      values (${a.accountId}, ${day.toISOString().slice(0, 10)}, 'connection_request', ${count})
      on conflict (account_id, local_date, limit_kind) do update set used = excluded.used`;
    await used(otherDay, 25);
    const capped = (await a.claim()).json();
    expect(capped).toMatchObject({ step: null, reason: 'weekly_cap' });
    expect(capped.wait.resets_at).toBe(capped.wait.next_at);
    const monday = new Date(capped.wait.next_at);
    expect([monday.getUTCDay(), monday.getUTCHours(), monday.getUTCMinutes()]).toEqual([1, 0, 0]);
    expect(monday.getTime() - now.getTime()).toBeGreaterThan(0);
    expect(monday.getTime() - now.getTime()).toBeLessThanOrEqual(7 * 86_400_000);
    expect((await readStep(step.id)).status).toBe('queued');
    // One below both: 24 this week, 4 of them today.
    await used(otherDay, 20);
    await used(now, 4);
    expect((await a.claim()).json().step).toMatchObject({ id: step.id, status: 'claimed' });
  });

  it('hands out nothing metered outside working hours', async () => {
    const now = new Date();
    const closedDay = ((now.getUTCDay() + 3) % 7) + 1; // a weekday that is not today or tomorrow
    const a = await connectedAccount({ working_hours: { start: '09:00', end: '10:00', days: [closedDay] } });
    await a.queue({ kind: 'profile_view', profile_url: url });
    expect((await a.claim()).json()).toMatchObject({ step: null, reason: 'outside_working_hours' });
  });
});

describe('reportStepResult: the result report', () => {
  it('settles the current claim; the same result again is 200, another is 409 with nothing changed', async () => {
    const a = await connectedAccount();
    const step = await a.queue({ kind: 'profile_view', profile_url: url });
    const claimed = (await a.claim()).json().step;
    const body = {
      status: 'succeeded',
      claimed_at: claimed.claimed_at,
      duration_ms: 4200,
      outcome: { kind: 'profile_view', page_loaded: true, member_urn: 'urn:li:member:7' },
    };
    const settled = await a.report(step.id, body);
    expect(settled.statusCode).toBe(200);
    expect(settled.json()).toMatchObject({
      id: step.id,
      status: 'succeeded',
      duration_ms: 4200,
      outcome: { page_loaded: true },
    });
    expect(settled.json().finished_at).not.toBeNull();
    const again = await a.report(step.id, body);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(settled.json());
    const contrary = await a.report(step.id, {
      status: 'failed',
      claimed_at: claimed.claimed_at,
      error_code: 'timed_out',
    });
    expect(contrary.statusCode).toBe(409);
    expect(
      (await stack.app.inject({ method: 'GET', url: `/pnet/steps/${step.id}/`, headers: withKey(paid.apiKey) })).json()
        .status,
    ).toBe('succeeded');
  });

  it('returns the daily budget unit on failed and skipped', async () => {
    const a = await connectedAccount();
    const used = async () =>
      (
        await stack.sql<
          { used: number }[]
        >`select coalesce(sum(used), 0)::int as used from pnet_usage where account_id = ${a.accountId}`
      )[0]!.used;
    for (const status of ['failed', 'skipped'] as const) {
      const step = await a.queue({ kind: 'like_latest_post', profile_url: url });
      await stack.sql`update pnet_accounts set next_metered_at = null where id = ${a.accountId}`;
      const claimed = (await a.claim()).json().step;
      expect(claimed.id).toBe(step.id);
      expect(await used()).toBe(1);
      const res = await a.report(step.id, {
        status,
        claimed_at: claimed.claimed_at,
        error_code: status === 'failed' ? 'selector_missing' : 'not_applicable',
      });
      expect(res.json()).toMatchObject({ status });
      expect(await used()).toBe(0);
    }
  });

  it('refuses a result naming an earlier claim, a cancelled step, and a code outside the closed list', async () => {
    const a = await connectedAccount();
    const step = await a.queue({ kind: 'check_connections' });
    const claimed = (await a.claim()).json().step;
    const earlier = new Date(Date.parse(claimed.claimed_at) - 1000).toISOString();
    const stale = await a.report(step.id, { status: 'failed', claimed_at: earlier, error_code: 'tab_lost' });
    expect(stale.statusCode).toBe(409);
    const badCode = await a.report(step.id, { status: 'failed', error_code: 'gremlins' });
    expect(badCode.statusCode).toBe(422);
    expect(badCode.json().issues[0].loc).toEqual(['body', 'error_code']);
    expect((await a.report(step.id, { status: 'failed', error_message: 'e'.repeat(2001) })).statusCode).toBe(422);
    expect(
      (await a.report(step.id, { status: 'failed', error_message: 'e'.repeat(2000), error_code: 'tab_lost' }))
        .statusCode,
    ).toBe(200);

    const cancelled = await a.queue({ kind: 'check_inbox' });
    await stack.app.inject({
      method: 'POST',
      url: `/pnet/steps/${cancelled.id}/cancel/`,
      headers: withKey(paid.apiKey),
    });
    const late = await a.report(cancelled.id, { status: 'succeeded' });
    expect(late.statusCode).toBe(409);
    expect(late.json().detail).toMatch(/cancelled/);
  });

  it('keeps a failed step failed when a late result says it acted, recording acted_at', async () => {
    const a = await connectedAccount();
    const step = await a.queue({ kind: 'send_message', profile_url: url, body: 'Hello' });
    const claimed = (await a.claim()).json().step;
    await a.report(step.id, { status: 'failed', claimed_at: claimed.claimed_at, error_code: 'timed_out' });
    const late = await a.report(step.id, { status: 'succeeded', claimed_at: claimed.claimed_at });
    expect(late.statusCode).toBe(409);
    const read = (
      await stack.app.inject({ method: 'GET', url: `/pnet/steps/${step.id}/`, headers: withKey(paid.apiKey) })
    ).json();
    expect(read).toMatchObject({ status: 'failed', error_code: 'timed_out' });
    expect(read.acted_at).not.toBeNull();
  });

  it('refuses queued, claimed or rejected as a result, and a code the service writes itself, leaving the step claimed', async () => {
    const a = await connectedAccount();
    const step = await a.queue({ kind: 'profile_view', profile_url: url });
    const claimed = (await a.claim()).json().step;
    for (const status of ['queued', 'claimed', 'rejected']) {
      const refused = await a.report(step.id, { status, claimed_at: claimed.claimed_at });
      expect(refused.statusCode).toBe(422);
      expect(refused.json().issues[0].loc).toEqual(['body', 'status']);
    }
    // A browser cannot pass its failure off as one the service writes (a cancel, a lapsed claim).
    for (const code of backendErrorCodes) {
      const refused = await a.report(step.id, { status: 'failed', claimed_at: claimed.claimed_at, error_code: code });
      expect(refused.statusCode).toBe(422);
      expect(refused.json().issues[0]).toMatchObject({
        loc: ['body', 'error_code'],
        msg: expect.stringMatching(/written by the service/),
      });
    }
    expect(await readStep(step.id)).toMatchObject({
      status: 'claimed',
      claimed_at: claimed.claimed_at,
      finished_at: null,
      duration_ms: null,
    });
    // user_rejected is no backend code: the person turned the action down in the browser.
    const declined = await a.report(step.id, {
      status: 'failed',
      claimed_at: claimed.claimed_at,
      error_code: 'user_rejected',
    });
    expect(declined.json()).toMatchObject({ status: 'failed', error_code: 'user_rejected' });
  });

  it('takes a duration_ms from 0 up, past what 32 bits hold, and refuses a negative one', async () => {
    const a = await connectedAccount();
    const run = async () => {
      const step = await a.queue({ kind: 'profile_view', profile_url: url }, { test: true });
      const claimed = (await a.claim()).json().step;
      expect(claimed.id).toBe(step.id);
      return (durationMs: number) =>
        a.report(step.id, { status: 'succeeded', claimed_at: claimed.claimed_at, duration_ms: durationMs });
    };
    const first = await run();
    const negative = await first(-1);
    expect(negative.statusCode).toBe(422);
    expect(negative.json().issues[0].loc).toEqual(['body', 'duration_ms']);
    const zero = await first(0);
    expect(zero.statusCode).toBe(200);
    expect(zero.json()).toMatchObject({ status: 'succeeded', duration_ms: 0 });
    // About 35 days of milliseconds: more than an int4 column holds.
    const long = await (await run())(3_000_000_000);
    expect(long.statusCode).toBe(200);
    expect(await readStep(long.json().id)).toMatchObject({ status: 'succeeded', duration_ms: 3_000_000_000 });
  });

  it('settles a step failed with each code a browser reports', async () => {
    const a = await connectedAccount();
    // blocked_checkpoint last: it holds the account at a checkpoint.
    const codes = [...browserReportedErrorCodes.filter((code) => code !== 'blocked_checkpoint'), 'blocked_checkpoint'];
    expect(codes).toHaveLength(12);
    for (const code of codes) {
      const step = await a.queue({ kind: 'profile_view', profile_url: url }, { test: true });
      const claimed = (await a.claim()).json().step;
      expect(claimed.id).toBe(step.id);
      const res = await a.report(step.id, {
        status: 'failed',
        claimed_at: claimed.claimed_at,
        error_code: code,
        error_message: `failed: ${code}`,
      });
      expect(res.statusCode).toBe(200);
      expect(await readStep(step.id)).toMatchObject({
        status: 'failed',
        error_code: code,
        error_message: `failed: ${code}`,
      });
    }
  });

  it('refuses a failure for a step the service gave up on, and a different failure for one already failed', async () => {
    const a = await connectedAccount();
    const step = await a.queue({ kind: 'profile_view', profile_url: url }, { test: true });
    const claimed = (await a.claim()).json().step;
    // As the claim's lapse leaves it when resume is off (the lapse itself: pnet-claim-expiry.test.ts).
    await stack.sql`update browser_steps set status = 'failed', error_code = 'claim_expired', finished_at = now() where id = ${step.id}`;
    const late = await a.report(step.id, { status: 'failed', claimed_at: claimed.claimed_at, error_code: 'timed_out' });
    expect(late.statusCode).toBe(409);
    expect(await readStep(step.id)).toMatchObject({ status: 'failed', error_code: 'claim_expired' });

    const other = await a.queue({ kind: 'profile_view', profile_url: url }, { test: true });
    const second = (await a.claim()).json().step;
    const failure = { status: 'failed', claimed_at: second.claimed_at, error_code: 'tab_lost' };
    expect((await a.report(other.id, failure)).statusCode).toBe(200);
    expect((await a.report(other.id, failure)).statusCode).toBe(200);
    expect((await a.report(other.id, { ...failure, error_code: 'selector_missing' })).statusCode).toBe(409);
    expect(await readStep(other.id)).toMatchObject({ status: 'failed', error_code: 'tab_lost' });
  });

  it('refuses a result for a skipped step with nothing changed', async () => {
    const a = await connectedAccount();
    const step = await a.queue({ kind: 'profile_view', profile_url: url });
    const claimed = (await a.claim()).json().step;
    const skipped = await a.report(step.id, {
      status: 'skipped',
      claimed_at: claimed.claimed_at,
      error_code: 'not_applicable',
    });
    expect(skipped.json()).toMatchObject({ status: 'skipped' });
    const late = await a.report(step.id, { status: 'succeeded', claimed_at: claimed.claimed_at });
    expect(late.statusCode).toBe(409);
    expect(await readStep(step.id)).toEqual(skipped.json());
  });

  it('refuses a result for a step a person rejected on the Tasks page', async () => {
    const a = await connectedAccount({ run_mode: 'manual' });
    const task = await a.queue({ kind: 'profile_view', profile_url: url });
    const rejected = await stack.app.inject({
      method: 'POST',
      url: `/pnet/tasks/${task.id}/reject/`,
      headers: withKey(paid.apiKey),
      payload: { reason: 'Not this one' },
    });
    expect(rejected.json()).toMatchObject({ id: task.id, status: 'rejected' });
    const late = await a.report(task.id, { status: 'succeeded' });
    expect(late.statusCode).toBe(409);
    expect(await readStep(task.id)).toMatchObject({ status: 'rejected', acted_at: null });
  });

  it('settles a step the same with a readable diagnostic, and its checkpoint never holds the account', async () => {
    const a = await connectedAccount();
    const step = await a.queue({ kind: 'profile_view', profile_url: url });
    const claimed = (await a.claim()).json().step;
    const diagnostic = { checkpoint: 'captcha', before_commit: true, config_version: 1 };
    const res = await a.report(step.id, { status: 'succeeded', claimed_at: claimed.claimed_at, diagnostic });
    expect(res.statusCode).toBe(200);
    expect(await readStep(step.id)).toMatchObject({ status: 'succeeded', error_code: null });
    expect((await a.heartbeat()).json().checkpoint).toBe(false);
  });

  it('drops an unreadable diagnostic without refusing the result', async () => {
    const a = await connectedAccount();
    const step = await a.queue({ kind: 'check_inbox' });
    const claimed = (await a.claim()).json().step;
    const res = await a.report(step.id, {
      status: 'succeeded',
      claimed_at: claimed.claimed_at,
      diagnostic: 'not an object',
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().status).toBe('succeeded');
  });

  it('answers 404 for a step of another account', async () => {
    const a = await connectedAccount();
    const b = await connectedAccount();
    const step = await a.queue({ kind: 'check_inbox' });
    expect((await b.report(step.id, { status: 'succeeded' })).statusCode).toBe(404);
  });
});

describe('retrying a failed step', () => {
  it('brings back a step that may have acted as resuming, handed only to a browser that verifies first', async () => {
    const a = await connectedAccount();
    const step = await a.queue({ kind: 'send_message', profile_url: url, body: 'Hello again' });
    const claimed = (await a.claim()).json().step;
    await a.report(step.id, { status: 'failed', claimed_at: claimed.claimed_at, error_code: 'timed_out' });
    const retry = () =>
      stack.app.inject({ method: 'POST', url: `/pnet/steps/${step.id}/retry/`, headers: withKey(paid.apiKey) });
    const retried = await retry();
    expect(retried.statusCode).toBe(200);
    expect(retried.json()).toMatchObject({ status: 'resuming', error_code: null, finished_at: null });
    // It is back in line: a second retry has nothing to retry.
    expect((await retry()).statusCode).toBe(409);
    await stack.sql`update pnet_accounts set next_metered_at = null where id = ${a.accountId}`;
    expect((await a.claim()).json()).toEqual({ step: null, verification: null, reason: null, wait: null });
    const verifying = (await a.claim({ verify_first: true })).json();
    expect(verifying.step).toMatchObject({ id: step.id, status: 'claimed' });
    const done = await a.report(step.id, { status: 'succeeded', claimed_at: verifying.step.claimed_at });
    expect(done.json().status).toBe('succeeded');
  });

  it('queues again a step whose failure did nothing, and refuses to retry one that succeeded', async () => {
    const a = await connectedAccount();
    const step = await a.queue({ kind: 'follow_contact', profile_url: url });
    const claimed = (await a.claim()).json().step;
    await a.report(step.id, { status: 'failed', claimed_at: claimed.claimed_at, error_code: 'selector_missing' });
    const retried = await stack.app.inject({
      method: 'POST',
      url: `/pnet/steps/${step.id}/retry/`,
      headers: withKey(paid.apiKey),
    });
    expect(retried.json()).toMatchObject({ status: 'queued' });
    await stack.sql`update pnet_accounts set next_metered_at = null where id = ${a.accountId}`;
    const again = (await a.claim()).json().step;
    await a.report(step.id, { status: 'succeeded', claimed_at: again.claimed_at });
    const refused = await stack.app.inject({
      method: 'POST',
      url: `/pnet/steps/${step.id}/retry/`,
      headers: withKey(paid.apiKey),
    });
    expect(refused.statusCode).toBe(409);
    expect(refused.json().detail).toMatch(/only a failed step/);
  });
});

describe('releasing a claim', () => {
  it('puts the step back in line and returns its unit; a stale or absent claim is 409', async () => {
    const a = await connectedAccount();
    const step = await a.queue({ kind: 'connection_request', profile_url: url });
    const claimed = (await a.claim()).json().step;
    const release = (body: object) => a.agent(`/pnet/agent/actions/${step.id}/release/`, body);
    const stale = await release({
      claimed_at: new Date(Date.parse(claimed.claimed_at) - 5000).toISOString(),
      reason: 'verified_absent',
    });
    expect(stale.statusCode).toBe(409);
    expect((await release({ claimed_at: claimed.claimed_at, reason: 'gone_fishing' })).statusCode).toBe(422);
    const released = await release({ claimed_at: claimed.claimed_at, reason: 'verified_absent' });
    expect(released.statusCode).toBe(200);
    expect(released.json()).toMatchObject({ id: step.id, status: 'queued' });
    const used = await stack.sql<
      { used: number }[]
    >`select coalesce(sum(used), 0)::int as used from pnet_usage where account_id = ${a.accountId}`;
    expect(used[0]!.used).toBe(0);
    expect((await release({ claimed_at: claimed.claimed_at, reason: 'verified_absent' })).statusCode).toBe(409);
    await stack.sql`update pnet_accounts set next_metered_at = null where id = ${a.accountId}`;
    expect((await a.claim()).json().step).toMatchObject({ id: step.id, status: 'claimed' });
  });

  it('tells a browser that does not name its own running claim (the answer was lost) that a step waits, and hands the claim back', async () => {
    const a = await connectedAccount();
    const step = await a.queue({ kind: 'check_inbox' });
    // The claim commits; its answer never reaches the browser.
    const lost = (await a.claim()).json().step;
    // Checking in without naming it: a step waits for this browser (its own claim), so it asks.
    expect((await a.heartbeat()).json()).toMatchObject({ queued_count: 1, running_claim: null, wait: null });
    expect((await a.claim()).json().step).toMatchObject({
      id: step.id,
      status: 'claimed',
      claimed_at: lost.claimed_at,
    });
    // Naming it, nothing else waits; another browser of the account is not told to ask.
    expect((await a.heartbeat({ running: { action_id: step.id, claimed_at: lost.claimed_at } })).json()).toMatchObject({
      queued_count: 0,
      running_claim: 'renewed',
    });
    const other = await a.agent('/pnet/agent/heartbeat/', {
      browser_id: randomUUID(),
      browser_label: 'Firefox',
      extension_version: '2.0.0',
    });
    expect(other.json()).toMatchObject({ queued_count: 0, lease_granted: true });
  });

  it("lapses a running claim whose lease timer is late when its account's next claim asks, not before the grace, and tells its workflow", async () => {
    const a = await connectedAccount();
    const silent = await a.queue({ kind: 'check_inbox' });
    const other = randomUUID();
    const first = (await a.claim()).json().step;
    expect(first.id).toBe(silent.id);
    const signalRead = async () =>
      (await stack.sql`select signal_due_at from browser_steps where id = ${silent.id}`)[0]!.signal_due_at === null;
    // The workflow has read the claim and set its lease timer 90 s out; the browser goes silent and
    // the timer is late (moved here by moving the claim back: the API reads Postgres's clock).
    await until('the claim read by its workflow', signalRead);
    const leaseEndedAgo = (seconds: number) =>
      stack.sql`update browser_steps set claimed_at = date_trunc('milliseconds', now() - make_interval(secs => ${claimLeaseSeconds + seconds})) where id = ${silent.id} returning claimed_at`;
    const [moved] = await leaseEndedAgo(overdueClaimGraceSeconds - 1);
    // Inside the grace the timer still owns it: the account's browser gets its own claim back, and
    // a check-in of another browser says nothing waits, but to look again when it becomes overdue.
    expect((await a.claim()).json().step).toMatchObject({
      id: silent.id,
      status: 'claimed',
      claimed_at: moved!.claimed_at.toISOString(),
    });
    const otherBrowser = () =>
      a.agent('/pnet/agent/heartbeat/', { browser_id: other, browser_label: 'Firefox', extension_version: '2.0.0' });
    expect((await otherBrowser()).json()).toMatchObject({ queued_count: 0, poll_after_seconds: 1, wait: null });
    await leaseEndedAgo(overdueClaimGraceSeconds + 1);
    // Past it the step waits for a browser again: a check-in says so, and the browser claims.
    expect((await otherBrowser()).json()).toMatchObject({ queued_count: 1, wait: { reason: 'ready' } });
    await stack.sql`update pnet_accounts set next_metered_at = null where id = ${a.accountId}`;
    // Lapsed as its timer would have (a housekeeping read goes back in line, its unit returned),
    // and handed out again in the same answer: a new claim, one unit used.
    const againBody = (await a.claim()).json();
    console.log(
      'AGAIN',
      JSON.stringify(againBody),
      JSON.stringify(
        await stack.sql`select id, status, queued_at, claimed_at, held, signal_due_at from browser_steps where account_id = ${a.accountId}`,
      ),
    );
    const again = againBody.step;
    expect(again).toMatchObject({ id: silent.id, status: 'claimed' });
    expect(Date.now() - Date.parse(again.claimed_at)).toBeLessThan(claimLeaseSeconds * 1000);
    const used = await stack.sql<
      { used: number }[]
    >`select coalesce(sum(used), 0)::int as used from pnet_usage where account_id = ${a.accountId}`;
    expect(used[0]!.used).toBe(1);
    // Its workflow is told of the lapse and of the new claim, and times the new lease.
    await until('the changes read by its workflow', signalRead);
    const state = await stack.client.workflow.getHandle(`browser-step/${silent.id}`).query(browserStepStateQuery);
    expect(state).toMatchObject({ status: 'claimed', claims: 2 });
  });

  it('never counts a release or a reported attempt as a cut-off', async () => {
    const a = await connectedAccount();
    const step = await a.queue({ kind: 'connection_request', profile_url: url });
    const claimed = (await a.claim()).json().step;
    for (const reason of ['cut_off', 'verified_absent']) {
      const attempt = await a.agent(`/pnet/agent/actions/${step.id}/attempts/`, {
        claimed_at: claimed.claimed_at,
        reason,
      });
      expect(attempt.json()).toMatchObject({ claimed_at: claimed.claimed_at, reason });
    }
    const released = await a.agent(`/pnet/agent/actions/${step.id}/release/`, {
      claimed_at: claimed.claimed_at,
      reason: 'verified_absent',
    });
    expect(released.json()).toMatchObject({ id: step.id, status: 'queued' });
    const [row] = await stack.sql<{ cut_offs: number }[]>`select cut_offs from browser_steps where id = ${step.id}`;
    expect(row!.cut_offs).toBe(0);
  });

  it('gives back a claim whose contact was paused (reopen_paused): the step waits held, its unit returned, until the contact resumes', async () => {
    const a = await connectedAccount();
    const contact = `contact-${randomUUID()}`;
    const step = await a.queue({ kind: 'connection_request', profile_url: url }, { contact_key: contact });
    const claimed = (await a.claim()).json().step;
    const hold = await holdContact(stack, paid, contact);
    const released = await a.agent(`/pnet/agent/actions/${step.id}/release/`, {
      claimed_at: claimed.claimed_at,
      reason: 'reopen_paused',
    });
    expect(released.statusCode).toBe(200);
    expect(released.json()).toMatchObject({
      id: step.id,
      status: 'queued',
      held: true,
      error_code: null,
      finished_at: null,
    });
    const used = await stack.sql<
      { used: number }[]
    >`select coalesce(sum(used), 0)::int as used from pnet_usage where account_id = ${a.accountId}`;
    expect(used[0]!.used).toBe(0);
    await stack.sql`update pnet_accounts set next_metered_at = null where id = ${a.accountId}`;
    expect((await a.claim()).json()).toEqual({ step: null, verification: null, reason: null, wait: null });
    await stack.app.inject({ method: 'DELETE', url: `/pnet/holds/${hold.id}/`, headers: withKey(paid.apiKey) });
    expect((await a.claim()).json().step).toMatchObject({ id: step.id, status: 'claimed' });
  });
});
