/**
 * Stripe through the official `stripe` package: Checkout sessions (subscription mode for the plan,
 * payment mode for packs), the Billing portal, `cancel_at_period_end`, and webhooks verified with
 * Stripe's signature scheme (`Stripe-Signature: t=…,v1=…`, HMAC-SHA256 over `<t>.<raw body>`, five
 * minutes of tolerance). Events are parsed into the provider-neutral form of
 * domain/billing/provider-events.ts. Only what the service reads is parsed, and both the older
 * and the 2025+ places of moved fields (invoice subscription, subscription periods) are read.
 * Since 2025-03-31 an invoice names no payment intent and a charge no invoice: invoice payments
 * link them (`invoice.payments` when an event carries it, else `GET /v1/invoice_payments`), and
 * the older `invoice.payment_intent` and `charge.invoice` are still read (decision 053).
 */
import Stripe from 'stripe';
import { z } from 'zod';
import type { BillingEvent } from '../../domain/billing/provider-events.js';
import {
  PaymentProviderError,
  WebhookSignatureError,
  type CheckoutRequest,
  type CheckoutSession,
  type InvoicePaymentLink,
  type PaymentProvider,
} from './provider.js';

export interface StripeConfig {
  secretKey: string;
  webhookSecret: string;
  /** An API base other than Stripe's (stripe-mock in tests): http://localhost:12111 */
  apiBase: string | null;
}

/** Seconds a signed event may be old (Stripe's library default). */
export const webhookToleranceSeconds = 300;

const id = z.union([z.string(), z.object({ id: z.string() })]).transform((v) => (typeof v === 'string' ? v : v.id));
const metadata = z
  .record(z.string(), z.string())
  .nullish()
  .transform((m) => m ?? {});
const seconds = z
  .number()
  .int()
  .transform((s) => new Date(s * 1000));

const EventSchema = z.object({
  id: z.string(),
  type: z.string(),
  created: seconds,
  data: z.object({ object: z.record(z.string(), z.unknown()) }),
});

const SessionSchema = z.object({
  id: z.string(),
  mode: z.enum(['subscription', 'payment', 'setup']),
  payment_status: z.string().nullish(),
  customer: id.nullish(),
  subscription: id.nullish(),
  payment_intent: id.nullish(),
  amount_total: z.number().int().nullish(),
  currency: z.string().nullish(),
  metadata,
  client_reference_id: z.string().nullish(),
});

/** An InvoicePayment (API 2025-03-31 and later); its invoice is an id, or the invoice when expanded. */
const InvoicePaymentSchema = z.object({
  invoice: z.union([
    z.string(),
    z.object({
      id: z.string(),
      customer: id.nullish(),
      subscription_details: z.object({ metadata }).nullish(),
      parent: z.object({ subscription_details: z.object({ metadata }).nullish() }).nullish(),
    }),
  ]),
  payment: z.object({ type: z.string(), payment_intent: id.nullish() }),
  status: z.string(),
});
type InvoicePayment = z.infer<typeof InvoicePaymentSchema>;

const InvoiceSchema = z.object({
  id: z.string(),
  customer: id.nullish(),
  amount_due: z.number().int(),
  amount_paid: z.number().int(),
  currency: z.string(),
  created: seconds,
  period_start: seconds.nullish(),
  period_end: seconds.nullish(),
  hosted_invoice_url: z.string().nullish(),
  subscription: id.nullish(),
  /** Before API 2025-03-31 only; since then `payments` (included on request) links the payment. */
  payment_intent: id.nullish(),
  payments: z.object({ data: z.array(InvoicePaymentSchema) }).nullish(),
  subscription_details: z.object({ metadata }).nullish(),
  parent: z.object({ subscription_details: z.object({ subscription: id.nullish(), metadata }).nullish() }).nullish(),
  lines: z
    .object({ data: z.array(z.object({ period: z.object({ start: seconds, end: seconds }).nullish() })) })
    .nullish(),
});

const SubscriptionSchema = z.object({
  id: z.string(),
  customer: id.nullish(),
  status: z.enum([
    'incomplete',
    'incomplete_expired',
    'trialing',
    'active',
    'past_due',
    'canceled',
    'unpaid',
    'paused',
  ]),
  cancel_at_period_end: z.boolean().nullish(),
  current_period_start: seconds.nullish(),
  current_period_end: seconds.nullish(),
  items: z
    .object({
      data: z.array(z.object({ current_period_start: seconds.nullish(), current_period_end: seconds.nullish() })),
    })
    .nullish(),
  metadata,
});

const ChargeSchema = z.object({
  id: z.string(),
  customer: id.nullish(),
  payment_intent: id.nullish(),
  /** Before API 2025-03-31 only. */
  invoice: id.nullish(),
  amount: z.number().int(),
  amount_refunded: z.number().int(),
  currency: z.string(),
  created: seconds,
  metadata,
});

const DisputeSchema = z.object({
  id: z.string(),
  charge: id,
  payment_intent: id.nullish(),
  amount: z.number().int(),
  currency: z.string(),
  status: z.string(),
  created: seconds,
  metadata,
});

/**
 * Invoice payments made with a payment intent (billing's payment id), as links; only those `match`
 * accepts, so an answer about other objects (stripe-mock's fixtures) links nothing.
 */
function paymentLinks(payments: InvoicePayment[], match: (p: InvoicePayment, invoiceId: string) => boolean) {
  const links: InvoicePaymentLink[] = [];
  for (const p of payments) {
    const invoiceId = typeof p.invoice === 'string' ? p.invoice : p.invoice.id;
    const paymentId = p.payment.type === 'payment_intent' ? p.payment.payment_intent : null;
    if (!paymentId || !match(p, invoiceId)) continue;
    const invoice = typeof p.invoice === 'string' ? null : p.invoice;
    links.push({
      invoiceId,
      paymentId,
      customerId: invoice?.customer ?? null,
      workspaceId:
        invoice?.parent?.subscription_details?.metadata.workspace_id ??
        invoice?.subscription_details?.metadata.workspace_id ??
        null,
    });
  }
  return links;
}

function disputeStatus(status: string, closed: boolean): 'open' | 'won' | 'lost' {
  if (status === 'lost') return 'lost';
  if (status === 'won' || status === 'warning_closed' || (closed && status !== 'lost')) return 'won';
  return 'open';
}

/** A verified event's payload in the neutral form; a type the service does not act on is `ignored`. */
export function parseStripeEvent(payload: unknown): BillingEvent {
  const event = EventSchema.parse(payload);
  const base = { id: event.id, type: event.type, occurredAt: event.created };
  const object = event.data.object;
  switch (event.type) {
    case 'checkout.session.completed':
    case 'checkout.session.async_payment_succeeded': {
      const s = SessionSchema.parse(object);
      if (s.mode === 'setup') return { ...base, kind: 'ignored', workspaceId: null, customerId: s.customer ?? null };
      return {
        ...base,
        kind: 'checkout_completed',
        workspaceId: s.metadata.workspace_id ?? s.client_reference_id ?? null,
        customerId: s.customer ?? null,
        mode: s.mode,
        paid: s.payment_status === 'paid' || s.payment_status === 'no_payment_required',
        subscriptionId: s.subscription ?? null,
        paymentId: s.payment_intent ?? null,
        amountCents: s.amount_total ?? 0,
        currency: (s.currency ?? 'usd').toLowerCase(),
        pack: s.metadata.pack ?? null,
      };
    }
    case 'invoice.paid':
    case 'invoice.payment_succeeded':
    case 'invoice.payment_failed': {
      const i = InvoiceSchema.parse(object);
      const line = i.lines?.data.find((l) => l.period)?.period;
      const details = i.parent?.subscription_details;
      return {
        ...base,
        kind: event.type === 'invoice.payment_failed' ? 'invoice_payment_failed' : 'invoice_paid',
        workspaceId: details?.metadata.workspace_id ?? i.subscription_details?.metadata.workspace_id ?? null,
        customerId: i.customer ?? null,
        invoiceId: i.id,
        subscriptionId: details?.subscription ?? i.subscription ?? null,
        paymentId:
          i.payment_intent ??
          paymentLinks(i.payments?.data ?? [], (p, invoiceId) => p.status === 'paid' && invoiceId === i.id)[0]
            ?.paymentId ??
          null,
        amountDueCents: i.amount_due,
        amountPaidCents: i.amount_paid,
        currency: i.currency.toLowerCase(),
        periodStart: line?.start ?? i.period_start ?? null,
        periodEnd: line?.end ?? i.period_end ?? null,
        hostedInvoiceUrl: i.hosted_invoice_url ?? null,
        createdAt: i.created,
      };
    }
    case 'customer.subscription.created':
    case 'customer.subscription.updated':
    case 'customer.subscription.deleted': {
      const s = SubscriptionSchema.parse(object);
      const item = s.items?.data[0];
      return {
        ...base,
        kind: 'subscription_changed',
        workspaceId: s.metadata.workspace_id ?? null,
        customerId: s.customer ?? null,
        subscriptionId: s.id,
        status: s.status,
        currentPeriodStart: s.current_period_start ?? item?.current_period_start ?? null,
        currentPeriodEnd: s.current_period_end ?? item?.current_period_end ?? null,
        cancelAtPeriodEnd: s.cancel_at_period_end ?? false,
        deleted: event.type === 'customer.subscription.deleted',
      };
    }
    case 'charge.refunded': {
      const c = ChargeSchema.parse(object);
      return {
        ...base,
        kind: 'charge_refunded',
        workspaceId: c.metadata.workspace_id ?? null,
        customerId: c.customer ?? null,
        paymentId: c.payment_intent ?? c.id,
        invoiceId: c.invoice ?? null,
        amountCents: c.amount,
        refundedCents: c.amount_refunded,
        currency: c.currency.toLowerCase(),
        createdAt: c.created,
      };
    }
    case 'charge.dispute.created':
    case 'charge.dispute.updated':
    case 'charge.dispute.closed': {
      const d = DisputeSchema.parse(object);
      return {
        ...base,
        kind: 'dispute',
        workspaceId: d.metadata.workspace_id ?? null,
        customerId: null,
        paymentId: d.payment_intent ?? d.charge,
        disputeStatus: disputeStatus(d.status, event.type === 'charge.dispute.closed'),
        amountCents: d.amount,
        currency: d.currency.toLowerCase(),
        createdAt: d.created,
      };
    }
    default:
      return { ...base, kind: 'ignored', workspaceId: null, customerId: null };
  }
}

function providerError(error: unknown): PaymentProviderError {
  if (error instanceof Stripe.errors.StripeError)
    return new PaymentProviderError(`Stripe refused the request: ${error.message}`, error.statusCode ?? null);
  return new PaymentProviderError(
    `Stripe could not be reached: ${error instanceof Error ? error.message : String(error)}`,
    null,
  );
}

export function createStripeProvider(config: StripeConfig): PaymentProvider {
  const base = config.apiBase ? new URL(config.apiBase) : null;
  const stripe = new Stripe(config.secretKey, {
    maxNetworkRetries: 2,
    timeout: 20_000,
    ...(base
      ? {
          host: base.hostname,
          port: Number(base.port || (base.protocol === 'https:' ? 443 : 80)),
          protocol: base.protocol.replace(':', '') as 'http' | 'https',
        }
      : {}),
  });
  const call = async <T>(run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (error) {
      throw providerError(error);
    }
  };
  return {
    name: 'stripe',
    createCustomer: ({ workspaceId, name, email }) =>
      call(
        async () =>
          (
            await stripe.customers.create(
              { name, ...(email ? { email } : {}), metadata: { workspace_id: workspaceId } },
              { idempotencyKey: `customer:${workspaceId}` },
            )
          ).id,
      ),
    createCheckout: (input: CheckoutRequest): Promise<CheckoutSession> =>
      call(async () => {
        const { line } = input;
        const session = await stripe.checkout.sessions.create({
          mode: line.recurring ? 'subscription' : 'payment',
          customer: input.customerId,
          client_reference_id: input.workspaceId,
          success_url: input.successUrl,
          cancel_url: input.cancelUrl,
          metadata: input.metadata,
          line_items: [
            {
              quantity: 1,
              price_data: {
                currency: line.currency,
                unit_amount: line.amountCents,
                product_data: { name: line.name },
                ...(line.recurring ? { recurring: { interval: 'month' as const } } : {}),
              },
            },
          ],
          ...(line.recurring
            ? { subscription_data: { metadata: input.metadata } }
            : { payment_intent_data: { metadata: input.metadata } }),
        });
        if (!session.url)
          throw new PaymentProviderError('Stripe answered a checkout session without an address.', null);
        return {
          id: session.id,
          url: session.url,
          expiresAt: session.expires_at ? new Date(session.expires_at * 1000) : null,
        };
      }),
    createPortal: ({ customerId, returnUrl }) =>
      call(
        async () => (await stripe.billingPortal.sessions.create({ customer: customerId, return_url: returnUrl })).url,
      ),
    setCancelAtPeriodEnd: (subscriptionId, cancel) =>
      call(async () => {
        await stripe.subscriptions.update(subscriptionId, { cancel_at_period_end: cancel });
      }),
    invoicePayments: (query) =>
      call(async () => {
        try {
          if ('invoiceId' in query) {
            const page = await stripe.invoicePayments.list({ invoice: query.invoiceId, status: 'paid', limit: 100 });
            return paymentLinks(
              InvoicePaymentSchema.array().parse(page.data),
              (p, invoiceId) => p.status === 'paid' && invoiceId === query.invoiceId,
            );
          }
          // Only a payment intent can have paid an invoice; a bare charge (`ch_`) never did.
          if (!query.paymentId.startsWith('pi_')) return [];
          // The invoice expanded: a dispute names no customer, and may come before its invoice is recorded.
          const page = await stripe.invoicePayments.list({
            payment: { type: 'payment_intent', payment_intent: query.paymentId },
            expand: ['data.invoice'],
            limit: 100,
          });
          return paymentLinks(
            InvoicePaymentSchema.array().parse(page.data),
            (p) => p.payment.payment_intent === query.paymentId,
          );
        } catch (error) {
          // An invoice or payment this account does not hold links nothing.
          if (error instanceof Stripe.errors.StripeError && error.code === 'resource_missing') return [];
          throw error;
        }
      }),
    parseWebhook(rawBody, signatureHeader) {
      if (!signatureHeader) throw new WebhookSignatureError('The Stripe-Signature header is missing.');
      let payload: unknown;
      try {
        payload = stripe.webhooks.constructEvent(
          rawBody,
          signatureHeader,
          config.webhookSecret,
          webhookToleranceSeconds,
        );
      } catch (error) {
        throw new WebhookSignatureError(error instanceof Error ? error.message : 'The signature does not match.');
      }
      return parseStripeEvent(payload);
    },
  };
}

/** A signed `Stripe-Signature` header for a payload, as Stripe makes them (tests, the local twin). */
export function signStripePayload(payload: string, secret: string, timestamp?: number): string {
  return Stripe.webhooks.generateTestHeaderString({
    payload,
    secret,
    ...(timestamp === undefined ? {} : { timestamp }),
  });
}
