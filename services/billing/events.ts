/**
 * Applies one payment-provider event (decisions 037, 053). The event's row, every change of plan,
 * invoice and payment, and every credit movement it causes commit in one transaction, and the row's
 * primary key makes a redelivery change nothing. Events of one workspace apply one at a time (the
 * account row is locked) and in any order: a stale subscription update, a failure after the
 * payment, a refund before its checkout each land where they belong
 * (domain/billing/provider-events.ts).
 */
import type { Sql } from '../../db/sql.js';
import type { Db } from '../../db/sql.js';
import { creditPacks, CreditPackIdSchema, referralRewardCredits } from '../../domain/billing/catalogue.js';
import { graceEndsAt } from '../../domain/billing/periods.js';
import { packCreditsToRevoke, planForSubscription, type BillingEvent } from '../../domain/billing/provider-events.js';
import {
  applySubscription,
  clearGrace,
  downgradeToFree,
  linkSubscription,
  lockBillingAccount,
  setCustomer,
  startGrace,
  upgradeToPaid,
  workspaceOfBillingEvent,
  type BillingAccountRow,
} from '../../store/billing/accounts.js';
import { recordBillingEvent, setBillingEventOutcome } from '../../store/billing/events.js';
import {
  paymentKeyOf,
  setRevokedCredits,
  upsertInvoice,
  upsertPayment,
  workspaceOfPayment,
  type PaymentRow,
} from '../../store/billing/invoices.js';
import { grantCreditsIn, revokeCreditsIn } from '../../store/platform/credits.js';
import { recordWorkspaceEvent } from '../../store/notifications/outbox.js';
import { applyAffiliateBillingEffects, type AffiliateTerms } from '../affiliates/billing-hook.js';

export interface BillingEventResult {
  duplicate: boolean;
  workspaceId: string | null;
  outcome: string;
  /**
   * Affiliate commissions this event made or moved (decisions 043, 047): their workflows are woken
   * after the commit.
   */
  affiliateCommissionIds: string[];
}

type Of<K extends BillingEvent['kind']> = Extract<BillingEvent, { kind: K }>;
type InvoiceEvent = Extract<BillingEvent, { invoiceId: string }>;

function paymentRefs(e: BillingEvent): { paymentId: string | null; invoiceId: string | null } {
  switch (e.kind) {
    case 'invoice_paid':
    case 'invoice_payment_failed':
      return { paymentId: e.paymentId, invoiceId: e.invoiceId };
    case 'charge_refunded':
    case 'dispute':
      return { paymentId: e.paymentId, invoiceId: e.invoiceId ?? null };
    default:
      return { paymentId: null, invoiceId: null };
  }
}

/**
 * One row per payment (decision 053): an invoice's payment, refund or dispute lands on the row
 * already recorded for its payment or for the invoice it paid, whichever id that row took (the
 * payment intent, or the invoice's id when the payment was not known yet), so billing and the
 * affiliate effects after it read the same row.
 */
async function keyPayment(tx: Db, workspaceId: string, e: BillingEvent): Promise<BillingEvent> {
  if (e.kind === 'invoice_paid' && e.amountPaidCents > 0) {
    const key = await paymentKeyOf(tx, { workspaceId, paymentId: e.paymentId, invoiceId: e.invoiceId });
    return { ...e, paymentId: key ?? e.paymentId ?? e.invoiceId };
  }
  if (e.kind === 'charge_refunded' || e.kind === 'dispute') {
    const key = await paymentKeyOf(tx, { workspaceId, paymentId: e.paymentId, invoiceId: e.invoiceId ?? null });
    return key ? { ...e, paymentId: key } : e;
  }
  return e;
}

export async function handleBillingEvent(
  sql: Sql,
  received: BillingEvent,
  affiliates: AffiliateTerms = { holdingMs: 30 * 86_400_000 },
): Promise<BillingEventResult> {
  const workspaceId =
    (await workspaceOfBillingEvent(sql, received.workspaceId, received.customerId)) ??
    (await workspaceOfPayment(sql, paymentRefs(received))) ??
    null;
  return sql.begin(async (tx) => {
    // The account first (see lockBillingAccount), then the event's row: a redelivery waits for the
    // first delivery's commit and then finds its row.
    const account = workspaceId ? await lockBillingAccount(tx, workspaceId) : undefined;
    if (
      !(await recordBillingEvent(tx, {
        id: received.id,
        type: received.type,
        workspaceId,
        occurredAt: received.occurredAt,
      }))
    ) {
      return { duplicate: true, workspaceId, outcome: 'already handled', affiliateCommissionIds: [] };
    }
    const event = account ? await keyPayment(tx, account.workspace_id, received) : received;
    const outcome = !account
      ? 'ignored: no workspace of this service'
      : event.kind === 'ignored'
        ? 'ignored: not an event billing acts on'
        : await apply(tx, account, event);
    await setBillingEventOutcome(tx, event.id, outcome);
    // The affiliate program's commission, clawback or reversal commits with the event (decision 043).
    const affiliateCommissionIds = account
      ? await applyAffiliateBillingEffects(tx, account.workspace_id, event, affiliates)
      : [];
    return { duplicate: false, workspaceId, outcome, affiliateCommissionIds };
  });
}

function apply(tx: Db, account: BillingAccountRow, event: BillingEvent): Promise<string> {
  switch (event.kind) {
    case 'checkout_completed':
      return checkoutCompleted(tx, account, event);
    case 'invoice_paid':
      return invoicePaid(tx, account, event);
    case 'invoice_payment_failed':
      return invoiceFailed(tx, account, event);
    case 'subscription_changed':
      return subscriptionChanged(tx, account, event);
    case 'charge_refunded':
      return chargeRefunded(tx, account, event);
    case 'dispute':
      return disputeChanged(tx, account, event);
    case 'ignored':
      return Promise.resolve('ignored');
  }
}

/** Whether this subscription has ended here already: a late event of it must not bring the plan back. */
const endedSubscription = (a: BillingAccountRow, subscriptionId: string | null) =>
  subscriptionId !== null && a.subscription_id === subscriptionId && a.subscription_status === 'canceled';

async function checkoutCompleted(tx: Db, a: BillingAccountRow, e: Of<'checkout_completed'>): Promise<string> {
  if (e.customerId) await setCustomer(tx, a.workspace_id, e.customerId);
  if (!e.paid) return 'checkout completed without payment: nothing granted';
  if (e.mode === 'subscription') {
    if (endedSubscription(a, e.subscriptionId)) return 'stale: the subscription has ended';
    if (e.subscriptionId) await linkSubscription(tx, a.workspace_id, e.subscriptionId);
    if (a.plan === 'paid') return 'subscription linked; already paid';
    await upgradeToPaid(tx, a.workspace_id, e.occurredAt);
    return 'upgraded to paid';
  }
  const pack = CreditPackIdSchema.safeParse(e.pack);
  if (!pack.success) return `payment of an unknown pack "${e.pack ?? ''}": nothing granted`;
  const credits = creditPacks[pack.data].credits;
  const paymentId = e.paymentId ?? e.id;
  const payment = await upsertPayment(tx, {
    paymentId,
    workspaceId: a.workspace_id,
    purpose: 'credit_pack',
    pack: pack.data,
    credits,
    amountCents: e.amountCents,
    currency: e.currency,
    createdAt: e.occurredAt,
  });
  await grantCreditsIn(tx, {
    workspaceId: a.workspace_id,
    amount: credits,
    causeKey: `credit-pack:${paymentId}`,
    note: `credit pack ${pack.data}`,
  });
  const reconciled = await reconcilePack(tx, payment, e.id);
  await rewardReferral(tx, a, e.amountCents);
  return `granted ${credits} credits of ${pack.data}${reconciled}`;
}

async function invoicePaid(tx: Db, a: BillingAccountRow, e: InvoiceEvent): Promise<string> {
  await upsertInvoice(tx, { workspaceId: a.workspace_id, status: 'paid', ...invoiceFields(e), at: e.occurredAt });
  if (e.amountPaidCents > 0) {
    await upsertPayment(tx, {
      paymentId: e.paymentId ?? e.invoiceId,
      workspaceId: a.workspace_id,
      purpose: 'subscription',
      invoiceId: e.invoiceId,
      amountCents: e.amountPaidCents,
      currency: e.currency,
      createdAt: e.createdAt,
    });
    await rewardReferral(tx, a, e.amountPaidCents);
  }
  await clearGrace(tx, a.workspace_id);
  if (!e.subscriptionId || endedSubscription(a, e.subscriptionId)) return 'invoice paid';
  await linkSubscription(tx, a.workspace_id, e.subscriptionId);
  if (a.plan === 'paid') return 'invoice paid';
  await upgradeToPaid(tx, a.workspace_id, e.periodStart ?? e.occurredAt);
  return 'invoice paid; upgraded to paid';
}

async function invoiceFailed(tx: Db, a: BillingAccountRow, e: InvoiceEvent): Promise<string> {
  const invoice = await upsertInvoice(tx, {
    workspaceId: a.workspace_id,
    status: 'payment_failed',
    ...invoiceFields(e),
    at: e.occurredAt,
  });
  if (invoice.status === 'paid') return 'stale: the invoice is paid';
  if (a.plan !== 'paid' || endedSubscription(a, e.subscriptionId))
    return 'payment failed on a free workspace: nothing to keep';
  const endsAt = graceEndsAt(e.occurredAt);
  if (!(await startGrace(tx, a.workspace_id, e.occurredAt, endsAt)))
    return 'payment failed again: the grace already runs';
  await recordWorkspaceEvent(tx, {
    workspaceId: a.workspace_id,
    type: 'billing.payment_failed',
    payload: {
      invoice_id: e.invoiceId,
      amount_due_cents: e.amountDueCents,
      currency: e.currency,
      grace_ends_at: endsAt.toISOString(),
    },
  });
  return `payment failed: the paid plan is kept until ${endsAt.toISOString()}`;
}

async function subscriptionChanged(tx: Db, a: BillingAccountRow, e: Of<'subscription_changed'>): Promise<string> {
  if (endedSubscription(a, e.subscriptionId)) return 'stale: the subscription has ended';
  // Another subscription that is live here wins; one only linked by its checkout (no status yet) is replaced.
  if (
    a.subscription_id &&
    a.subscription_id !== e.subscriptionId &&
    a.subscription_status !== null &&
    a.subscription_status !== 'canceled'
  ) {
    return `ignored: the workspace's subscription is ${a.subscription_id}`;
  }
  if (a.subscription_id === e.subscriptionId && a.subscription_event_at && e.occurredAt < a.subscription_event_at)
    return 'stale: a newer update was applied';
  const status = e.deleted ? 'canceled' : e.status;
  await applySubscription(tx, a.workspace_id, {
    subscriptionId: e.subscriptionId,
    status,
    currentPeriodEnd: e.currentPeriodEnd,
    cancelAtPeriodEnd: e.deleted ? false : e.cancelAtPeriodEnd,
    eventAt: e.occurredAt,
  });
  const plan = planForSubscription(e.status, e.deleted);
  if (plan === 'paid' && a.plan === 'free') {
    await upgradeToPaid(tx, a.workspace_id, e.currentPeriodStart ?? e.occurredAt);
    return `subscription ${status}: upgraded to paid`;
  }
  if (plan === 'paid') await clearGrace(tx, a.workspace_id);
  if (plan === 'free' && a.plan === 'paid') {
    await downgradeToFree(tx, a.workspace_id);
    return `subscription ${status}: downgraded to free`;
  }
  return `subscription ${status}${e.cancelAtPeriodEnd && !e.deleted ? ', ending at its period end' : ''}`;
}

async function chargeRefunded(tx: Db, a: BillingAccountRow, e: Of<'charge_refunded'>): Promise<string> {
  const payment = await upsertPayment(tx, {
    paymentId: e.paymentId,
    workspaceId: a.workspace_id,
    invoiceId: e.invoiceId ?? null,
    amountCents: e.amountCents,
    refundedCents: e.refundedCents,
    currency: e.currency,
    createdAt: e.createdAt,
  });
  return `refunded ${payment.refunded_cents} of ${payment.amount_cents} cents${await reconcilePack(tx, payment, e.id)}`;
}

async function disputeChanged(tx: Db, a: BillingAccountRow, e: Of<'dispute'>): Promise<string> {
  const payment = await upsertPayment(tx, {
    paymentId: e.paymentId,
    workspaceId: a.workspace_id,
    invoiceId: e.invoiceId ?? null,
    amountCents: e.amountCents,
    currency: e.currency,
    disputeStatus: e.disputeStatus,
    createdAt: e.createdAt,
  });
  return `dispute ${payment.dispute_status ?? e.disputeStatus}${await reconcilePack(tx, payment, e.id)}`;
}

/**
 * Brings a pack's credits in line with its money: what the refunds and an open or lost dispute
 * say should be taken back, minus what was; a won dispute gives back what the dispute took.
 */
async function reconcilePack(tx: Db, p: PaymentRow, eventId: string): Promise<string> {
  if (p.purpose !== 'credit_pack' || p.credits === 0) return '';
  const target = packCreditsToRevoke({
    credits: p.credits,
    amountCents: p.amount_cents,
    refundedCents: p.refunded_cents,
    disputeStatus: p.dispute_status,
  });
  if (target > p.revoked_credits) {
    const taken = await revokeCreditsIn(tx, {
      workspaceId: p.workspace_id,
      amount: target - p.revoked_credits,
      causeKey: `credit-pack-revoke:${p.payment_id}:${eventId}`,
      note: `credits of ${p.pack ?? 'a pack'} taken back (${p.dispute_status === 'open' || p.dispute_status === 'lost' ? 'disputed' : 'refunded'})`,
    });
    await setRevokedCredits(tx, p.payment_id, p.revoked_credits + taken);
    return `; ${taken} credits taken back`;
  }
  if (target < p.revoked_credits) {
    const back = p.revoked_credits - target;
    await grantCreditsIn(tx, {
      workspaceId: p.workspace_id,
      amount: back,
      causeKey: `credit-pack-restore:${p.payment_id}:${eventId}`,
      note: `credits of ${p.pack ?? 'a pack'} given back (dispute won)`,
    });
    await setRevokedCredits(tx, p.payment_id, target);
    return `; ${back} credits given back`;
  }
  return '';
}

/** The referral program: when a referred workspace first pays, both sides get their credits, once (one cause key per side). */
async function rewardReferral(tx: Db, a: BillingAccountRow, paidCents: number): Promise<void> {
  if (!a.referred_by || paidCents <= 0) return;
  await grantCreditsIn(tx, {
    workspaceId: a.workspace_id,
    amount: referralRewardCredits.referred,
    causeKey: 'referral-reward:referred',
    note: 'referral reward: joined through a referral link and paid',
  });
  await grantCreditsIn(tx, {
    workspaceId: a.referred_by,
    amount: referralRewardCredits.referrer,
    causeKey: `referral-reward:${a.workspace_id}`,
    note: 'referral reward: a referred workspace paid',
  });
}

function invoiceFields(e: InvoiceEvent) {
  return {
    invoiceId: e.invoiceId,
    amountDueCents: e.amountDueCents,
    amountPaidCents: e.amountPaidCents,
    currency: e.currency,
    periodStart: e.periodStart,
    periodEnd: e.periodEnd,
    hostedInvoiceUrl: e.hostedInvoiceUrl,
    createdAt: e.createdAt,
  };
}
