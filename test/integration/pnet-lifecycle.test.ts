/**
 * The rest of a step's life through the real API, worker and Temporal: its credit hold, holds by
 * paused contact or sequence, the commit grant and verify-first hand-out, attempts, running waits,
 * the config, and the account's own checks (replies, connections, checkpoint).
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { getBalance } from '../../store/platform/credits.js';
import { configVersion } from '../../domain/pnet/agent.js';
import { stepPrices } from '../../domain/pnet/limits.js';
import { grantWorkspaceCredits } from '../../worker/provisioning.js';
import { connectedAccount as connected, until } from '../support/pnet.js';
import { useTestStack, withKey, withToken, type TestWorkspace } from '../support/test-stack.js';

const { stack, paid } = useTestStack();

const url = 'https://pnet.example/in/ada-lovelace';
const message = { kind: 'send_message', profile_url: url, body: 'Hello' };
const follow = { kind: 'follow_contact', profile_url: url };

/** A workspace holding exactly `credits`, with a connected account. */
async function fundedAccount(credits: number, settings: object = {}) {
  const ws = await stack.createWorkspace('paid');
  if (credits > 0)
    await grantWorkspaceCredits(stack.sql, { workspaceId: ws.workspaceId, amount: credits, causeKey: 'test' });
  return { ws, a: await connected(stack, ws, settings), balance: () => getBalance(stack.sql, ws.workspaceId) };
}

const api = (ws: TestWorkspace, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) =>
  stack.app.inject({ method, url, headers: withKey(ws.apiKey), ...(payload ? { payload } : {}) });

/** Lets the next metered step go at once (the gap is covered by the claims tests). */
const skipGap = (accountId: string) =>
  stack.sql`update pnet_accounts set next_metered_at = null where id = ${accountId}`;

describe('credits on steps', () => {
  it('holds the price when queued, charges it once on success however often the result is posted', async () => {
    const { a, balance } = await fundedAccount(10);
    const step = await a.queue(message);
    expect(await balance()).toEqual({
      available: 10 - stepPrices.send_message,
      held: stepPrices.send_message,
      spent: 0,
    });
    const claimed = (await a.claim()).json().step;
    const results = await Promise.all(
      [1, 2, 3].map(() => a.report(step.id, { status: 'succeeded', claimed_at: claimed.claimed_at })),
    );
    expect(results.map((r) => r.statusCode)).toEqual([200, 200, 200]);
    expect(await balance()).toEqual({
      available: 10 - stepPrices.send_message,
      held: 0,
      spent: stepPrices.send_message,
    });
  });

  it('returns the hold on failed, skipped and cancelled, and a retry holds again', async () => {
    const { ws, a, balance } = await fundedAccount(10);
    const failing = await a.queue(follow);
    const skipping = await a.queue({ kind: 'like_latest_post', profile_url: url });
    const cancelled = await a.queue(message);
    expect((await balance()).held).toBe(
      stepPrices.follow_contact + stepPrices.like_latest_post + stepPrices.send_message,
    );
    let claimed = (await a.claim()).json().step;
    await a.report(failing.id, { status: 'failed', claimed_at: claimed.claimed_at, error_code: 'selector_missing' });
    await skipGap(a.accountId);
    claimed = (await a.claim()).json().step;
    await a.report(skipping.id, { status: 'skipped', claimed_at: claimed.claimed_at, error_code: 'not_applicable' });
    expect((await api(ws, 'POST', `/pnet/steps/${cancelled.id}/cancel/`)).statusCode).toBe(200);
    expect(await balance()).toEqual({ available: 10, held: 0, spent: 0 });
    const retried = await api(ws, 'POST', `/pnet/steps/${failing.id}/retry/`);
    expect(retried.json().status).toBe('queued');
    expect(await balance()).toEqual({
      available: 10 - stepPrices.follow_contact,
      held: stepPrices.follow_contact,
      spent: 0,
    });
  });

  it('refuses to queue a step the workspace cannot pay for, writing nothing; free reads need no credits', async () => {
    const { ws, a, balance } = await fundedAccount(1);
    const refused = await api(ws, 'POST', '/pnet/steps/', { account_id: a.accountId, params: message });
    expect(refused.statusCode).toBe(409);
    expect(refused.json().detail).toMatch(/needs 2 credits.*1 available/);
    expect((await api(ws, 'GET', '/pnet/steps/')).json().steps).toEqual([]);
    expect(await balance()).toEqual({ available: 1, held: 0, spent: 0 });
    expect(
      (await api(ws, 'POST', '/pnet/steps/', { account_id: a.accountId, params: { kind: 'check_inbox' } })).statusCode,
    ).toBe(201);
  });

  it('holds a manual step only when a person approves it', async () => {
    const { ws, a, balance } = await fundedAccount(5, { run_mode: 'manual' });
    const task = await a.queue(message);
    expect(await balance()).toEqual({ available: 5, held: 0, spent: 0 });
    expect((await api(ws, 'POST', `/pnet/tasks/${task.id}/approve/`)).statusCode).toBe(200);
    expect(await balance()).toEqual({ available: 3, held: 2, spent: 0 });
  });
});

describe('holds by paused contact or sequence', () => {
  it('keeps a paused contact’s steps out of the line until it resumes, new ones included', async () => {
    const a = await connected(stack, paid);
    const contact = `contact-${randomUUID()}`;
    const first = await a.queue({ kind: 'check_inbox' }, { contact_key: contact });
    const created = await api(paid, 'POST', '/pnet/holds/', { contact_key: contact, reason: 'Out of office' });
    expect(created.statusCode).toBe(201);
    expect(created.json()).toMatchObject({
      contact_key: contact,
      sequence_id: null,
      reason: 'Out of office',
      held_steps: 1,
    });
    // Pausing again answers the same hold.
    const again = await api(paid, 'POST', '/pnet/holds/', { contact_key: contact });
    expect(again.statusCode).toBe(200);
    expect(again.json().id).toBe(created.json().id);
    const later = await a.queue({ kind: 'check_connections' }, { contact_key: contact });
    expect(later.held).toBe(true);
    const state = (await a.heartbeat()).json();
    expect(state.queued_count).toBe(0);
    expect((await a.claim()).json()).toMatchObject({ step: null });
    const listed = (await api(paid, 'GET', `/pnet/steps/?held=true&account_id=${a.accountId}`)).json().steps;
    expect(listed.map((s: { id: string }) => s.id).sort()).toEqual([first.id, later.id].sort());
    const resumed = await api(paid, 'DELETE', `/pnet/holds/${created.json().id}/`);
    expect(resumed.json()).toEqual({ resumed_steps: 2 });
    expect((await a.claim()).json().step).toMatchObject({ id: first.id });
    expect((await api(paid, 'DELETE', `/pnet/holds/${created.json().id}/`)).statusCode).toBe(404);
  });

  it('keeps a step held while another hold still covers it, and hides held tasks from the Tasks page', async () => {
    const a = await connected(stack, paid, { run_mode: 'manual' });
    const contact = `contact-${randomUUID()}`;
    const sequence = randomUUID();
    const task = await a.queue({ kind: 'check_inbox' }, { contact_key: contact, sequence_id: sequence });
    const bySequence = (await api(paid, 'POST', '/pnet/holds/', { sequence_id: sequence })).json();
    const byContact = (await api(paid, 'POST', '/pnet/holds/', { contact_key: contact })).json();
    const tasks = () => api(paid, 'GET', '/pnet/tasks/').then((r) => r.json().tasks.map((t: { id: string }) => t.id));
    expect(await tasks()).not.toContain(task.id);
    expect((await api(paid, 'DELETE', `/pnet/holds/${bySequence.id}/`)).json()).toEqual({ resumed_steps: 0 });
    expect(await tasks()).not.toContain(task.id);
    expect((await api(paid, 'DELETE', `/pnet/holds/${byContact.id}/`)).json()).toEqual({ resumed_steps: 1 });
    expect(await tasks()).toContain(task.id);
  });

  it('refuses a hold naming both or neither', async () => {
    expect((await api(paid, 'POST', '/pnet/holds/', { contact_key: 'x', sequence_id: randomUUID() })).statusCode).toBe(
      422,
    );
    expect((await api(paid, 'POST', '/pnet/holds/', { reason: 'nothing named' })).statusCode).toBe(422);
  });
});

describe('commit grant and verify-first', () => {
  it('grants the commit under the current claim only, and once paused refuses it', async () => {
    const a = await connected(stack, paid);
    const contact = `contact-${randomUUID()}`;
    const step = await a.queue(message, { contact_key: contact });
    const claimed = (await a.claim()).json().step;
    const commit = (claimedAt: string) => a.agent(`/pnet/agent/actions/${step.id}/commit/`, { claimed_at: claimedAt });
    const granted = await commit(claimed.claimed_at);
    expect(granted.statusCode).toBe(200);
    expect((await commit(claimed.claimed_at)).json()).toEqual(granted.json());
    expect((await commit(new Date(Date.parse(claimed.claimed_at) - 1000).toISOString())).statusCode).toBe(409);

    const other = await connected(stack, paid);
    const second = await other.queue(message, { contact_key: contact });
    const secondClaim = (await other.claim()).json().step;
    await api(paid, 'POST', '/pnet/holds/', { contact_key: contact });
    const refused = await other.agent(`/pnet/agent/actions/${second.id}/commit/`, {
      claimed_at: secondClaim.claimed_at,
    });
    expect(refused.statusCode).toBe(409);
    expect(refused.json().detail).toMatch(/paused/);
  });

  it('hands a resuming step out verify_only after a granted commit, verify_then_act without one', async () => {
    const a = await connected(stack, paid);
    const retry = (id: string) => api(paid, 'POST', `/pnet/steps/${id}/retry/`);
    const pressed = await a.queue(message);
    let claimed = (await a.claim()).json().step;
    await a.agent(`/pnet/agent/actions/${pressed.id}/commit/`, { claimed_at: claimed.claimed_at });
    await a.report(pressed.id, { status: 'failed', claimed_at: claimed.claimed_at, error_code: 'tab_lost' });
    expect((await retry(pressed.id)).json().status).toBe('resuming');
    await skipGap(a.accountId);
    let handed = (await a.claim({ verify_first: true })).json();
    expect(handed.step.id).toBe(pressed.id);
    expect(handed.verification).toMatchObject({ mode: 'verify_only' });
    expect(handed.verification.commit_granted_at).not.toBeNull();
    // It looked and the message is not there: the step goes back in line as plain queued work.
    await a.agent(`/pnet/agent/actions/${pressed.id}/release/`, {
      claimed_at: handed.step.claimed_at,
      reason: 'verified_absent',
    });
    await skipGap(a.accountId);
    handed = (await a.claim()).json();
    expect(handed).toMatchObject({ step: { id: pressed.id }, verification: null });
    await a.report(pressed.id, { status: 'failed', claimed_at: handed.step.claimed_at, error_code: 'timed_out' });
    expect((await retry(pressed.id)).json().status).toBe('resuming');
    await skipGap(a.accountId);
    claimed = (await a.claim({ verify_first: true })).json();
    expect(claimed.verification).toEqual({ mode: 'verify_then_act', commit_granted_at: null });
  });
});

describe('attempts, running waits and config', () => {
  it('records attempts once each without counting them against the step', async () => {
    const a = await connected(stack, paid);
    const step = await a.queue(follow);
    const claimed = (await a.claim()).json().step;
    const attempt = { claimed_at: claimed.claimed_at, reason: 'cut_off', detail: 'tab closed' };
    const first = await a.agent(`/pnet/agent/actions/${step.id}/attempts/`, attempt);
    expect(first.statusCode).toBe(200);
    await a.agent(`/pnet/agent/actions/${step.id}/attempts/`, attempt);
    const listed = (await api(paid, 'GET', `/pnet/steps/${step.id}/attempts/`)).json().attempts;
    expect(listed).toEqual([
      expect.objectContaining({ reason: 'cut_off', detail: 'tab closed', claimed_at: claimed.claimed_at }),
    ]);
    expect((await api(paid, 'GET', `/pnet/steps/${step.id}/`)).json().status).toBe('claimed');
    expect(
      (await a.agent(`/pnet/agent/actions/${step.id}/attempts/`, { ...attempt, reason: 'gave_up' })).statusCode,
    ).toBe(422);
  });

  it('renews a running claim on a running-wait report and says lost for a stale one', async () => {
    const a = await connected(stack, paid);
    const step = await a.queue(follow);
    const claimed = (await a.claim()).json().step;
    const wait = (claimedAt: string | null, site = 'profile > more menu') =>
      a.agent(`/pnet/agent/actions/${step.id}/running-wait/`, {
        claimed_at: claimedAt,
        site,
        awake_seconds: 12,
        tab_status: 'complete',
      });
    expect((await wait(claimed.claimed_at)).json()).toEqual({ running_claim: 'renewed' });
    expect((await wait(new Date(0).toISOString())).json()).toEqual({ running_claim: 'lost' });
    expect((await wait(null, 'x'.repeat(200))).statusCode).toBe(200);
    expect((await wait(null, 'x'.repeat(201))).statusCode).toBe(422);
  });

  it('takes a running-wait report with an empty site, any awake time from 0 and a tab status of up to 16 characters', async () => {
    const a = await connected(stack, paid);
    const step = await a.queue(follow);
    const claimed = (await a.claim()).json().step;
    const wait = (report: object) =>
      a.agent(`/pnet/agent/actions/${step.id}/running-wait/`, {
        claimed_at: claimed.claimed_at,
        site: 'profile',
        awake_seconds: 12,
        tab_status: 'complete',
        ...report,
      });
    // Past a day awake is still a wait worth reporting.
    for (const report of [
      { site: '' },
      { awake_seconds: 0 },
      { awake_seconds: 86_401 },
      { tab_status: 's'.repeat(16) },
    ]) {
      const res = await wait(report);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ running_claim: 'renewed' });
    }
    const [row] = await stack.sql<
      { running_wait: Record<string, unknown> }[]
    >`select running_wait from browser_steps where id = ${step.id}`;
    expect(row!.running_wait).toMatchObject({ site: 'profile', awake_seconds: 12, tab_status: 's'.repeat(16) });
    for (const [field, report] of [
      ['awake_seconds', { awake_seconds: -1 }],
      ['tab_status', { tab_status: 's'.repeat(17) }],
    ] as const) {
      const res = await wait(report);
      expect(res.statusCode).toBe(422);
      expect(res.json().issues[0].loc).toEqual(['body', field]);
    }
  });

  it('serves the config at the version every check-in names', async () => {
    const a = await connected(stack, paid);
    const config = (
      await stack.app.inject({
        method: 'GET',
        url: '/pnet/agent/config/',
        headers: { authorization: `Bearer ${a.token}` },
      })
    ).json();
    expect(config.config_version).toBe(configVersion);
    expect((await a.heartbeat()).json().config_version).toBe(config.config_version);
    expect(Object.keys(config.selectors).length).toBeGreaterThan(5);
  });

  it('tells the extension whether attempts and resume are on', async () => {
    const a = await connected(stack, paid, { resume_enabled: true, attempts_enabled: true });
    expect((await a.heartbeat()).json()).toMatchObject({ resume_enabled: true, attempts_enabled: true });
  });
});

describe("the account's own checks", () => {
  const wrapper = async (profileId: string) =>
    (await api(paid, 'GET', `/sender-profiles/${profileId}/pnet/`)).json().account;

  it('holds messages back while the inbox read fails, and lets them go when it reads again', async () => {
    const a = await connected(stack, paid);
    const inbox = await a.queue({ kind: 'check_inbox' }, { test: true });
    let claimed = (await a.claim()).json().step;
    await a.report(inbox.id, { status: 'failed', claimed_at: claimed.claimed_at, error_code: 'navigation_failed' });
    expect((await wrapper(a.profileId)).replies_check).toEqual({ failing: true, last_read_at: null, holding: true });
    const send = await a.queue(message);
    expect((await a.claim()).json()).toMatchObject({ step: null, reason: 'replies_check_failing' });
    // Other kinds are not held back by it.
    const view = await a.queue(follow);
    expect((await a.claim()).json().step.id).toBe(view.id);
    await stack.sql`update browser_steps set status = 'succeeded' where id = ${view.id}`;
    const reread = await a.queue({ kind: 'check_inbox' }, { test: true });
    claimed = (await a.claim()).json().step;
    await a.report(reread.id, { status: 'succeeded', claimed_at: claimed.claimed_at });
    const check = (await wrapper(a.profileId)).replies_check;
    expect(check).toMatchObject({ failing: false, holding: false });
    expect(check.last_read_at).not.toBeNull();
    await skipGap(a.accountId);
    expect((await a.claim()).json().step.id).toBe(send.id);
  });

  it('counts invitations awaiting acceptance, and records a gap when two reads do not overlap', async () => {
    const a = await connected(stack, paid);
    const settle = async (params: object, outcome: object) => {
      const step = await a.queue(params, { test: true });
      const claimed = (await a.claim()).json().step;
      return a.report(step.id, { status: 'succeeded', claimed_at: claimed.claimed_at, outcome });
    };
    await settle({ kind: 'connection_request', profile_url: url }, { member_urn: 'urn:li:member:1' });
    await settle({ kind: 'connection_request', profile_url: url }, { member_urn: 'urn:li:member:2' });
    expect((await wrapper(a.profileId)).connection_checks).toMatchObject({
      awaiting: 2,
      last_checked_at: null,
      gaps: [],
    });
    await settle({ kind: 'check_connections' }, { member_urns: ['urn:li:member:1', 'urn:li:member:9'] });
    let checks = (await wrapper(a.profileId)).connection_checks;
    expect(checks).toMatchObject({ awaiting: 1, supported: true, problem: null, gaps: [] });
    expect(checks.last_checked_at).not.toBeNull();
    await settle({ kind: 'check_connections' }, { member_urns: ['urn:li:member:2', 'urn:li:member:9'] });
    expect((await wrapper(a.profileId)).connection_checks.gaps).toEqual([]);
    await settle({ kind: 'check_connections' }, { member_urns: ['urn:li:member:5'] });
    checks = (await wrapper(a.profileId)).connection_checks;
    expect(checks.awaiting).toBe(0);
    expect(checks.gaps).toEqual([expect.objectContaining({ problem: 'no_overlap' })]);
  });

  it('says an outdated extension cannot read connections', async () => {
    const a = await connected(stack, paid);
    await a.heartbeat({ extension_version: '1.2.0' });
    expect((await wrapper(a.profileId)).connection_checks).toMatchObject({
      supported: false,
      problem: 'extension_outdated',
    });
  });

  it('holds the account at a checkpoint the browser reports', async () => {
    const a = await connected(stack, paid);
    const step = await a.queue(follow);
    const claimed = (await a.claim()).json().step;
    await a.report(step.id, { status: 'failed', claimed_at: claimed.claimed_at, error_code: 'blocked_checkpoint' });
    expect((await a.heartbeat()).json().checkpoint).toBe(true);
    await a.queue({ kind: 'check_inbox' }, { test: true });
    expect((await a.claim()).json()).toMatchObject({ step: null, reason: 'checkpoint' });
    const [account] = await stack.sql<
      { checkpoint_until: Date }[]
    >`select checkpoint_until from pnet_accounts where id = ${a.accountId}`;
    expect(account!.checkpoint_until.getTime() - Date.now()).toBeGreaterThan(55 * 60_000);
  });
});

describe('disconnecting the account', () => {
  it('ends the waiting steps sender_changed with their credits back, and the old token stops working', async () => {
    const { ws, a, balance } = await fundedAccount(10);
    const waiting = await a.queue(message);
    const running = await a.queue({ kind: 'check_inbox' }, { test: true });
    const claimed = (await a.claim()).json().step;
    expect(claimed.id).toBe(running.id);
    const answer = await api(ws, 'POST', `/sender-profiles/${a.profileId}/pnet/disconnect/`);
    expect(answer.statusCode).toBe(200);
    expect(answer.json().connected).toBe(false);
    expect(answer.json().connection_token).not.toBe(a.token);
    expect(answer.json().account).toMatchObject({
      status: 'disconnected',
      member_urn: null,
      display_name: null,
      sessions: [],
    });
    expect((await api(ws, 'GET', `/pnet/steps/${waiting.id}/`)).json()).toMatchObject({
      status: 'failed',
      error_code: 'sender_changed',
    });
    // The running step is the old browser's until it reports or its claim lapses.
    expect((await api(ws, 'GET', `/pnet/steps/${running.id}/`)).json().status).toBe('claimed');
    expect(await balance()).toEqual({ available: 10, held: 0, spent: 0 });
    expect((await a.heartbeat()).statusCode).toBe(401);
    // Its result under the old token is refused too, though the token was resolved (and kept in
    // memory) a moment ago: the settle's own statement checks it. The step stays claimed.
    expect((await a.report(running.id, { status: 'succeeded', claimed_at: claimed.claimed_at })).statusCode).toBe(401);
    expect((await api(ws, 'GET', `/pnet/steps/${running.id}/`)).json().status).toBe('claimed');
    // Another identity connects it again with the new token.
    const identity = { member_urn: `urn:li:member:${randomUUID()}`, display_name: 'Grace H.' };
    const again = await stack.app.inject({
      method: 'POST',
      url: '/pnet/agent/heartbeat/',
      headers: withToken(answer.json().connection_token),
      payload: {
        browser_id: randomUUID(),
        browser_label: 'Firefox',
        extension_version: '2.0.0',
        identity,
        lease_nonce: 'lease-nonce-2',
      },
    });
    expect(again.json()).toMatchObject({ lease_granted: true, account_mismatch: false });
    const wrapper = (await api(ws, 'GET', `/sender-profiles/${a.profileId}/pnet/`)).json();
    expect(wrapper).toMatchObject({
      connected: true,
      account: { status: 'connected', member_urn: identity.member_urn, display_name: 'Grace H.' },
    });
  });
});

describe('retried attempts and lost answers', () => {
  it('answers a claim or a settle retried after it committed with the record, not a refusal', async () => {
    const { claimStep, settleStep } = await import('../../services/pnet/step-transitions.js');
    const a = await connected(stack, paid);
    const step = await a.queue({ kind: 'check_inbox' }, { test: true });
    const [session] = await stack.sql<{ id: string }[]>`select id from pnet_sessions where account_id = ${a.accountId}`;
    const input = { stepId: step.id, accountId: a.accountId, sessionId: session!.id, verifyFirst: false };
    const first = await claimStep(stack.sql, input);
    expect((await claimStep(stack.sql, input)).step).toEqual(first.step);
    const report = {
      status: 'succeeded' as const,
      claimed_at: first.step.claimed_at,
      duration_ms: 10,
      error_code: null,
      error_message: null,
      outcome: null,
    };
    const settled = await settleStep(stack.sql, { stepId: step.id, report });
    expect((await settleStep(stack.sql, { stepId: step.id, report })).step).toEqual(settled.step);
  });

  it('hands a browser its own running claim again, verify_only once it was granted the commit', async () => {
    const a = await connected(stack, paid);
    const step = await a.queue(message);
    const claimed = (await a.claim()).json().step;
    expect((await a.claim()).json()).toMatchObject({
      step: { id: step.id, claimed_at: claimed.claimed_at },
      verification: null,
    });
    const grant = (await a.agent(`/pnet/agent/actions/${step.id}/commit/`, { claimed_at: claimed.claimed_at })).json();
    expect((await a.claim()).json().verification).toEqual({
      mode: 'verify_only',
      commit_granted_at: grant.commit_granted_at,
    });
  });

  it('lets the inbox read through while a failing read holds an unmetered message back', async () => {
    const a = await connected(stack, paid);
    const failed = await a.queue({ kind: 'check_inbox' }, { test: true });
    const claimed = (await a.claim()).json().step;
    await a.report(failed.id, { status: 'failed', claimed_at: claimed.claimed_at, error_code: 'navigation_failed' });
    await a.queue(message, { test: true });
    const reread = await a.queue({ kind: 'check_inbox' }, { test: true });
    expect((await a.claim()).json().step.id).toBe(reread.id);
  });
});

describe("the run of a step's workflow", () => {
  const runOf = async (stepId: string) =>
    (
      await stack.sql<
        { workflow_run_id: string | null }[]
      >`select workflow_run_id from browser_steps where id = ${stepId}`
    )[0]!.workflow_run_id;

  it('records the run its start created, and a wrong or closed run never loses a claim, a result or a retry', async () => {
    const { ws, a } = await fundedAccount(10);
    const step = await a.queue(follow);
    const described = await stack.client.workflow.getHandle(`browser-step/${step.id}`).describe();
    expect(await runOf(step.id)).toBe(described.runId);

    // A run the server does not know (a restored database, say): the claim's signal goes by the workflow id.
    await stack.sql`update browser_steps set workflow_run_id = ${randomUUID()} where id = ${step.id}`;
    const claimed = (await a.claim()).json().step;
    expect(claimed).toMatchObject({ id: step.id, status: 'claimed' });
    await until('the signal went by the workflow id', async () => (await runOf(step.id)) === null);
    const unread = async () =>
      (await stack.sql`select 1 from browser_steps where id = ${step.id} and signal_due_at is not null`).length > 0;
    await until('the workflow read the claim', async () => !(await unread()));
    await stack.sql`update browser_steps set workflow_run_id = ${described.runId} where id = ${step.id}`;
    const failed = await a.report(step.id, {
      status: 'failed',
      claimed_at: claimed.claimed_at,
      error_code: 'selector_missing',
    });
    expect(failed.json().status).toBe('failed');

    // A failed step's run closes once it reads the result: the retry starts another, and the step goes on in it.
    const first = stack.client.workflow.getHandle(`browser-step/${step.id}`, described.runId);
    await until("the failed step's run closed", async () => (await first.describe()).status.name === 'COMPLETED');
    const retried = await api(ws, 'POST', `/pnet/steps/${step.id}/retry/`);
    expect(retried.json().status).toBe('queued');
    await skipGap(a.accountId);
    const again = (await a.claim()).json().step;
    expect(again).toMatchObject({ id: step.id, status: 'claimed' });
    expect((await a.report(step.id, { status: 'succeeded', claimed_at: again.claimed_at })).json().status).toBe(
      'succeeded',
    );
    const current = await stack.client.workflow.getHandle(`browser-step/${step.id}`).describe();
    expect(current.runId).not.toBe(described.runId);
  });
});
