import { describe, expect, it } from 'vitest';
import { browserStepWorkflowId } from '../../workflows/pnet/browser-step.contract.js';
import { StepErrorCodeKey, StepStatusKey } from '../../workflows/shared/search-attributes.js';
import { grantWorkspaceCredits } from '../../worker/provisioning.js';
import { senderAccount } from '../support/pnet.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid } = useTestStack();

const profileUrl = 'https://pnet.example/in/ada-lovelace';

async function account(runMode: 'manual' | 'automatic') {
  const { accountId } = await senderAccount(stack, paid, {
    name: `Sender ${crypto.randomUUID()}`,
    settings: { run_mode: runMode },
  });
  return accountId;
}

const post = (url: string, payload?: object) =>
  stack.app.inject({ method: 'POST', url, headers: withKey(paid.apiKey), ...(payload ? { payload } : {}) });
const get = (url: string) => stack.app.inject({ method: 'GET', url, headers: withKey(paid.apiKey) });
const queue = (
  accountId: string,
  params: object = { kind: 'profile_view', profile_url: profileUrl },
  extra: object = {},
) => post('/pnet/steps/', { account_id: accountId, params, contact_key: 'seq-1:row-7', ...extra });

describe('queueing steps', () => {
  it('puts a step of a manual account on the Tasks page, and approving queues it', async () => {
    const accountId = await account('manual');
    const queued = await queue(accountId);
    expect(queued.statusCode).toBe(202);
    const task = queued.json();
    expect(task).toMatchObject({
      account_id: accountId,
      kind: 'profile_view',
      contact_key: 'seq-1:row-7',
      held: false,
    });
    expect((await get('/pnet/tasks/')).json().tasks.map((t: { id: string }) => t.id)).toContain(task.id);
    expect((await get('/pnet/steps/')).json().steps.map((s: { id: string }) => s.id)).not.toContain(task.id);
    expect((await get(`/pnet/steps/${task.id}/`)).statusCode).toBe(404);

    const approved = await post(`/pnet/tasks/${task.id}/approve/`);
    expect(approved.statusCode).toBe(200);
    const step = approved.json();
    expect(step).toMatchObject({
      id: task.id,
      status: 'queued',
      metered: true,
      held: false,
      hold: null,
      requires_approval: false,
    });
    expect(step.approved_at).toBe(step.queued_at);
    expect(step.params).toEqual({ kind: 'profile_view', profile_url: profileUrl, read_relationship: false });

    // Approving again is the same request: Temporal answers it from the first (one update id).
    const again = await post(`/pnet/tasks/${task.id}/approve/`);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(step);
    const reject = await post(`/pnet/tasks/${task.id}/reject/`, {});
    expect(reject.statusCode).toBe(409);
    expect(reject.json()).toEqual({ detail: 'The step is queued; it cannot be rejected.' });
    expect((await get('/pnet/tasks/')).json().tasks.map((t: { id: string }) => t.id)).not.toContain(task.id);
  });

  it('queues at once in automatic mode, and a test step is unmetered and skips the Tasks page', async () => {
    const automatic = await account('automatic');
    const res = await queue(automatic, { kind: 'connection_request', profile_url: profileUrl, note: 'Hi Ada' });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ status: 'queued', metered: true, kind: 'connection_request' });
    const manual = await account('manual');
    const test = await queue(manual, { kind: 'check_inbox' }, { test: true });
    expect(test.statusCode).toBe(201);
    expect(test.json()).toMatchObject({ status: 'queued', metered: false });
  });

  it('queues an InMail with a subject of up to 200 characters and a body of up to 8000, and withdrawals and invitation checks', async () => {
    const accountId = await account('automatic');
    const inmail = { kind: 'inmail', profile_url: profileUrl, subject: 's'.repeat(200), body: 'b'.repeat(8000) };
    for (const params of [
      inmail,
      { ...inmail, subject: 's', body: 'b' },
      { kind: 'withdraw_connection_request', profile_url: profileUrl },
      { kind: 'check_sent_invitations' },
    ]) {
      const res = await queue(accountId, params);
      expect(res.statusCode).toBe(201);
      expect(res.json()).toMatchObject({ status: 'queued', kind: params.kind, params });
    }
  });

  it('sets the price aside when queueing, down to the last credit, and refuses a step the credits do not cover with nothing written', async () => {
    const ws = await stack.createWorkspace('paid');
    await grantWorkspaceCredits(stack.sql, { workspaceId: ws.workspaceId, amount: 2, causeKey: 'two-credits' });
    const headers = withKey(ws.apiKey);
    const profile = (
      await stack.app.inject({
        method: 'POST',
        url: '/sender-profiles/',
        headers,
        payload: { name: 'Sender on two credits' },
      })
    ).json();
    await stack.app.inject({
      method: 'PATCH',
      url: `/sender-profiles/${profile.id}/pnet/settings/`,
      headers,
      payload: { run_mode: 'automatic' },
    });
    const [acct] = await stack.sql<
      { id: string }[]
    >`select id from pnet_accounts where sender_profile_id = ${profile.id}`;
    const queueHere = (params: object) =>
      stack.app.inject({
        method: 'POST',
        url: '/pnet/steps/',
        headers,
        payload: { account_id: acct!.id, params, contact_key: 'c-1' },
      });
    const balance = async () => (await stack.app.inject({ method: 'GET', url: '/credits/', headers })).json();

    // A connection request costs 2: exactly the balance.
    const first = await queueHere({ kind: 'connection_request', profile_url: profileUrl });
    expect(first.statusCode).toBe(201);
    expect(await balance()).toMatchObject({ available: 0, held: 2, spent: 0 });
    const [hold] = await stack.sql<{ amount: number; status: string; cause_key: string }[]>`
      select h.amount, h.status, h.cause_key from browser_steps s join credit_holds h on h.id = s.credit_hold_id where s.id = ${first.json().id}`;
    expect(hold).toEqual({ amount: 2, status: 'held', cause_key: `pnet-step:${first.json().id}:0` });

    // A profile view costs 1, one past what is left.
    const refused = await queueHere({ kind: 'profile_view', profile_url: profileUrl });
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toEqual({ detail: 'This needs 1 credits and the workspace has 0 available.' });
    const steps = await stack.sql`select id from browser_steps where workspace_id = ${ws.workspaceId}`;
    expect(steps.map((s) => s.id)).toEqual([first.json().id]);
    expect(await balance()).toMatchObject({ available: 0, held: 2, spent: 0 });
    const ledger =
      await stack.sql`select kind, amount from credit_ledger where workspace_id = ${ws.workspaceId} order by id`;
    expect(ledger).toEqual([
      { kind: 'grant', amount: 2 },
      { kind: 'hold', amount: 2 },
    ]);

    // A free kind needs no credits at all.
    expect((await queueHere({ kind: 'check_inbox' })).statusCode).toBe(201);
  });

  it('refuses params that do not fit the kind, and an account of another workspace', async () => {
    const accountId = await account('automatic');
    const missingUrl = await queue(accountId, { kind: 'profile_view' });
    expect(missingUrl.statusCode).toBe(422);
    expect(missingUrl.json().issues[0].loc).toEqual(['body', 'params.profile_url']);
    expect((await queue(accountId, { kind: 'teleport' })).statusCode).toBe(422);
    expect((await queue(accountId, { kind: 'send_message', profile_url: profileUrl, body: '' })).statusCode).toBe(422);
    for (const [field, params] of [
      ['params.subject', { kind: 'inmail', profile_url: profileUrl, subject: '', body: 'Hello' }],
      ['params.subject', { kind: 'inmail', profile_url: profileUrl, subject: 's'.repeat(201), body: 'Hello' }],
      ['params.body', { kind: 'inmail', profile_url: profileUrl, subject: 'Hello', body: 'b'.repeat(8001) }],
    ] as const) {
      const refused = await queue(accountId, params);
      expect(refused.statusCode).toBe(422);
      expect(refused.json().issues[0].loc).toEqual(['body', field]);
    }
    const other = await stack.createWorkspace('paid');
    const foreign = await stack.app.inject({
      method: 'POST',
      url: '/pnet/steps/',
      headers: withKey(other.apiKey),
      payload: { account_id: accountId, params: { kind: 'check_inbox' } },
    });
    expect(foreign.statusCode).toBe(404);
  });
});

describe('rejecting and cancelling', () => {
  it('rejects a task with a reason of at most 200 characters', async () => {
    const accountId = await account('manual');
    const tooLong = (await queue(accountId)).json();
    const refused = await post(`/pnet/tasks/${tooLong.id}/reject/`, { reason: 'r'.repeat(201) });
    expect(refused.statusCode).toBe(422);
    expect(refused.json().issues[0].loc).toEqual(['body', 'reason']);
    const rejected = await post(`/pnet/tasks/${tooLong.id}/reject/`, { reason: 'r'.repeat(200) });
    expect(rejected.statusCode).toBe(200);
    expect(rejected.json()).toMatchObject({ status: 'rejected', error_message: 'r'.repeat(200), queued_at: null });
    expect((await post(`/pnet/tasks/${tooLong.id}/approve/`)).statusCode).toBe(409);
  });

  it('cancels a queued step, which then reads failed with error_code cancelled; a second cancel is 409', async () => {
    const accountId = await account('automatic');
    const step = (await queue(accountId)).json();
    const cancelled = await post(`/pnet/steps/${step.id}/cancel/`);
    expect(cancelled.statusCode).toBe(200);
    expect(cancelled.json()).toMatchObject({ status: 'failed', error_code: 'cancelled' });
    expect(cancelled.json().finished_at).not.toBeNull();
    expect((await post(`/pnet/steps/${step.id}/cancel/`)).statusCode).toBe(409);
    const failed = (await get(`/pnet/steps/?status=failed&account_id=${accountId}`)).json().steps;
    expect(failed.map((s: { id: string }) => s.id)).toEqual([step.id]);
  });

  it('refuses to cancel a step a browser is running', async () => {
    const accountId = await account('automatic');
    const step = (await queue(accountId)).json();
    await stack.sql`update browser_steps set status = 'claimed', claimed_at = now() where id = ${step.id}`;
    const res = await post(`/pnet/steps/${step.id}/cancel/`);
    expect(res.statusCode).toBe(409);
    expect(res.json().detail).toMatch(/claimed/);
    expect((await get(`/pnet/steps/${step.id}/`)).json().status).toBe('claimed');
  });
});

describe('the browser-step workflow', () => {
  it('answers a retried approve once, and shows the step status to operators', async () => {
    const accountId = await account('manual');
    const task = (await queue(accountId)).json();
    const [a, b] = await Promise.all([
      post(`/pnet/tasks/${task.id}/approve/`),
      post(`/pnet/tasks/${task.id}/approve/`),
    ]);
    expect([a.statusCode, b.statusCode]).toEqual([200, 200]);
    expect(a.json()).toEqual(b.json());
    const handle = stack.client.workflow.getHandle(browserStepWorkflowId(task.id));
    const described = await handle.describe();
    expect(described.typedSearchAttributes.get(StepStatusKey)).toBe('queued');
    expect(described.status.name).toBe('RUNNING');
    await post(`/pnet/steps/${task.id}/cancel/`);
    await handle.result();
    const settled = (await handle.describe()).typedSearchAttributes;
    expect(settled.get(StepStatusKey)).toBe('cancelled');
    expect(settled.get(StepErrorCodeKey)).toBe('cancelled');
  });

  it('starts a lost workflow on the first person-side action (update-with-start)', async () => {
    const accountId = await account('manual');
    const [row] = await stack.sql<{ id: string }[]>`
      insert into browser_steps (workspace_id, account_id, kind, params, status)
      values (${paid.workspaceId}, ${accountId}, 'check_inbox', ${stack.sql.json({ kind: 'check_inbox' })}, 'awaiting_approval')
      returning id`;
    const approved = await post(`/pnet/tasks/${row!.id}/approve/`);
    expect(approved.statusCode).toBe(200);
    expect(approved.json().status).toBe('queued');
  });
});

describe('listing steps', () => {
  it('filters by status, kind, account and held, newest first, with paging', async () => {
    const accountId = await account('automatic');
    const ids: string[] = [];
    for (const params of [{ kind: 'check_inbox' }, { kind: 'check_connections' }, { kind: 'check_inbox' }])
      ids.push((await queue(accountId, params)).json().id);
    await stack.sql`update browser_steps set held = true where id = ${ids[2]!}`;
    const list = async (query: string) => (await get(`/pnet/steps/?account_id=${accountId}&${query}`)).json();
    expect((await list('')).steps.map((s: { id: string }) => s.id)).toEqual([...ids].reverse());
    expect((await list('kind=check_inbox')).steps.map((s: { id: string }) => s.id)).toEqual([ids[2], ids[0]]);
    expect((await list('held=true')).steps.map((s: { id: string }) => s.id)).toEqual([ids[2]]);
    expect((await list('held=false&status=queued')).steps).toHaveLength(2);
    const first = await list('limit=2');
    expect(first.steps).toHaveLength(2);
    const rest = await list(`limit=2&before=${encodeURIComponent(first.next_before)}`);
    expect(rest.steps.map((s: { id: string }) => s.id)).toEqual([ids[0]]);
    expect((await get('/pnet/steps/?status=waiting')).statusCode).toBe(422);
  });
});
