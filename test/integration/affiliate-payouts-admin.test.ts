/**
 * The operator's affiliate payout commands (decision 044): the program pause and each gate, as the
 * settings route then shows them.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createPayPalPayouts } from '../../integrations/payouts/paypal.js';
import { startPayPalPayoutsTwin, type PayPalPayoutsTwin } from '../../sim/paypal-payouts-server.js';
import { insertAffiliate } from '../../store/affiliates/affiliates.js';
import { setOperatorGate, setPayoutEmail, setPayoutProgramPaused } from '../../store/affiliates/payouts.js';
import { runAdmin } from '../support/admin.js';
import { affiliateWithCommission } from '../support/affiliates.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack } = useTestStack({ workspaces: false });
let twin: PayPalPayoutsTwin;
beforeAll(async () => {
  twin = await startPayPalPayoutsTwin();
  stack.integrations.affiliatePayouts.provider = createPayPalPayouts({
    clientId: twin.clientId,
    clientSecret: twin.clientSecret,
    apiBase: twin.url,
  });
});
afterAll(() => twin?.close());

// The service's Temporal and task queue: the stack's worker runs what the command starts.
const admin = (...args: string[]) =>
  runAdmin(args, {
    DATABASE_URL: stack.databaseUrl,
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    TEMPORAL_TASK_QUEUE: stack.taskQueue,
  });
/** The command switching `gate` on for the workspace's affiliate, `extra` its further options. */
const gateOn = (workspaceId: string, gate: string, ...extra: string[]) =>
  admin('affiliate-gate', '--workspace', workspaceId, '--gate', gate, '--on', 'true', ...extra);

describe('affiliate payout admin commands', () => {
  it('pause the program and block, as the settings route then says; refuse a workspace not enrolled', async () => {
    const ws = await stack.createWorkspace('paid');
    const settings = async () =>
      (
        await stack.app.inject({ method: 'GET', url: '/affiliate/payout-settings/', headers: withKey(ws.apiKey) })
      ).json();

    const notEnrolled = await gateOn(ws.workspaceId, 'blocked');
    expect(notEnrolled.code).toBe(1);
    expect(notEnrolled.stderr).toMatch(/Affiliate enrolment/);
    await insertAffiliate(stack.sql, { workspaceId: ws.workspaceId, displayName: 'Aff', timeZone: 'UTC' });

    expect(JSON.parse((await admin('affiliate-payouts', '--paused', 'true', '--note', 'audit')).stdout)).toEqual({
      affiliate_payouts_paused: true,
    });
    expect(await settings()).toMatchObject({ program_paused: true, next_payout_status: 'paused' });
    await setPayoutProgramPaused(stack.sql, false, null);

    await setOperatorGate(stack.sql, {
      affiliateId: (
        await stack.sql<{ id: string }[]>`select id from affiliates where workspace_id = ${ws.workspaceId}`
      )[0]!.id,
      workspaceId: ws.workspaceId,
      gate: 'identity_verified',
      on: true,
      note: null,
      now: new Date(),
    });
    expect((await gateOn(ws.workspaceId, 'blocked', '--note', 'fraud check')).code).toBe(0);
    expect(await settings()).toMatchObject({
      program_paused: false,
      identity_verified: true,
      blocked: true,
      next_payout_status: 'blocked',
      next_payout_blocker: 'no_payout_email',
    });
  }, 120_000);

  it('refuses an unknown gate with the usage', async () => {
    const bad = await gateOn('00000000-0000-4000-8000-000000000000', 'rich');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--gate/);
  }, 60_000);

  it("runs the payout cycle now for a month, on the service's Temporal, and says what it did", async () => {
    const ws = await stack.createWorkspace('paid');
    const affiliate = await affiliateWithCommission(stack.sql, {
      workspaceId: ws.workspaceId,
      cents: 6100,
      occurredAt: new Date('2026-01-01'),
      causePrefix: 'admin-commission',
    });
    await setPayoutEmail(stack.sql, {
      affiliateId: affiliate.id,
      workspaceId: ws.workspaceId,
      email: 'admin-cycle@example.com',
    });
    await setOperatorGate(stack.sql, {
      affiliateId: affiliate.id,
      workspaceId: ws.workspaceId,
      gate: 'identity_verified',
      on: true,
      note: null,
      now: new Date(),
    });
    const out = await admin('affiliate-payout-cycle', '--at', '2027-03-01T00:00:00Z');
    expect(out.code).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({ period: '2027-03', refused: null, created: 1, sent: 1 });
    expect(twin.sentCentsByReceiver().get('admin-cycle@example.com')).toBe(6100);
  }, 60_000);
});
