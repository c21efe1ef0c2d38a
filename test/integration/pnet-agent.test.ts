import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TransactionSql } from 'postgres';
import { describe, expect, it, onTestFinished } from 'vitest';
import {
  connectionToken,
  createSenderProfile,
  hashConnectionToken,
  updatePnetSettings,
} from '../../store/pnet/accounts.js';
import { CheckInLine } from '../../store/pnet/check-ins.js';
import { useTestStack, withKey, withToken } from '../support/test-stack.js';
import { configVersion } from '../../domain/pnet/agent.js';
import { allWeek, holdContact, senderAccount } from '../support/pnet.js';

const { stack, paid } = useTestStack();

const identity = {
  member_urn: 'urn:li:member:1001',
  display_name: 'Ada Lovelace',
  vanity_name: 'ada',
  headline: 'Analyst',
};

const sender = (runMode: 'manual' | 'automatic' = 'automatic') =>
  senderAccount(stack, paid, { settings: { run_mode: runMode } });

function browser(token: string, label = 'Chrome on Mac') {
  const browserId = randomUUID();
  return {
    browserId,
    heartbeat: (body: object = {}) =>
      stack.app.inject({
        method: 'POST',
        url: '/pnet/agent/heartbeat/',
        headers: withToken(token),
        payload: { browser_id: browserId, browser_label: label, extension_version: '1.4.0', identity, ...body },
      }),
  };
}

const settings = (profileId: string, payload: object) =>
  stack.app.inject({
    method: 'PATCH',
    url: `/sender-profiles/${profileId}/pnet/settings/`,
    headers: withKey(paid.apiKey),
    payload,
  });
const queueStep = async (accountId: string, params: object, extra: object = {}) =>
  (
    await stack.app.inject({
      method: 'POST',
      url: '/pnet/steps/',
      headers: withKey(paid.apiKey),
      payload: { account_id: accountId, params, ...extra },
    })
  ).json();

describe('extension authentication', () => {
  it('takes the connection token as a bearer or in X-API-Key, and reaches nothing else with it', async () => {
    const { token } = await sender();
    const body = { browser_id: randomUUID(), browser_label: 'B', extension_version: '1.0' };
    const viaBearer = await stack.app.inject({
      method: 'POST',
      url: '/pnet/agent/heartbeat/',
      headers: withToken(token),
      payload: body,
    });
    expect(viaBearer.statusCode).toBe(200);
    const viaKey = await stack.app.inject({
      method: 'POST',
      url: '/pnet/agent/heartbeat/',
      headers: { 'x-api-key': token },
      payload: body,
    });
    expect(viaKey.statusCode).toBe(200);
    expect((await stack.app.inject({ method: 'GET', url: '/workspace/', headers: withToken(token) })).statusCode).toBe(
      403,
    );
    expect(
      (
        await stack.app.inject({
          method: 'POST',
          url: '/pnet/agent/heartbeat/',
          headers: withKey(paid.apiKey),
          payload: body,
        })
      ).statusCode,
    ).toBe(403);
    const unknown = await stack.app.inject({
      method: 'POST',
      url: '/pnet/agent/heartbeat/',
      headers: withToken(`opc_${'x'.repeat(43)}`),
      payload: body,
    });
    expect(unknown.statusCode).toBe(401);
  });
});

describe('heartbeat', () => {
  it('connects the account on the first identity and answers every AgentState field', async () => {
    const { token, profileId } = await sender();
    const res = await browser(token).heartbeat();
    expect(res.statusCode).toBe(200);
    const state = res.json();
    expect(state).toMatchObject({
      run_mode: 'automatic',
      checkpoint: false,
      lease_granted: true,
      lease_holder_label: null,
      account_mismatch: false,
      queued_count: 0,
      approvals_waiting: 0,
      config_version: configVersion,
      attempts_enabled: false,
      resume_enabled: false,
      running_claim: null,
      unpaced_waiting: false,
      wait: null,
    });
    expect(state.usage).toHaveLength(10);
    expect(Date.parse(state.usage_resets_at)).toBeGreaterThan(Date.now());
    expect(state.poll_after_seconds).toBeLessThanOrEqual(45);

    const wrapper = (
      await stack.app.inject({
        method: 'GET',
        url: `/sender-profiles/${profileId}/pnet/`,
        headers: withKey(paid.apiKey),
      })
    ).json();
    expect(wrapper.connected).toBe(true);
    expect(wrapper.account).toMatchObject({
      display_name: 'Ada Lovelace',
      member_urn: identity.member_urn,
      status: 'connected',
      presence: 'active',
    });
    expect(wrapper.account.sessions).toHaveLength(1);
  });

  it('stops a browser signed in as another identity (account_mismatch), without the lease', async () => {
    const { token } = await sender();
    await browser(token).heartbeat();
    const other = await browser(token, 'Firefox').heartbeat({
      identity: { member_urn: 'urn:li:member:2002' },
      lease_nonce: 'nonce-other',
    });
    expect(other.json()).toMatchObject({ account_mismatch: true, lease_granted: false });
  });

  it('gives the lease to one browser; another reads the holder label until the lease lapses', async () => {
    const { token, accountId } = await sender();
    const a = browser(token, 'Chrome at work');
    const b = browser(token, 'Chrome at home');
    expect((await a.heartbeat({ lease_nonce: 'aaaaaaaa' })).json().lease_granted).toBe(true);
    const refused = (await b.heartbeat({ lease_nonce: 'b'.repeat(64) })).json();
    expect(refused).toMatchObject({ lease_granted: false, lease_holder_label: 'Chrome at work' });
    expect((await a.heartbeat({ lease_nonce: 'aaaaaaaa' })).json().lease_granted).toBe(true);
    await stack.sql`update pnet_accounts set lease_expires_at = now() - interval '1 second' where id = ${accountId}`;
    expect((await b.heartbeat({ lease_nonce: 'b'.repeat(64) })).json()).toMatchObject({
      lease_granted: true,
      lease_holder_label: null,
    });
    expect((await a.heartbeat({ lease_nonce: 'aaaaaaaa' })).json()).toMatchObject({
      lease_granted: false,
      lease_holder_label: 'Chrome at home',
    });
  });

  it('bounds lease_nonce to 8 to 64 characters', async () => {
    const { token } = await sender();
    const b = browser(token);
    expect((await b.heartbeat({ lease_nonce: '12345678' })).statusCode).toBe(200);
    expect((await b.heartbeat({ lease_nonce: '1234567' })).statusCode).toBe(422);
    expect((await b.heartbeat({ lease_nonce: 'n'.repeat(65) })).json().issues[0].loc).toEqual(['body', 'lease_nonce']);
  });

  it('counts the line, reports unpaced work and checks in within 15 s while work is about to run', async () => {
    const { token, accountId } = await sender('manual');
    const b = browser(token);
    await b.heartbeat();
    const queue = (params: object, test = false) =>
      stack.app.inject({
        method: 'POST',
        url: '/pnet/steps/',
        headers: withKey(paid.apiKey),
        payload: { account_id: accountId, params, test },
      });
    await queue({ kind: 'check_inbox' });
    await queue({ kind: 'check_connections' }, true);
    const state = (await b.heartbeat()).json();
    expect(state).toMatchObject({
      queued_count: 1,
      approvals_waiting: 1,
      unpaced_waiting: true,
      wait: { reason: 'ready' },
    });
    expect(state.poll_after_seconds).toBeLessThanOrEqual(15);
  });

  it('holds a kind at its daily cap until local midnight, the reason on the answer, and another kind goes first', async () => {
    const { token, accountId, profileId } = await sender();
    await stack.app.inject({
      method: 'PATCH',
      url: `/sender-profiles/${profileId}/pnet/settings/`,
      headers: withKey(paid.apiKey),
      payload: { working_hours: allWeek },
    });
    const b = browser(token);
    await b.heartbeat();
    await stack.app.inject({
      method: 'POST',
      url: '/pnet/steps/',
      headers: withKey(paid.apiKey),
      payload: {
        account_id: accountId,
        params: { kind: 'connection_request', profile_url: 'https://pnet.example/in/x' },
      },
    });
    // A new account is in its first warm-up week: 20 a day ramps to 5.
    await stack.sql`
      insert into pnet_usage (account_id, local_date, limit_kind, used) values (${accountId}, (now() at time zone 'UTC')::date, 'connection_request', 5)`;
    const state = (await b.heartbeat()).json();
    expect(state.usage.find((u: { kind: string }) => u.kind === 'connection_request')).toMatchObject({
      used_today: 5,
      daily_limit: 5,
    });
    expect(state.wait).toEqual({
      reason: 'daily_cap',
      next_at: state.usage_resets_at,
      resets_at: state.usage_resets_at,
    });
    expect(state.poll_after_seconds).toBeGreaterThan(15);
    // A profile view is below its ceiling: the claim would hand it out now, and the answer says so.
    await stack.app.inject({
      method: 'POST',
      url: '/pnet/steps/',
      headers: withKey(paid.apiKey),
      payload: { account_id: accountId, params: { kind: 'profile_view', profile_url: 'https://pnet.example/in/y' } },
    });
    const next = (await b.heartbeat()).json();
    expect(next.wait).toMatchObject({ reason: 'ready' });
    expect(next.poll_after_seconds).toBeLessThanOrEqual(15);
    const claimed = await stack.app.inject({
      method: 'POST',
      url: '/pnet/agent/claim/',
      headers: withToken(token),
      payload: { browser_id: b.browserId },
    });
    expect(claimed.json().step).toMatchObject({ kind: 'profile_view' });
  });

  it('reports unpaced work waiting only when asking for it alone would hand it out', async () => {
    const { token, accountId } = await sender();
    const b = browser(token);
    await b.heartbeat({ lease_nonce: 'lease-nonce-1' });
    const queueTest = () =>
      stack.app.inject({
        method: 'POST',
        url: '/pnet/steps/',
        headers: withKey(paid.apiKey),
        payload: { account_id: accountId, params: { kind: 'check_inbox' }, test: true },
      });
    await queueTest();
    await queueTest();
    expect((await b.heartbeat({ lease_nonce: 'lease-nonce-1' })).json()).toMatchObject({
      unpaced_waiting: true,
      wait: { reason: 'ready' },
    });
    const claimed = await stack.app.inject({
      method: 'POST',
      url: '/pnet/agent/claim/',
      headers: withToken(token),
      payload: { browser_id: b.browserId, unmetered_only: true },
    });
    expect(claimed.json().step).toMatchObject({ status: 'claimed' });
    // One still waits, but one runs: a claim now hands out nothing.
    const running = (
      await b.heartbeat({
        lease_nonce: 'lease-nonce-1',
        running: { action_id: claimed.json().step.id, claimed_at: claimed.json().step.claimed_at },
      })
    ).json();
    expect(running).toMatchObject({
      running_claim: 'renewed',
      queued_count: 1,
      unpaced_waiting: false,
      wait: { reason: 'running' },
    });
  });

  it("asks for the next check-in within the account's gap, and within 45 s so the browser still reads as active", async () => {
    const quick = await sender();
    await settings(quick.profileId, { min_action_interval_seconds: 30 });
    const idle = (await browser(quick.token).heartbeat()).json();
    expect(idle.wait).toBeNull();
    expect(idle.poll_after_seconds).toBeLessThanOrEqual(30);
    const usual = await sender();
    expect((await browser(usual.token).heartbeat()).json()).toMatchObject({ wait: null, poll_after_seconds: 45 });
  });

  it('waits for the gap since the last metered step, checking in within 15 s of its end', async () => {
    const { token, accountId, profileId } = await sender();
    await settings(profileId, { working_hours: allWeek });
    const b = browser(token);
    await b.heartbeat();
    await queueStep(accountId, { kind: 'profile_view', profile_url: 'https://pnet.example/in/x' });
    const [account] = await stack.sql<{ next_metered_at: Date }[]>`
      update pnet_accounts set next_metered_at = date_trunc('milliseconds', now()) + interval '40 seconds' where id = ${accountId} returning next_metered_at`;
    const state = (await b.heartbeat()).json();
    expect(state.wait).toMatchObject({ reason: 'gap', next_at: account!.next_metered_at.toISOString() });
    expect(state.poll_after_seconds).toBeLessThanOrEqual(15);
  });

  it('waits outside working hours until the next window opens', async () => {
    const { token, accountId, profileId } = await sender();
    const closedDay = ((new Date().getUTCDay() + 3) % 7) + 1; // a weekday that is not today or tomorrow
    await settings(profileId, { working_hours: { start: '09:00', end: '10:00', days: [closedDay] } });
    const b = browser(token);
    await b.heartbeat();
    await queueStep(accountId, { kind: 'profile_view', profile_url: 'https://pnet.example/in/x' });
    const { wait } = (await b.heartbeat()).json();
    expect(wait.reason).toBe('outside_working_hours');
    const opens = new Date(wait.next_at);
    expect(opens.getTime()).toBeGreaterThan(Date.now());
    expect([opens.getUTCDay(), opens.getUTCHours(), opens.getUTCMinutes()]).toEqual([closedDay % 7, 9, 0]);
  });

  it('tells a browser the account is held at a checkpoint, and that the line waits on it', async () => {
    const { token, accountId } = await sender();
    const b = browser(token);
    await b.heartbeat();
    await queueStep(accountId, { kind: 'check_inbox' });
    const [account] = await stack.sql<{ checkpoint_until: Date }[]>`
      update pnet_accounts set checkpoint_status = 'checkpoint', checkpoint_until = date_trunc('milliseconds', now()) + interval '1 hour'
      where id = ${accountId} returning checkpoint_until`;
    const state = (await b.heartbeat()).json();
    expect(state).toMatchObject({
      checkpoint: true,
      wait: { reason: 'checkpoint', next_at: account!.checkpoint_until.toISOString() },
    });
  });

  it('leaves tasks of a paused contact out of approvals_waiting until the contact resumes', async () => {
    const { token, accountId } = await sender('manual');
    const b = browser(token);
    await b.heartbeat();
    const contact = `contact-${randomUUID()}`;
    await queueStep(
      accountId,
      { kind: 'profile_view', profile_url: 'https://pnet.example/in/x' },
      { contact_key: contact },
    );
    const hold = await holdContact(stack, paid, contact);
    expect((await b.heartbeat()).json().approvals_waiting).toBe(0);
    await stack.app.inject({ method: 'DELETE', url: `/pnet/holds/${hold.id}/`, headers: withKey(paid.apiKey) });
    expect((await b.heartbeat()).json().approvals_waiting).toBe(1);
  });

  it("resets usage at midnight in the sender's time zone", async () => {
    const { token, profileId } = await sender();
    await settings(profileId, { timezone: 'Asia/Kolkata' });
    const state = (await browser(token).heartbeat()).json();
    expect(state.usage_resets_at).toMatch(/T18:30:00\.000Z$/);
    expect(Date.parse(state.usage_resets_at) - Date.now()).toBeLessThanOrEqual(86_400_000);
  });

  it('answers run_mode manual for an account whose run mode was never set', async () => {
    const { token } = await senderAccount(stack, paid);
    expect((await browser(token).heartbeat()).json().run_mode).toBe('manual');
  });

  it('answers a running claim renewed when it is current and lost otherwise', async () => {
    const { token, accountId } = await sender();
    const b = browser(token);
    await b.heartbeat();
    const step = (
      await stack.app.inject({
        method: 'POST',
        url: '/pnet/steps/',
        headers: withKey(paid.apiKey),
        payload: { account_id: accountId, params: { kind: 'check_inbox' } },
      })
    ).json();
    const [claimed] = await stack.sql<{ claimed_at: Date }[]>`
      update browser_steps set status = 'claimed', claimed_at = date_trunc('milliseconds', now()) where id = ${step.id} returning claimed_at`;
    const renewedAt = async () =>
      (
        await stack.sql<{ at: Date | null }[]>`select lease_renewed_at as at from browser_steps where id = ${step.id}`
      )[0]!.at;
    const renewed = await b.heartbeat({
      running: { action_id: step.id, claimed_at: claimed!.claimed_at.toISOString() },
    });
    expect(renewed.json()).toMatchObject({ running_claim: 'renewed', wait: null });
    // The renewal the step's lease timer reads when it fires.
    const first = await renewedAt();
    expect(first!.getTime()).toBeGreaterThanOrEqual(claimed!.claimed_at.getTime());
    const stale = await b.heartbeat({
      running: { action_id: step.id, claimed_at: new Date(claimed!.claimed_at.getTime() - 60_000).toISOString() },
    });
    expect(stale.json().running_claim).toBe('lost');
    expect(await renewedAt()).toEqual(first);
    // The claim is an instant: named at the largest UTC offset Postgres keeps, it is the same claim;
    // one minute past that offset, or in a year Postgres lacks, is refused naming the field.
    const at = (offsetMinutes: number) => {
      const local = new Date(claimed!.claimed_at.getTime() + offsetMinutes * 60_000).toISOString().slice(0, 23);
      const sign = offsetMinutes < 0 ? '-' : '+';
      const size = Math.abs(offsetMinutes);
      return `${local}${sign}${String(Math.floor(size / 60)).padStart(2, '0')}:${String(size % 60).padStart(2, '0')}`;
    };
    expect(
      (await b.heartbeat({ running: { action_id: step.id, claimed_at: at(15 * 60 + 59) } })).json().running_claim,
    ).toBe('renewed');
    expect(
      (await b.heartbeat({ running: { action_id: step.id, claimed_at: at(-(15 * 60 + 59)) } })).json().running_claim,
    ).toBe('renewed');
    for (const claimedAt of [at(16 * 60), at(-(17 * 60 + 34)), '0999-12-31T23:59:59Z']) {
      const refused = await b.heartbeat({ running: { action_id: step.id, claimed_at: claimedAt } });
      expect(refused.statusCode).toBe(422);
      expect(refused.json().issues[0].loc).toEqual(['body', 'running.claimed_at']);
    }
  });

  it('sets the run mode from the extension', async () => {
    const { token, profileId } = await sender('manual');
    const b = browser(token);
    await b.heartbeat();
    const res = await stack.app.inject({
      method: 'POST',
      url: '/pnet/agent/state/',
      headers: withToken(token),
      payload: { browser_id: b.browserId, run_mode: 'automatic', lease_nonce: 'nonce-123' },
    });
    expect(res.json()).toMatchObject({ run_mode: 'automatic', lease_granted: true });
    const settings = (
      await stack.app.inject({
        method: 'GET',
        url: `/sender-profiles/${profileId}/pnet/settings/`,
        headers: withKey(paid.apiKey),
      })
    ).json();
    expect(settings.run_mode).toBe('automatic');
  });

  it('bounds the lease_nonce of a set-state request to 8 to 64 characters', async () => {
    const { token } = await sender();
    const b = browser(token);
    await b.heartbeat();
    const setState = (leaseNonce: string) =>
      stack.app.inject({
        method: 'POST',
        url: '/pnet/agent/state/',
        headers: withToken(token),
        payload: { browser_id: b.browserId, lease_nonce: leaseNonce },
      });
    const shortest = await setState('n'.repeat(8));
    expect(shortest.statusCode).toBe(200);
    expect(shortest.json().lease_granted).toBe(true);
    expect((await setState('n'.repeat(64))).statusCode).toBe(200);
    for (const nonce of ['n'.repeat(7), 'n'.repeat(65)]) {
      const refused = await setState(nonce);
      expect(refused.statusCode).toBe(422);
      expect(refused.json().issues[0].loc).toEqual(['body', 'lease_nonce']);
    }
  });
});

describe('check-ins in batches', () => {
  /**
   * A sender made in SQL, with no account workflow: nothing but the test locks its row (an
   * account workflow's tick, which creating a sender through the API starts, would race these
   * tests' row locks and batch counts).
   */
  async function sender() {
    const profile = await createSenderProfile(stack.sql, paid.workspaceId, {
      name: `Q ${randomUUID()}`,
      timezone: 'UTC',
    });
    await updatePnetSettings(stack.sql, paid.workspaceId, profile.id, { run_mode: 'automatic' });
    const [account] = await stack.sql<{ id: string; connection_token_version: number }[]>`
      select id, connection_token_version from pnet_accounts where sender_profile_id = ${profile.id}`;
    return {
      accountId: account!.id,
      token: await connectionToken(stack.sql, account!.id, account!.connection_token_version),
    };
  }

  const input = (token: string, browserId: string = randomUUID(), label = 'Batch browser') => ({
    tokenHash: hashConnectionToken(token),
    browserId,
    label,
    version: '1.4.0',
    leaseNonce: `nonce-${browserId}`,
    identity: { ...identity, photo_url: null },
  });

  /**
   * Another transaction holding rows (as a claim or a settle does) until the answer is called,
   * or the test ends however it ends, so a failed assertion never leaves a lock behind.
   */
  async function holdRows(lock: (tx: TransactionSql) => Promise<unknown>): Promise<() => Promise<void>> {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const rowsLocked = new Promise<void>((resolve) => (locked = resolve));
    const holder = stack.sql.begin(async (tx) => {
      await lock(tx);
      locked();
      await held;
    });
    const done = async () => {
      release();
      await holder;
    };
    onTestFinished(done);
    await rowsLocked;
    return done;
  }

  it('carries the check-ins that arrive while a statement runs in one statement, each answered as if alone', async () => {
    const senders = await Promise.all(Array.from({ length: 12 }, () => sender()));
    const line = new CheckInLine(stack.sql, 1, 64);
    const states = await Promise.all(senders.map((s) => line.submit(s.accountId, input(s.token), new Date())));
    // The first went alone; the other eleven waited for it and went together.
    expect(line.stats).toMatchObject({ statements: 2, checkIns: 12, largest: 11, split: 0 });
    for (const state of states)
      expect(state).toMatchObject({ lease_granted: true, account_mismatch: false, run_mode: 'automatic', wait: null });
    const connected = await stack.sql<{ status: string; lease: boolean }[]>`
      select status, lease_session_id is not null as lease from pnet_accounts where id in ${stack.sql(senders.map((s) => s.accountId))}`;
    expect(connected).toEqual(Array.from({ length: 12 }, () => ({ status: 'connected', lease: true })));
  });

  it('never puts two check-ins of one account in a batch: two browsers racing for the lease get one lease between them', async () => {
    const [one, two] = await Promise.all([sender(), sender()]);
    const line = new CheckInLine(stack.sql, 1, 64);
    const [first, , mine, theirs] = await Promise.all([
      line.submit(two.accountId, input(two.token), new Date()),
      line.submit(one.accountId, input(one.token), new Date()),
      line.submit(two.accountId, input(two.token, randomUUID(), 'Laptop'), new Date()),
      line.submit(two.accountId, input(two.token, randomUUID(), 'Desktop'), new Date()),
    ]);
    // [two], then [one, two's laptop], then [two's desktop].
    expect(line.stats).toMatchObject({ statements: 3, checkIns: 4, largest: 2 });
    expect(first).toMatchObject({ lease_granted: true });
    expect(mine).toMatchObject({ lease_granted: false, lease_holder_label: 'Batch browser' });
    expect(theirs).toMatchObject({ lease_granted: false, lease_holder_label: 'Batch browser' });
  });

  it("keeps one account's check-ins in order while another transaction holds its row: the first to ask still gets the lease", async () => {
    const [one, two] = await Promise.all([sender(), sender()]);
    const line = new CheckInLine(stack.sql, 1, 64);
    const release = await holdRows((tx) => tx`select 1 from pnet_accounts where id = ${two.accountId} for update`);
    const first = line.submit(two.accountId, input(two.token), new Date());
    const later = line.submit(two.accountId, input(two.token, randomUUID(), 'Laptop'), new Date());
    // The other account is not held up; two's second check-in waits behind its first, not beside it.
    expect(await line.submit(one.accountId, input(one.token), new Date())).toMatchObject({ lease_granted: true });
    expect(line.stats).toMatchObject({ behindLock: 1 });
    await release();
    expect(await first).toMatchObject({ lease_granted: true });
    expect(await later).toMatchObject({ lease_granted: false, lease_holder_label: 'Batch browser' });
    expect(line.stats.behindLock).toBe(1);
  });

  it('answers a batch at once while a claim or a settle holds one of its rows: those check-ins wait apart', async () => {
    const [lockedAccount, lockedStep, free] = await Promise.all([sender(), sender(), sender()]);
    const browsers = new Map([lockedAccount, lockedStep, free].map((s) => [s.accountId, randomUUID()]));
    const line = new CheckInLine(stack.sql, 1, 64);
    const checkIn = (s: typeof free, extra: object = {}) =>
      line.submit(s.accountId, { ...input(s.token, browsers.get(s.accountId)), ...extra }, new Date());
    await Promise.all([lockedAccount, lockedStep, free].map((s) => checkIn(s)));
    const step = (
      await stack.app.inject({
        method: 'POST',
        url: '/pnet/steps/',
        headers: withKey(paid.apiKey),
        payload: { account_id: lockedStep.accountId, params: { kind: 'check_inbox' }, test: true },
      })
    ).json();

    // Another transaction holds one account's row (as a claim does) and one step's row (as a settle does).
    const release = await holdRows(async (tx) => {
      await tx`select 1 from pnet_accounts where id = ${lockedAccount.accountId} for update`;
      await tx`select 1 from browser_steps where id = ${step.id} for update`;
    });
    const waiting = [
      checkIn(lockedAccount),
      checkIn(lockedStep, { running: { action_id: step.id, claimed_at: new Date().toISOString() } }),
    ];
    let waited = 0;
    for (const w of waiting) void w.then(() => (waited += 1));
    const answered = await Promise.race([checkIn(free), sleep(5000).then(() => 'held up')]);
    expect(answered).toMatchObject({ lease_granted: true });
    expect(waited).toBe(0);
    expect(line.stats.behindLock).toBe(2);

    await release();
    const [account, named] = await Promise.all(waiting);
    expect(account).toMatchObject({ lease_granted: true, running_claim: null });
    // The step was never claimed: the claim named is not current.
    expect(named).toMatchObject({ lease_granted: true, running_claim: 'lost' });
  });

  it('fails a bad check-in alone: its batch runs again one check-in at a time', async () => {
    const senders = await Promise.all(Array.from({ length: 4 }, () => sender()));
    const line = new CheckInLine(stack.sql, 1, 64);
    const first = line.submit(senders[0]!.accountId, input(senders[0]!.token), new Date());
    // Past the route's schema, as a bug could pass it: a browser id that is no uuid.
    const bad = line.submit(senders[1]!.accountId, input(senders[1]!.token, 'not-a-uuid'), new Date());
    const lastBrowser = randomUUID();
    const rest = [
      line.submit(senders[2]!.accountId, input(senders[2]!.token), new Date()),
      line.submit(senders[3]!.accountId, input(senders[3]!.token, lastBrowser), new Date()),
    ];
    await expect(bad).rejects.toThrow(/uuid/);
    for (const state of await Promise.all([first, ...rest])) expect(state).toMatchObject({ lease_granted: true });
    expect(line.stats.split).toBe(1);
    // A token that no longer opens its account answers null in a batch too, and writes nothing.
    const stale = line.submit(senders[2]!.accountId, input(`opc_${'y'.repeat(43)}`), new Date());
    const fine = line.submit(senders[3]!.accountId, input(senders[3]!.token, lastBrowser), new Date());
    expect(await stale).toBeNull();
    expect(await fine).toMatchObject({ lease_granted: true });
  });
});
