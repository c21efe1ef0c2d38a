/**
 * The workspace billing clock on the time-skipping server (decision 037): a subscription set to end
 * ends at its period end, a failed payment's grace ends in a downgrade, and each month's credits
 * are granted once at the plan then in force.
 */
import { describe, expect, it } from 'vitest';
import { createBillingActivities } from '../../activities/billing/billing.js';
import { workspaceBillingWorkflow } from '../../workflows/billing/workspace-billing.js';
import {
  billingChangedSignal,
  workspaceBillingWorkflowId,
} from '../../workflows/billing/workspace-billing.contract.js';
import { useTestStack } from '../support/test-stack.js';
import { useTimeSkippingWorker } from '../support/time-skipping.js';

const { stack } = useTestStack({ workspaces: false });
const taskQueue = 'billing-clock';
const ctx = useTimeSkippingWorker(taskQueue, () => createBillingActivities({ sql: stack.sql }));
const day = 86_400_000;

const plan = async (id: string) =>
  (await stack.sql<{ plan: string }[]>`select plan from workspaces where id = ${id}`)[0]!.plan;
const grants = async (id: string) =>
  (
    await stack.sql<
      { amount: number }[]
    >`select amount from credit_ledger where workspace_id = ${id} and cause_key like 'plan-grant:%' order by id`
  ).map((r) => r.amount);

async function paidWorkspace(change: (id: string, now: Date) => Promise<unknown>) {
  const ws = await stack.createWorkspace('paid');
  const now = new Date(await ctx.env.currentTimeMs());
  await stack.sql`update billing_accounts set grant_anchor = ${now}, subscription_id = ${`sub_${ws.workspaceId}`}, subscription_status = 'active' where workspace_id = ${ws.workspaceId}`;
  await change(ws.workspaceId, now);
  const handle = await ctx.env.client.workflow.start(workspaceBillingWorkflow, {
    taskQueue,
    workflowId: workspaceBillingWorkflowId(ws.workspaceId),
    args: [{ workspaceId: ws.workspaceId }],
  });
  return { id: ws.workspaceId, handle };
}

describe('the workspace billing clock', () => {
  it('ends a subscription set to end at its period end, then grants the free plan', async () => {
    const { id, handle } = await paidWorkspace(
      (id, now) =>
        stack.sql`update billing_accounts set cancel_at_period_end = true, current_period_end = ${new Date(now.getTime() + 10 * day)} where workspace_id = ${id}`,
    );
    await ctx.env.sleep(9 * day);
    expect(await plan(id)).toBe('paid');
    await ctx.env.sleep(2 * day);
    expect(await plan(id)).toBe('free');
    await ctx.env.sleep(30 * day);
    expect(await grants(id)).toEqual([2000, 100]);
    await handle.terminate();
  });

  it('keeps the paid plan through the grace and downgrades at its end', async () => {
    const { id, handle } = await paidWorkspace(
      (id, now) =>
        stack.sql`update billing_accounts set payment_failed_at = ${now}, grace_ends_at = ${new Date(now.getTime() + 7 * day)} where workspace_id = ${id}`,
    );
    await ctx.env.sleep(6 * day);
    expect(await plan(id)).toBe('paid');
    await ctx.env.sleep(2 * day);
    expect(await plan(id)).toBe('free');
    const [account] = await stack.sql`select grace_ends_at from billing_accounts where workspace_id = ${id}`;
    expect(account!.grace_ends_at).toBeNull();
    await handle.terminate();
  });

  it('grants each month once, whatever signals wake it in between', async () => {
    const { id, handle } = await paidWorkspace(async () => undefined);
    for (let i = 0; i < 5; i += 1) await handle.signal(billingChangedSignal);
    await ctx.env.sleep(65 * day);
    for (let i = 0; i < 5; i += 1) await handle.signal(billingChangedSignal);
    await ctx.env.sleep(1000);
    expect(await grants(id)).toEqual([2000, 2000, 2000]);
    await handle.terminate();
  });
});
