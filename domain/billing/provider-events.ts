/**
 * The payment provider's events the service acts on, in the provider-neutral form the client
 * (integrations/payments) parses them into, and the pure rules of their effects. Each event is
 * handled once (its id is a primary key) and in any order: these rules make a late or repeated
 * fact change nothing it should not.
 */
import type { Plan } from '../shared/common.js';

interface EventBase {
  /** The provider's event id: the "handled once" key. */
  id: string;
  type: string;
  occurredAt: Date;
  /** The workspace the checkout was opened for (metadata), when the object carries it. */
  workspaceId: string | null;
  customerId: string | null;
}

export type SubscriptionStatus =
  'incomplete' | 'incomplete_expired' | 'trialing' | 'active' | 'past_due' | 'canceled' | 'unpaid' | 'paused';

export type BillingEvent = EventBase &
  (
    | {
        kind: 'checkout_completed';
        mode: 'subscription' | 'payment';
        paid: boolean;
        subscriptionId: string | null;
        paymentId: string | null;
        amountCents: number;
        currency: string;
        pack: string | null;
      }
    | {
        kind: 'invoice_paid' | 'invoice_payment_failed';
        invoiceId: string;
        subscriptionId: string | null;
        /** The payment that paid it: Stripe's shapes since 2025-03-31 name none until linked (decision 053). */
        paymentId: string | null;
        amountDueCents: number;
        amountPaidCents: number;
        currency: string;
        periodStart: Date | null;
        periodEnd: Date | null;
        hostedInvoiceUrl: string | null;
        createdAt: Date;
      }
    | {
        kind: 'subscription_changed';
        subscriptionId: string;
        status: SubscriptionStatus;
        currentPeriodStart: Date | null;
        currentPeriodEnd: Date | null;
        cancelAtPeriodEnd: boolean;
        deleted: boolean;
      }
    | {
        kind: 'charge_refunded';
        paymentId: string;
        /** The invoice the payment paid, when the event or an invoice-payment lookup named it (decision 053). */
        invoiceId?: string | null;
        amountCents: number;
        refundedCents: number;
        currency: string;
        createdAt: Date;
      }
    | {
        kind: 'dispute';
        paymentId: string;
        invoiceId?: string | null;
        disputeStatus: 'open' | 'won' | 'lost';
        amountCents: number;
        currency: string;
        createdAt: Date;
      }
    | { kind: 'ignored' }
  );

/**
 * The plan a subscription's status means, or null for "no change": active and trialing are paid;
 * past_due keeps what the workspace has (the grace decides); the ended statuses are free.
 */
export function planForSubscription(status: SubscriptionStatus, deleted: boolean): Plan | null {
  if (deleted) return 'free';
  switch (status) {
    case 'active':
    case 'trialing':
      return 'paid';
    case 'canceled':
    case 'unpaid':
    case 'incomplete_expired':
      return 'free';
    default:
      return null;
  }
}

/**
 * Credits of a pack that should be taken back: the refunded share (rounded up, so a refund never
 * leaves a fraction of a credit paid for by nobody), or all of them while a dispute is open or lost.
 */
export function packCreditsToRevoke(p: {
  credits: number;
  amountCents: number;
  refundedCents: number;
  disputeStatus: 'open' | 'won' | 'lost' | null;
}): number {
  if (p.disputeStatus === 'open' || p.disputeStatus === 'lost') return p.credits;
  if (p.amountCents <= 0 || p.refundedCents <= 0) return 0;
  return Math.min(p.credits, Math.ceil((p.credits * Math.min(p.refundedCents, p.amountCents)) / p.amountCents));
}
