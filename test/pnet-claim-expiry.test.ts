/** Claim leases on the time-skipping server: a silent browser's claim lapses; check-ins keep it. */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { createActivities } from '../activities/index.js';
import { claimLeaseSeconds } from '../domain/pnet.js';
import { browserStepStateQuery, browserStepWorkflow, claimRenewedSignal, claimStepUpdate } from '../workflows/browser-step.js';
import { useTimeSkippingWorker } from './support/time-skipping.js';
import { useStackWithWorkspaces, withKey, type TestStack, type TestWorkspace } from './support/test-stack.js';

const ctx = useStackWithWorkspaces();
const taskQueue = 'claim-expiry-test';
const temporal = useTimeSkippingWorker(taskQueue, () => createActivities({ sql: ctx.stack.sql }));
let stack: TestStack;
let paid: TestWorkspace;
let env: TestWorkflowEnvironment;
beforeAll(() => void ({ stack, paid } = ctx, { env } = temporal));

/** A connected account with a session, and a claimed step of the given kind. */
async function claimedStep(kind: 'check_inbox' | 'send_message') {
  const profile = (
    await stack.app.inject({ method: 'POST', url: '/sender-profiles/', headers: withKey(paid.apiKey), payload: { name: `S ${randomUUID()}` } })
  ).json();
  const [account] = await stack.sql<{ id: string }[]>`
    update pnet_accounts set status = 'connected', connected_at = now(), member_urn = ${randomUUID()},
      working_hours = ${stack.sql.json({ start: '00:00', end: '00:00', days: [1, 2, 3, 4, 5, 6, 7] })}
    where sender_profile_id = ${profile.id} returning id`;
  const [session] = await stack.sql<{ id: string }[]>`
    insert into pnet_sessions (account_id, browser_id, browser_label, extension_version) values (${account!.id}, gen_random_uuid(), 'B', '1') returning id`;
  const params = kind === 'check_inbox' ? { kind } : { kind, profile_url: 'https://pnet.example/in/x', body: 'Hi' };
  const [step] = await stack.sql<{ id: string }[]>`
    insert into browser_steps (workspace_id, account_id, kind, params, status, queued_at)
    values (${paid.workspaceId}, ${account!.id}, ${kind}, ${stack.sql.json(params)}, 'queued', now()) returning id`;
  const handle = await env.client.workflow.start(browserStepWorkflow, {
    taskQueue,
    workflowId: `browser-step/${step!.id}`,
    args: [{ stepId: step!.id, workspaceId: paid.workspaceId, accountId: account!.id, kind, status: 'queued' }],
  });
  const claimed = await handle.executeUpdate(claimStepUpdate, { args: [{ sessionId: session!.id, verifyFirst: false }] });
  return { handle, stepId: step!.id, accountId: account!.id, claimedAt: claimed.step.claimed_at! };
}

const stepRow = async (id: string) =>
  (await stack.sql<{ status: string; error_code: string | null }[]>`select status, error_code from browser_steps where id = ${id}`)[0]!;
const usedUnits = async (accountId: string) =>
  (await stack.sql<{ used: number }[]>`select coalesce(sum(used), 0)::int as used from pnet_usage where account_id = ${accountId}`)[0]!.used;

describe('claim expiry', () => {
  it('puts a housekeeping read whose browser went silent back in line, returning its unit', async () => {
    const { handle, stepId, accountId } = await claimedStep('check_inbox');
    expect(await usedUnits(accountId)).toBe(1);
    await env.sleep(`${claimLeaseSeconds + 5} seconds`);
    expect(await handle.query(browserStepStateQuery)).toMatchObject({ status: 'queued', claims: 1 });
    expect(await stepRow(stepId)).toEqual({ status: 'queued', error_code: null });
    expect(await usedUnits(accountId)).toBe(0);
  });

  it('fails a step that may have acted with claim_expired, keeping the unit it may have used', async () => {
    const { handle, stepId, accountId } = await claimedStep('send_message');
    await env.sleep(`${claimLeaseSeconds + 5} seconds`);
    expect(await stepRow(stepId)).toEqual({ status: 'failed', error_code: 'claim_expired' });
    expect(await usedUnits(accountId)).toBe(1);
    expect(await handle.result()).toMatchObject({ status: 'failed' });
  });

  it('keeps a claim whose running browser checks in', async () => {
    const { handle, stepId, claimedAt } = await claimedStep('send_message');
    for (let i = 0; i < 4; i += 1) {
      await env.sleep(`${claimLeaseSeconds - 30} seconds`);
      await handle.signal(claimRenewedSignal, { claimedAt });
    }
    expect(await stepRow(stepId)).toEqual({ status: 'claimed', error_code: null });
    await env.sleep(`${claimLeaseSeconds + 5} seconds`);
    expect(await stepRow(stepId)).toEqual({ status: 'failed', error_code: 'claim_expired' });
  });
});
