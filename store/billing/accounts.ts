/** A workspace's billing account: the provider's ids, the subscription's state, the grant anchor, the referral code. */
import { randomBytes } from 'node:crypto';
import type { Db } from '../../db/sql.js';
import type { BillingSnapshot } from '../../domain/billing/periods.js';
import type { Plan } from '../../domain/shared/common.js';

export interface BillingAccountRow {
  workspace_id: string;
  plan: Plan;
  workspace_name: string;
  customer_id: string | null;
  subscription_id: string | null;
  subscription_status: string | null;
  subscription_event_at: Date | null;
  current_period_end: Date | null;
  cancel_at_period_end: boolean;
  payment_failed_at: Date | null;
  grace_ends_at: Date | null;
  grant_anchor: Date;
  referral_code: string;
  referred_by: string | null;
  design_partner: boolean;
  last_granted_period_start: Date | null;
}

/** A referral code: 10 characters of a case-free alphabet without look-alikes. */
export function newReferralCode(): string {
  const alphabet = 'abcdefghjkmnpqrstuvwxyz23456789';
  return Array.from(randomBytes(10), (b) => alphabet[b % alphabet.length]).join('');
}

/** Opens the billing account of a new workspace (in its creating transaction), attributed to a referrer when one is given. */
export async function openBillingAccount(
  tx: Db,
  input: { workspaceId: string; anchor: Date; referredBy: string | null },
): Promise<void> {
  await tx`
    insert into billing_accounts (workspace_id, grant_anchor, referral_code, referred_by)
    values (${input.workspaceId}, ${input.anchor}, ${newReferralCode()}, ${input.referredBy})`;
}

/** The workspace a referral code belongs to (case-insensitive), or undefined. */
export async function workspaceOfReferralCode(db: Db, code: string): Promise<string | undefined> {
  const [row] = await db<
    { workspace_id: string }[]
  >`select workspace_id from billing_accounts where referral_code = ${code.trim().toLowerCase()}`;
  return row?.workspace_id;
}

const accountColumns = (db: Db) => db`
  a.workspace_id, w.plan, w.name as workspace_name, a.customer_id, a.subscription_id, a.subscription_status,
  a.subscription_event_at, a.current_period_end, a.cancel_at_period_end, a.payment_failed_at, a.grace_ends_at,
  a.grant_anchor, a.referral_code, a.referred_by,
  exists (select 1 from design_partner_applications d where d.workspace_id = a.workspace_id and d.status = 'accepted') as design_partner,
  (select max(substr(l.cause_key, 12))::timestamptz from credit_ledger l
   where l.workspace_id = a.workspace_id and l.cause_key like 'plan-grant:%') as last_granted_period_start`;

export async function readBillingAccount(db: Db, workspaceId: string): Promise<BillingAccountRow | undefined> {
  const [row] = await db<BillingAccountRow[]>`
    select ${accountColumns(db)} from billing_accounts a join workspaces w on w.id = a.workspace_id where a.workspace_id = ${workspaceId}`;
  return row;
}

/**
 * Locks the account for one event's or one period's changes: events of a workspace apply one at a
 * time, whatever order they arrive in. Taken before anything else of the transaction, and on the
 * account alone: the workspace row is only key-share locked by the rows that reference it (an
 * event, a ledger row), and an update of its plan does not conflict with that, so two events of a
 * workspace can never hold a key share each while waiting for the other's.
 *
 * The account is read again after the lock, in a statement of its own: a locking read that waited
 * re-reads only the locked row, and would pair the upgrade's new anchor with the workspace's plan
 * as it was before the wait (a paid period granted at the free plan's credits).
 */
export async function lockBillingAccount(tx: Db, workspaceId: string): Promise<BillingAccountRow | undefined> {
  const locked = await tx`select 1 from billing_accounts where workspace_id = ${workspaceId} for update`;
  if (locked.length === 0) return undefined;
  return readBillingAccount(tx, workspaceId);
}

/** The workspace an event names: its metadata's workspace (when it exists), else the customer's. */
export async function workspaceOfBillingEvent(
  db: Db,
  workspaceId: string | null,
  customerId: string | null,
): Promise<string | undefined> {
  if (workspaceId && /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(workspaceId)) {
    const [row] = await db<
      { workspace_id: string }[]
    >`select workspace_id from billing_accounts where workspace_id = ${workspaceId}`;
    if (row) return row.workspace_id;
  }
  if (!customerId) return undefined;
  const [row] = await db<
    { workspace_id: string }[]
  >`select workspace_id from billing_accounts where customer_id = ${customerId}`;
  return row?.workspace_id;
}

export function billingSnapshot(a: BillingAccountRow): BillingSnapshot {
  return {
    plan: a.plan,
    grantAnchor: a.grant_anchor,
    cancelAtPeriodEnd: a.cancel_at_period_end,
    currentPeriodEnd: a.current_period_end,
    graceEndsAt: a.grace_ends_at,
    designPartner: a.design_partner,
    lastGrantedPeriodStart: a.last_granted_period_start,
  };
}

export async function setCustomer(db: Db, workspaceId: string, customerId: string): Promise<void> {
  await db`update billing_accounts set customer_id = coalesce(customer_id, ${customerId}), updated_at = now() where workspace_id = ${workspaceId}`;
}

/** Free to paid: the grant periods restart at `anchor` (the subscription's start), and a failure's grace ends. */
export async function upgradeToPaid(tx: Db, workspaceId: string, anchor: Date): Promise<void> {
  await tx`update workspaces set plan = 'paid' where id = ${workspaceId}`;
  await tx`
    update billing_accounts set grant_anchor = ${anchor}, payment_failed_at = null, grace_ends_at = null, updated_at = now()
    where workspace_id = ${workspaceId}`;
}

/** Paid to free: the subscription's end flag and any grace are done with. */
export async function downgradeToFree(tx: Db, workspaceId: string): Promise<void> {
  await tx`update workspaces set plan = 'free' where id = ${workspaceId}`;
  await tx`
    update billing_accounts set cancel_at_period_end = false, payment_failed_at = null, grace_ends_at = null, updated_at = now()
    where workspace_id = ${workspaceId}`;
}

/** An operator's plan change (admin command line), without a provider. */
export async function setPlan(tx: Db, workspaceId: string, plan: Plan, now: Date): Promise<void> {
  if (plan === 'paid') await upgradeToPaid(tx, workspaceId, now);
  else await downgradeToFree(tx, workspaceId);
}

export async function applySubscription(
  tx: Db,
  workspaceId: string,
  s: {
    subscriptionId: string;
    status: string;
    currentPeriodEnd: Date | null;
    cancelAtPeriodEnd: boolean;
    eventAt: Date;
  },
): Promise<void> {
  await tx`
    update billing_accounts set subscription_id = ${s.subscriptionId}, subscription_status = ${s.status},
      current_period_end = coalesce(${s.currentPeriodEnd}, current_period_end), cancel_at_period_end = ${s.cancelAtPeriodEnd},
      subscription_event_at = ${s.eventAt}, updated_at = now()
    where workspace_id = ${workspaceId}`;
}

export async function linkSubscription(tx: Db, workspaceId: string, subscriptionId: string): Promise<void> {
  await tx`
    update billing_accounts set subscription_id = ${subscriptionId}, updated_at = now()
    where workspace_id = ${workspaceId} and (subscription_id is null or subscription_status = 'canceled')`;
}

export async function setCancelAtPeriodEnd(db: Db, workspaceId: string, cancel: boolean): Promise<void> {
  await db`update billing_accounts set cancel_at_period_end = ${cancel}, updated_at = now() where workspace_id = ${workspaceId}`;
}

/** A renewal failed: the grace starts once (a second failure of the same period does not extend it). */
export async function startGrace(tx: Db, workspaceId: string, failedAt: Date, endsAt: Date): Promise<boolean> {
  const rows = await tx`
    update billing_accounts set payment_failed_at = ${failedAt}, grace_ends_at = ${endsAt}, updated_at = now()
    where workspace_id = ${workspaceId} and grace_ends_at is null returning 1`;
  return rows.length === 1;
}

export async function clearGrace(tx: Db, workspaceId: string): Promise<void> {
  await tx`update billing_accounts set payment_failed_at = null, grace_ends_at = null, updated_at = now() where workspace_id = ${workspaceId} and grace_ends_at is not null`;
}

/** Workspaces whose billing workflow has not been started yet (the worker starts them). */
export async function workspacesWithoutBillingWorkflow(db: Db, limit: number): Promise<string[]> {
  const rows = await db<{ workspace_id: string }[]>`
    select workspace_id from billing_accounts where workflow_started_at is null order by workspace_id limit ${limit}`;
  return rows.map((r) => r.workspace_id);
}

export async function markBillingWorkflowStarted(db: Db, workspaceId: string): Promise<void> {
  await db`update billing_accounts set workflow_started_at = coalesce(workflow_started_at, now()) where workspace_id = ${workspaceId}`;
}

export interface ReferralCounts {
  referred_workspaces: number;
  rewarded_workspaces: number;
  credits_earned: number;
}

export async function referralCounts(db: Db, workspaceId: string): Promise<ReferralCounts> {
  const [row] = await db<ReferralCounts[]>`
    select
      (select count(*)::int from billing_accounts where referred_by = ${workspaceId}) as referred_workspaces,
      (select count(*)::int from credit_ledger where workspace_id = ${workspaceId} and cause_key like 'referral-reward:%' and cause_key <> 'referral-reward:referred') as rewarded_workspaces,
      (select coalesce(sum(amount), 0)::int from credit_ledger where workspace_id = ${workspaceId} and cause_key like 'referral-reward:%' and cause_key <> 'referral-reward:referred') as credits_earned`;
  return row!;
}
