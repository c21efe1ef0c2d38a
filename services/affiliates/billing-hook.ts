/**
 * The affiliate program's share of a billing event (decision 043): called by handleBillingEvent
 * inside the event's one transaction (the billing account is locked), so a commission, a clawback
 * or a reversal commits with the event's record or not at all, and a redelivered event (its record
 * already there) never reaches this. Answers the commissions it touched: the caller wakes their
 * workflows after the commit.
 *
 * - invoice paid: the referred workspace's first payment is its conversion; each paid invoice
 *   within the commission months earns a held commission (cause `commission:<invoice>`).
 * - a credit pack's payment converts too (it is a payment) but earns nothing (commissions are on invoices).
 * - refund: inside the holding period (the refund happened before `available_at`), the refunded
 *   share is clawed back (`clawback_refund`); after it, the commission stands.
 * - dispute opened: what refunds left is clawed back (`clawback_dispute`) whenever it happens;
 *   won: exactly that comes back (`dispute_reversal`); lost: the clawback stands.
 * A refund or dispute that arrived before its invoice's payment (events out of order) is on the
 * payment row already and is applied when the commission is made.
 */
import type { Db } from '../../db/sql.js';
import {
  availableAtFor,
  commissionCents,
  decideDispute,
  earnsCommission,
  refundClawbackTarget,
  refundInsideWindow,
} from '../../domain/affiliates/affiliates.js';
import type { BillingEvent } from '../../domain/billing/provider-events.js';
import { billingCurrency } from '../../domain/billing/catalogue.js';
import {
  insertCommission,
  lockAttribution,
  lockCommissionsOfPayment,
  markConverted,
  paymentMoney,
  setDispute,
  setRefundClawed,
  type CommissionRow,
} from '../../store/affiliates/commissions.js';
import { appendAffiliateLedgerEntry, releaseHeldEntries } from '../../store/affiliates/ledger.js';

export interface AffiliateTerms {
  holdingMs: number;
}

export async function applyAffiliateBillingEffects(
  tx: Db,
  workspaceId: string,
  event: BillingEvent,
  terms: AffiliateTerms,
): Promise<string[]> {
  switch (event.kind) {
    case 'invoice_paid':
      if (event.amountPaidCents <= 0) return [];
      return invoicePaid(tx, workspaceId, event, terms);
    case 'checkout_completed':
      if (event.paid && event.mode === 'payment') {
        if (await lockAttribution(tx, workspaceId)) await markConverted(tx, workspaceId, event.occurredAt, null);
      }
      return [];
    case 'charge_refunded':
    case 'dispute':
      return reconcilePayment(tx, event.paymentId, event.occurredAt);
    default:
      return [];
  }
}

async function invoicePaid(
  tx: Db,
  workspaceId: string,
  e: Extract<BillingEvent, { invoiceId: string }>,
  terms: AffiliateTerms,
): Promise<string[]> {
  const attribution = await lockAttribution(tx, workspaceId);
  if (!attribution) return [];
  const paidAt = e.occurredAt;
  const convertedAt = await markConverted(tx, workspaceId, paidAt, e.invoiceId);
  if (e.currency !== billingCurrency || !earnsCommission(convertedAt, paidAt)) return [];
  const amountCents = commissionCents(e.amountPaidCents);
  const paymentId = e.paymentId ?? e.invoiceId;
  const availableAt = availableAtFor(paidAt, terms.holdingMs);
  const commission = await insertCommission(tx, {
    affiliateId: attribution.affiliate_id,
    workspaceId,
    invoiceId: e.invoiceId,
    paymentId,
    invoiceCents: e.amountPaidCents,
    amountCents,
    earnedAt: paidAt,
    availableAt,
  });
  if (!commission) return [];
  await appendAffiliateLedgerEntry(tx, {
    affiliateId: attribution.affiliate_id,
    kind: 'commission',
    amountCents,
    description: `${e.amountPaidCents / 100} USD invoice ${e.invoiceId} paid: commission`,
    causeKey: `commission:${e.invoiceId}`,
    availableAt,
    commissionId: commission.id,
    held: true,
    occurredAt: paidAt,
  });
  // A refund or dispute of this payment that arrived first is applied now.
  await reconcilePayment(tx, paymentId, paidAt);
  return [commission.id];
}

/** Brings the payment's commissions in line with its refunds and dispute as billing recorded them. */
async function reconcilePayment(tx: Db, paymentId: string, at: Date): Promise<string[]> {
  const commissions = await lockCommissionsOfPayment(tx, paymentId);
  if (commissions.length === 0) return [];
  const payment = await paymentMoney(tx, paymentId);
  if (!payment) return [];
  for (const c of commissions) {
    await reconcileRefund(tx, c, payment.refunded_cents, at);
    if (payment.dispute_status) {
      const fresh = (await lockCommissionsOfPayment(tx, paymentId)).find((x) => x.id === c.id)!;
      await reconcileDispute(tx, fresh, payment.dispute_status);
    }
  }
  return commissions.map((c) => c.id);
}

async function reconcileRefund(tx: Db, c: CommissionRow, refundedCents: number, at: Date): Promise<void> {
  if (refundedCents <= 0 || c.status === 'clawed_back' || !refundInsideWindow(at, c.available_at)) return;
  const money = {
    amountCents: c.amount_cents,
    invoiceCents: c.invoice_cents,
    refundClawedCents: c.refund_clawed_cents,
    disputeClawedCents: c.dispute_clawed_cents,
  };
  const target = refundClawbackTarget(money, refundedCents);
  const cents = target - c.refund_clawed_cents;
  if (cents <= 0) return;
  const full = target + c.dispute_clawed_cents >= c.amount_cents && c.dispute_status !== 'open';
  if (!(await setRefundClawed(tx, c.id, c.refund_clawed_cents, target, full))) return;
  await appendAffiliateLedgerEntry(tx, {
    affiliateId: c.affiliate_id,
    kind: 'clawback_refund',
    amountCents: -cents,
    description: `invoice ${c.invoice_id} refunded inside the holding period: commission clawed back`,
    causeKey: `clawback_refund:${c.id}:${target}`,
    commissionId: c.id,
    held: c.status === 'held',
    availableAt: c.status === 'held' ? c.available_at : null,
    occurredAt: at,
  });
  // Nothing of it is left to mature: its held rows (netting to zero) count as settled now.
  if (full && c.status === 'held') await releaseHeldEntries(tx, c.id);
}

async function reconcileDispute(tx: Db, c: CommissionRow, status: 'open' | 'won' | 'lost'): Promise<void> {
  if (c.dispute_status === status) return;
  const move = decideDispute(
    {
      amountCents: c.amount_cents,
      invoiceCents: c.invoice_cents,
      refundClawedCents: c.refund_clawed_cents,
      disputeClawedCents: c.dispute_clawed_cents,
      disputeStatus: c.dispute_status,
    },
    status,
  );
  const disputeClawed = move.kind === 'clawback_dispute' ? move.cents : c.dispute_clawed_cents;
  if (!(await setDispute(tx, c.id, c.dispute_status, status, disputeClawed))) return;
  if (move.kind === 'none') return;
  const held = c.status === 'held';
  await appendAffiliateLedgerEntry(tx, {
    affiliateId: c.affiliate_id,
    kind: move.kind,
    amountCents: move.kind === 'clawback_dispute' ? -move.cents : move.cents,
    description:
      move.kind === 'clawback_dispute'
        ? `payment of invoice ${c.invoice_id} disputed: commission clawed back`
        : `dispute of invoice ${c.invoice_id} won: clawback reversed`,
    causeKey: `${move.kind}:${c.id}`,
    commissionId: c.id,
    held,
    availableAt: held ? c.available_at : null,
  });
}
