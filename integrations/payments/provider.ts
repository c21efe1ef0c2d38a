/**
 * The payment provider behind billing (decision 037): checkout for the plan and credit packs, the
 * customer portal, ending a subscription at its period end, and its signed events. Stripe is the
 * implementation (stripe.ts); tests run it against stripe-mock and sign events with the package's
 * test-header helper.
 */
import type { BillingEvent } from '../../domain/billing/provider-events.js';

export interface CheckoutLine {
  name: string;
  amountCents: number;
  currency: string;
  /** Monthly recurring (the plan) or once (a pack). */
  recurring: boolean;
}

export interface CheckoutRequest {
  workspaceId: string;
  customerId: string;
  line: CheckoutLine;
  /** Put on the session and on what it creates (subscription or payment), so every later event names the workspace. */
  metadata: Record<string, string>;
  successUrl: string;
  cancelUrl: string;
}

export interface CheckoutSession {
  id: string;
  url: string;
  expiresAt: Date | null;
}

export class PaymentProviderError extends Error {
  override name = 'PaymentProviderError';
  constructor(
    message: string,
    readonly status: number | null,
  ) {
    super(message);
  }
}

/** A webhook whose signature is missing, wrong or older than the tolerance. */
export class WebhookSignatureError extends Error {
  override name = 'WebhookSignatureError';
}

/** One payment of an invoice: what links a refund or dispute (named by its payment) to the invoice it paid. */
export interface InvoicePaymentLink {
  invoiceId: string;
  /** The payment as billing keys it (Stripe: the payment intent). */
  paymentId: string;
  /** The invoice's customer and workspace, when the answer carried the invoice (a lookup by payment). */
  customerId: string | null;
  workspaceId: string | null;
}

export interface PaymentProvider {
  readonly name: 'stripe';
  createCustomer(input: { workspaceId: string; name: string; email: string | null }): Promise<string>;
  createCheckout(input: CheckoutRequest): Promise<CheckoutSession>;
  createPortal(input: { customerId: string; returnUrl: string }): Promise<string>;
  /** Ends the subscription at its period end (true) or keeps it renewing (false). */
  setCancelAtPeriodEnd(subscriptionId: string, cancel: boolean): Promise<void>;
  /**
   * The paid payments of an invoice, or the invoice a payment paid (none when it paid no invoice).
   * Stripe's events since API 2025-03-31 name neither from the other (decision 053).
   */
  invoicePayments(query: { invoiceId: string } | { paymentId: string }): Promise<InvoicePaymentLink[]>;
  /** Verifies the signature over the raw body and parses the event; throws WebhookSignatureError. */
  parseWebhook(rawBody: Buffer, signatureHeader: string | undefined): BillingEvent;
}
