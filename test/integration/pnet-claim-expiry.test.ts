/** Claim leases on the time-skipping server: a silent browser's claim lapses; check-ins keep it. */
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { holdStepCredits, type StepRow } from '../../store/pnet/steps.js';
import { startOptions } from '../../services/pnet/browser-step-client.js';
import { claimLeaseSeconds } from '../../domain/pnet/timing.js';
import { holdAtCheckpoint } from '../../store/pnet/sender-account.js';
import { senderAccountWorkflow } from '../../workflows/pnet/sender-account.js';
import { accountChangedSignal, senderAccountStateQuery } from '../../workflows/pnet/sender-account.contract.js';
import { browserStepWorkflow } from '../../workflows/pnet/browser-step.js';
import { browserStepStateQuery } from '../../workflows/pnet/browser-step.contract.js';
import { stepSignalSweeperWorkflow } from '../../workflows/pnet/step-signals.js';
import { stepSignalSweeperWorkflowId } from '../../workflows/pnet/step-signals.contract.js';
import {
  claimAndTell,
  newSenderProfile,
  senderAccount,
  settleAndTell,
  useStepTimeSkippingWorker,
} from '../support/pnet.js';
import { claimStep } from '../../services/pnet/step-transitions.js';
import { useTestStack } from '../support/test-stack.js';

const { stack, paid } = useTestStack();
const taskQueue = 'claim-expiry-test';
// The time-skipping server has no custom search attributes: steps start without them here.
const temporal = useStepTimeSkippingWorker(stack, taskQueue);
let env: TestWorkflowEnvironment;
beforeAll(() => void ({ env } = temporal));

/** A connected account with a session, and a claimed step of the given kind. */
async function claimedStep(kind: 'check_inbox' | 'send_message', resume = false, { told = true } = {}) {
  const profileId = await newSenderProfile(stack, paid);
  const [account] = await stack.sql<{ id: string }[]>`
    update pnet_accounts set status = 'connected', connected_at = now(), member_urn = ${randomUUID()}, resume_enabled = ${resume},
      working_hours = ${stack.sql.json({ start: '00:00', end: '00:00', days: [1, 2, 3, 4, 5, 6, 7] })}
    where sender_profile_id = ${profileId} returning id`;
  const [session] = await stack.sql<{ id: string }[]>`
    insert into pnet_sessions (account_id, browser_id, browser_label, extension_version) values (${account!.id}, gen_random_uuid(), 'B', '1') returning id`;
  const params = kind === 'check_inbox' ? { kind } : { kind, profile_url: 'https://pnet.example/in/x', body: 'Hi' };
  const [step] = await stack.sql<StepRow[]>`
    insert into browser_steps (workspace_id, account_id, kind, params, status, queued_at)
    values (${paid.workspaceId}, ${account!.id}, ${kind}, ${stack.sql.json(params)}, 'queued', now()) returning *`;
  await stack.sql.begin((tx) => holdStepCredits(tx, step!));
  const handle = await env.client.workflow.start(browserStepWorkflow, {
    taskQueue,
    workflowId: `browser-step/${step!.id}`,
    args: [{ stepId: step!.id, workspaceId: paid.workspaceId, accountId: account!.id, kind, status: 'queued' }],
  });
  const claim = { stepId: step!.id, accountId: account!.id, sessionId: session!.id, verifyFirst: false };
  // Unless told, the claim is committed and its workflow never signalled (the API died in between).
  const claimed = told
    ? await claimAndTell(stack.sql, env, handle, claim)
    : await claimStep(stack.sql, { ...claim, now: new Date(await env.currentTimeMs()).toISOString() });
  return {
    handle,
    stepId: step!.id,
    accountId: account!.id,
    sessionId: session!.id,
    claimedAt: claimed.step.claimed_at!,
  };
}

const stepRow = async (id: string) =>
  (
    await stack.sql<
      { status: string; error_code: string | null }[]
    >`select status, error_code from browser_steps where id = ${id}`
  )[0]!;
const usedUnits = async (accountId: string) =>
  (
    await stack.sql<
      { used: number }[]
    >`select coalesce(sum(used), 0)::int as used from pnet_usage where account_id = ${accountId}`
  )[0]!.used;
const openHolds = async () =>
  (
    await stack.sql<
      { held: number }[]
    >`select coalesce(sum(amount), 0)::int as held from credit_holds where workspace_id = ${paid.workspaceId} and status = 'held'`
  )[0]!.held;

describe('claim expiry', () => {
  it('puts a housekeeping read whose browser went silent back in line, returning its unit', async () => {
    const { handle, stepId, accountId } = await claimedStep('check_inbox');
    expect(await usedUnits(accountId)).toBe(1);
    await env.sleep(`${claimLeaseSeconds + 5} seconds`);
    expect(await handle.query(browserStepStateQuery)).toMatchObject({ status: 'queued', claims: 1 });
    expect(await stepRow(stepId)).toEqual({ status: 'queued', error_code: null });
    expect(await usedUnits(accountId)).toBe(0);
  });

  it('fails a step that may have acted with claim_expired, keeping the unit it may have used and returning its credits', async () => {
    const heldBefore = await openHolds();
    const { handle, stepId, accountId } = await claimedStep('send_message');
    expect(await openHolds()).toBe(heldBefore + 2);
    await env.sleep(`${claimLeaseSeconds + 5} seconds`);
    expect(await stepRow(stepId)).toEqual({ status: 'failed', error_code: 'claim_expired' });
    expect(await usedUnits(accountId)).toBe(1);
    expect(await openHolds()).toBe(heldBefore);
    expect(await handle.result()).toMatchObject({ status: 'failed' });
  });

  it('keeps a claim whose running browser checks in', async () => {
    const { stepId, claimedAt } = await claimedStep('send_message');
    for (let i = 0; i < 4; i += 1) {
      await env.sleep(`${claimLeaseSeconds - 30} seconds`);
      // What a check-in naming the claim writes, at the test server's (skipped) time.
      await stack.sql`update browser_steps set lease_renewed_at = ${new Date(await env.currentTimeMs())}
        where id = ${stepId} and status = 'claimed' and claimed_at = ${claimedAt}`;
    }
    expect(await stepRow(stepId)).toEqual({ status: 'claimed', error_code: null });
    await env.sleep(`${claimLeaseSeconds + 5} seconds`);
    expect(await stepRow(stepId)).toEqual({ status: 'failed', error_code: 'claim_expired' });
  });
});

describe('claim expiry with resume on', () => {
  it('puts a cut-off step back as resuming for a verifying browser, and the third cut-off ends it', async () => {
    const heldBefore = await openHolds();
    const { handle, stepId, sessionId, accountId } = await claimedStep('send_message', true);
    expect(await openHolds()).toBe(heldBefore + 2);
    for (const cutOff of [1, 2]) {
      await env.sleep(`${claimLeaseSeconds + 5} seconds`);
      expect(await stepRow(stepId)).toEqual({ status: 'resuming', error_code: null });
      // The hold stays: the step may still succeed.
      expect(await openHolds()).toBe(heldBefore + 2);
      await stack.sql`update pnet_accounts set next_metered_at = null`;
      const claim = { stepId, accountId, sessionId };
      // A resuming step goes only to a browser that looks first.
      await expect(
        claimStep(stack.sql, { ...claim, verifyFirst: false, now: new Date(await env.currentTimeMs()).toISOString() }),
      ).rejects.toThrow();
      const again = await claimAndTell(stack.sql, env, handle, { ...claim, verifyFirst: true });
      expect(again.verification).toEqual({ mode: 'verify_then_act', commit_granted_at: null });
      expect(await handle.query(browserStepStateQuery)).toMatchObject({ status: 'claimed', claims: cutOff + 1 });
    }
    await env.sleep(`${claimLeaseSeconds + 5} seconds`);
    expect(await stepRow(stepId)).toEqual({ status: 'failed', error_code: 'interrupted_repeatedly' });
    expect(await openHolds()).toBe(heldBefore);
    expect(await handle.result()).toMatchObject({ status: 'failed', claims: 3 });
  });
});

describe('a late success for a step whose claim lapsed', () => {
  it('counts the unit of a resuming step once: it kept its unit when the claim lapsed', async () => {
    const { handle, stepId, accountId, claimedAt } = await claimedStep('send_message', true);
    expect(await usedUnits(accountId)).toBe(1);
    await env.sleep(`${claimLeaseSeconds + 5} seconds`);
    expect(await stepRow(stepId)).toEqual({ status: 'resuming', error_code: null });
    const late = {
      status: 'succeeded' as const,
      claimed_at: claimedAt,
      duration_ms: 1,
      error_code: null,
      error_message: null,
      outcome: null,
    };
    expect((await settleAndTell(stack.sql, handle, stepId, late)).step).toMatchObject({ status: 'succeeded' });
    expect(await usedUnits(accountId)).toBe(1);
  });

  it('counts a requeued read again when it turns out to have run, and refuses its late failure', async () => {
    const { handle, stepId, accountId, claimedAt } = await claimedStep('check_inbox');
    await env.sleep(`${claimLeaseSeconds + 5} seconds`);
    expect(await stepRow(stepId)).toEqual({ status: 'queued', error_code: null });
    expect(await usedUnits(accountId)).toBe(0);
    const late = { claimed_at: claimedAt, duration_ms: 1, error_message: null, outcome: null };
    await expect(
      settleAndTell(stack.sql, handle, stepId, { ...late, status: 'failed', error_code: 'timed_out' }),
    ).rejects.toThrow();
    expect(await stepRow(stepId)).toEqual({ status: 'queued', error_code: null });
    await settleAndTell(stack.sql, handle, stepId, { ...late, status: 'succeeded', error_code: null });
    expect(await stepRow(stepId)).toEqual({ status: 'succeeded', error_code: null });
    expect(await usedUnits(accountId)).toBe(1);
  });
});

describe('the sender-account workflow', () => {
  async function connectedAccount() {
    const profileId = await newSenderProfile(stack, paid);
    const [account] = await stack.sql<{ id: string }[]>`
      update pnet_accounts set status = 'connected', connected_at = now(), member_urn = ${randomUUID()}
      where sender_profile_id = ${profileId} returning id`;
    const handle = await env.client.workflow.start(senderAccountWorkflow, {
      taskQueue,
      workflowId: `sender-account/${account!.id}`,
      args: [{ accountId: account!.id, workspaceId: paid.workspaceId }],
    });
    return { accountId: account!.id, handle };
  }
  const reads = async (accountId: string) =>
    stack.sql<{ id: string; kind: string; status: string }[]>`
      select id, kind, status from browser_steps where account_id = ${accountId} order by created_at, kind`;

  it('schedules the housekeeping reads, one waiting read of a kind at a time, each with its workflow', async () => {
    const { accountId, handle } = await connectedAccount();
    await env.sleep('1 second');
    const first = await reads(accountId);
    expect(first.map((r) => r.kind).sort()).toEqual(['check_connections', 'check_inbox', 'check_sent_invitations']);
    for (const read of first) {
      const described = await env.client.workflow.getHandle(`browser-step/${read.id}`).describe();
      expect(described.status.name).toBe('RUNNING');
    }
    // Half an hour on, the inbox read is still waiting: no second one is queued beside it.
    await env.sleep('31 minutes');
    expect(await reads(accountId)).toHaveLength(3);
    const inbox = first.find((r) => r.kind === 'check_inbox')!;
    await stack.sql`update browser_steps set status = 'succeeded', finished_at = now() where id = ${inbox.id}`;
    await env.sleep('31 minutes');
    const after = await reads(accountId);
    expect(after.filter((r) => r.kind === 'check_inbox')).toHaveLength(2);
    const clock = await handle.query(senderAccountStateQuery);
    expect(clock?.connected).toBe(true);
    await handle.terminate();
  });

  it('tries a failed inbox read again after five minutes, not half an hour: messages wait on it', async () => {
    const { accountId, handle } = await connectedAccount();
    await env.sleep('1 second');
    const inbox = (await reads(accountId)).find((r) => r.kind === 'check_inbox')!;
    // What settling the read failed writes, then the wake the result route sends.
    await stack.sql`update browser_steps set status = 'failed', error_code = 'timed_out', finished_at = now() where id = ${inbox.id}`;
    await stack.sql`update pnet_accounts set replies_failing = true where id = ${accountId}`;
    await handle.signal(accountChangedSignal);
    await env.sleep('6 minutes');
    expect((await reads(accountId)).filter((r) => r.kind === 'check_inbox')).toHaveLength(2);
    await handle.terminate();
  });

  it('ends a checkpoint back-off after an hour on its own', async () => {
    const { accountId, handle } = await connectedAccount();
    // The back-off is measured on the workflow's clock, which earlier skips moved ahead: set in
    // the same transaction, so no tick of the account's workflow sees the real clock's end, long
    // past on its own.
    const until = new Date((await env.currentTimeMs()) + 3_600_000);
    await stack.sql.begin(async (tx) => {
      await holdAtCheckpoint(tx, accountId);
      await tx`update pnet_accounts set checkpoint_until = ${until} where id = ${accountId}`;
    });
    await handle.signal(accountChangedSignal);
    await env.sleep('30 minutes');
    const status = async () =>
      (
        await stack.sql<
          { checkpoint_status: string }[]
        >`select checkpoint_status from pnet_accounts where id = ${accountId}`
      )[0]!.checkpoint_status;
    expect(await status()).toBe('checkpoint');
    await env.sleep('31 minutes');
    expect(await status()).toBe('ok');
    await handle.terminate();
  });
});

describe('a deadline', () => {
  it('fails a step still waiting at run_before with missed_window and returns its credits', async () => {
    const heldBefore = await openHolds();
    const { accountId } = await senderAccount(stack, paid);
    const runBefore = new Date((await env.currentTimeMs()) + 3_600_000);
    const [step] = await stack.sql<StepRow[]>`
      insert into browser_steps (workspace_id, account_id, kind, params, status, queued_at, run_before)
      values (${paid.workspaceId}, ${accountId}, 'follow_contact', ${stack.sql.json({ kind: 'follow_contact', profile_url: 'https://pnet.example/in/x' })},
              'queued', now(), ${runBefore}) returning *`;
    await stack.sql.begin((tx) => holdStepCredits(tx, step!));
    const handle = await env.client.workflow.start(browserStepWorkflow, {
      ...startOptions(taskQueue, step!),
      typedSearchAttributes: [],
    });
    await env.sleep('59 minutes');
    expect(await stepRow(step!.id)).toEqual({ status: 'queued', error_code: null });
    await env.sleep('2 minutes');
    expect(await stepRow(step!.id)).toEqual({ status: 'failed', error_code: 'missed_window' });
    expect(await openHolds()).toBe(heldBefore);
    expect(await handle.result()).toMatchObject({ status: 'failed' });
  });
});

// Last in the file: the sweeper runs on from here (terminating it with its activity in hand leaves
// the test server's time skipping locked), and a sweeper running every 5 s would slow every long
// skip of the tests above.
describe('the step-signal sweeper', () => {
  // No grace: the grace of a lost signal is counted from Postgres's clock, which a skip does not move.
  beforeAll(async () => {
    await env.client.workflow.start(stepSignalSweeperWorkflow, {
      taskQueue,
      workflowId: stepSignalSweeperWorkflowId(taskQueue),
      args: [{ graceSeconds: 0, everySeconds: 5 }],
    });
  });

  it('lapses a claim whose signal was lost (the API died between its commit and the signal) on time: its workflow, signalled again, times the lease from the claim', async () => {
    const { handle, stepId, accountId } = await claimedStep('check_inbox', false, { told: false });
    expect(await handle.query(browserStepStateQuery)).toMatchObject({ status: 'queued', claims: 0 });
    expect(await usedUnits(accountId)).toBe(1);
    await env.sleep(`${claimLeaseSeconds + 2} seconds`);
    // The read went back in line (a housekeeping read acted on nothing), its unit returned, and
    // the workflow saw the claim (so the signal, not the sweeper's lapse, brought it there).
    expect(await stepRow(stepId)).toEqual({ status: 'queued', error_code: null });
    expect(await handle.query(browserStepStateQuery)).toMatchObject({ status: 'queued', claims: 1 });
    expect(await usedUnits(accountId)).toBe(0);
  });

  it('lapses a claim whose lease timer is late (its worker busy or down) at its next turn after the lease, in SQL, and tells its workflow', async () => {
    const heldBefore = await openHolds();
    const { handle, stepId, accountId } = await claimedStep('send_message', false, { told: false });
    // The change counts as read: only the lease's end, not a lost signal, can bring the sweeper here.
    await stack.sql`update browser_steps set signal_due_at = null where id = ${stepId}`;
    // Not before the lease has ended.
    await env.sleep(`${claimLeaseSeconds - 1} seconds`);
    expect(await stepRow(stepId)).toEqual({ status: 'claimed', error_code: null });
    await env.sleep('10 seconds');
    // Lapsed as its own timer would: it may have acted, so it fails, keeping its unit and returning its credits.
    expect(await stepRow(stepId)).toEqual({ status: 'failed', error_code: 'claim_expired' });
    expect(await usedUnits(accountId)).toBe(1);
    expect(await openHolds()).toBe(heldBefore);
    // The workflow was told and ends with the step, never having seen the claim.
    expect(await handle.result()).toMatchObject({ status: 'failed', claims: 0 });
  });
});
