/**
 * Billing tests' helpers: stripe-mock as the provider, and Stripe events in the shapes Stripe
 * sends them at the API version the `stripe` package pins (ids, `created` in unix seconds, the
 * object under `data.object`; an invoice names no payment intent and a charge no invoice),
 * signed with the package's test-header helper and posted to the webhook route.
 *
 * stripe-mock keeps no state, so it cannot say which payment paid which invoice: a thin front
 * passes every request to it (it still checks each against Stripe's OpenAPI description) and
 * answers `GET /v1/invoice_payments` from the invoice payments the test says Stripe holds.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll } from 'vitest';
import { createStripeProvider, signStripePayload } from '../../integrations/payments/stripe.js';
import type { Integrations } from '../../integrations/config.js';
import { startStripeMock, type StripeMock } from '../../sim/stripe-mock.js';

export const webhookSecret = 'whsec_test_billing';

/** An invoice payment Stripe holds: the payment intent that paid an invoice. */
export interface HeldInvoicePayment {
  invoice: string;
  paymentIntent: string;
  amount: number;
  customer: string;
  workspaceId: string;
  subscription?: string;
}

/**
 * stripe-mock for the file (behind the front), a function that points an integrations object at
 * it, and `holdInvoicePayment` to say which payment intent paid which invoice.
 */
export function useStripeMock() {
  const ctx = {} as {
    mock: StripeMock;
    configure: (integrations: Integrations) => void;
    holdInvoicePayment: (payment: HeldInvoicePayment) => void;
  };
  const held: HeldInvoicePayment[] = [];
  beforeAll(async () => {
    const upstream = await startStripeMock();
    const front = await startInvoicePaymentsFront(upstream.apiBase, held);
    ctx.mock = {
      apiBase: front.apiBase,
      stop: async () => {
        await front.stop();
        await upstream.stop();
      },
    };
    ctx.configure = (integrations) => {
      integrations.payments = {
        provider: createStripeProvider({ secretKey: 'sk_test_billing', webhookSecret, apiBase: ctx.mock.apiBase }),
        returnUrl: 'https://app.example.com/billing/',
      };
    };
    ctx.holdInvoicePayment = (payment) => held.push(payment);
  });
  afterAll(() => ctx.mock?.stop());
  return ctx;
}

const hopHeaders = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive']);

/** Passes requests to stripe-mock; its answer to a valid invoice-payments list gets the held payments that match. */
async function startInvoicePaymentsFront(upstream: string, held: readonly HeldInvoicePayment[]) {
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      void (async () => {
        const method = request.method ?? 'GET';
        const answer = await fetch(new URL(request.url ?? '/', upstream), {
          method,
          headers: forwardable(request.headers),
          ...(method === 'GET' || method === 'HEAD' ? {} : { body: Buffer.concat(chunks) }),
        });
        let body = await answer.text();
        const url = new URL(request.url ?? '/', 'http://front');
        if (method === 'GET' && url.pathname === '/v1/invoice_payments' && answer.ok)
          body = JSON.stringify(invoicePaymentsAnswer(JSON.parse(body) as StripeList, url.searchParams, held));
        response.writeHead(answer.status, {
          'content-type': answer.headers.get('content-type') ?? 'application/json',
          'request-id': answer.headers.get('request-id') ?? rid('req'),
        });
        response.end(body);
      })().catch((error: unknown) => {
        response.writeHead(500, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: { type: 'api_error', message: String(error) } }));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    apiBase: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function forwardable(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers))
    if (value !== undefined && !hopHeaders.has(name)) out[name] = Array.isArray(value) ? value.join(', ') : value;
  return out;
}

interface StripeList {
  object: 'list';
  data: Record<string, unknown>[];
  has_more: boolean;
  url: string;
}

/** Stripe's answer for the held payments matching the query, each shaped on stripe-mock's own fixture. */
function invoicePaymentsAnswer(fixture: StripeList, query: URLSearchParams, held: readonly HeldInvoicePayment[]) {
  const template = fixture.data[0] ?? {};
  const invoice = query.get('invoice');
  const paymentIntent = query.get('payment[payment_intent]');
  const status = query.get('status');
  const expandInvoice = [...query].some(([key, value]) => key.startsWith('expand') && value === 'data.invoice');
  const data = held
    .filter(
      (p) =>
        (!invoice || p.invoice === invoice) &&
        (!paymentIntent || p.paymentIntent === paymentIntent) &&
        (!status || status === 'paid'),
    )
    .map((p) => {
      const invoiceObject = {
        ...(typeof template.invoice === 'object' ? template.invoice : { object: 'invoice' }),
        id: p.invoice,
        customer: p.customer,
        parent: {
          type: 'subscription_details',
          quote_details: null,
          subscription_details: {
            subscription: p.subscription ?? rid('sub'),
            metadata: { workspace_id: p.workspaceId },
          },
        },
      };
      return {
        ...template,
        id: `inpay_${p.invoice}_${p.paymentIntent}`,
        object: 'invoice_payment',
        amount_paid: p.amount,
        amount_requested: p.amount,
        currency: 'usd',
        invoice: expandInvoice ? invoiceObject : p.invoice,
        is_default: true,
        livemode: false,
        payment: { type: 'payment_intent', payment_intent: p.paymentIntent },
        status: 'paid',
      };
    });
  return { ...fixture, data, has_more: false };
}

const rid = (prefix: string) => `${prefix}_${randomBytes(8).toString('hex')}`;
const unix = (d: Date) => Math.floor(d.getTime() / 1000);

export interface StripeEventJson {
  id: string;
  object: 'event';
  type: string;
  created: number;
  api_version: string;
  livemode: false;
  data: { object: Record<string, unknown> };
}

export function stripeEvent(type: string, object: Record<string, unknown>, at = new Date()): StripeEventJson {
  return {
    id: rid('evt'),
    object: 'event',
    type,
    created: unix(at),
    api_version: '2026-10-28.endive',
    livemode: false,
    data: { object },
  };
}

export const events = {
  subscriptionCheckout: (workspaceId: string, o: { customer?: string; subscription?: string; at?: Date } = {}) =>
    stripeEvent(
      'checkout.session.completed',
      {
        id: rid('cs_test'),
        object: 'checkout.session',
        mode: 'subscription',
        payment_status: 'paid',
        status: 'complete',
        customer: o.customer ?? rid('cus'),
        subscription: o.subscription ?? rid('sub'),
        payment_intent: null,
        amount_total: 4900,
        currency: 'usd',
        client_reference_id: workspaceId,
        metadata: { workspace_id: workspaceId },
      },
      o.at,
    ),
  packCheckout: (
    workspaceId: string,
    pack: string,
    o: { paymentIntent?: string; amount?: number; customer?: string; at?: Date } = {},
  ) =>
    stripeEvent(
      'checkout.session.completed',
      {
        id: rid('cs_test'),
        object: 'checkout.session',
        mode: 'payment',
        payment_status: 'paid',
        status: 'complete',
        customer: o.customer ?? rid('cus'),
        subscription: null,
        payment_intent: o.paymentIntent ?? rid('pi'),
        amount_total: o.amount ?? 1000,
        currency: 'usd',
        client_reference_id: workspaceId,
        metadata: { workspace_id: workspaceId, pack },
      },
      o.at,
    ),
  invoice: (
    type: 'invoice.paid' | 'invoice.payment_failed',
    workspaceId: string,
    o: {
      invoice?: string;
      subscription?: string;
      customer?: string;
      amount?: number;
      periodStart?: Date;
      at?: Date;
    } = {},
  ) => {
    const start = o.periodStart ?? o.at ?? new Date();
    const end = new Date(start.getTime() + 30 * 86_400_000);
    const amount = o.amount ?? 4900;
    return stripeEvent(
      type,
      {
        // No `payment_intent` (gone since 2025-03-31): invoice payments link it.
        id: o.invoice ?? rid('in'),
        object: 'invoice',
        customer: o.customer ?? rid('cus'),
        status: type === 'invoice.paid' ? 'paid' : 'open',
        amount_due: amount,
        amount_paid: type === 'invoice.paid' ? amount : 0,
        currency: 'usd',
        created: unix(o.at ?? new Date()),
        period_start: unix(start),
        period_end: unix(start),
        hosted_invoice_url: 'https://invoice.stripe.com/i/test',
        parent: {
          type: 'subscription_details',
          subscription_details: { subscription: o.subscription ?? rid('sub'), metadata: { workspace_id: workspaceId } },
        },
        lines: { object: 'list', data: [{ period: { start: unix(start), end: unix(end) } }] },
      },
      o.at,
    );
  },
  subscription: (
    type: 'customer.subscription.created' | 'customer.subscription.updated' | 'customer.subscription.deleted',
    workspaceId: string,
    o: {
      subscription: string;
      status: string;
      cancelAtPeriodEnd?: boolean;
      periodStart?: Date;
      customer?: string;
      at?: Date;
    },
  ) => {
    const start = o.periodStart ?? o.at ?? new Date();
    return stripeEvent(
      type,
      {
        id: o.subscription,
        object: 'subscription',
        customer: o.customer ?? null,
        status: o.status,
        cancel_at_period_end: o.cancelAtPeriodEnd ?? false,
        items: {
          object: 'list',
          data: [
            {
              current_period_start: unix(start),
              current_period_end: unix(new Date(start.getTime() + 30 * 86_400_000)),
            },
          ],
        },
        metadata: { workspace_id: workspaceId },
      },
      o.at,
    );
  },
  /**
   * A charge's refund as Stripe sends it: the customer and the payment intent, no invoice (gone
   * since 2025-03-31); `amount_refunded` is the charge's total so far. Metadata is the charge's own
   * (empty for an invoice's payment).
   */
  refund: (o: {
    customer: string;
    paymentIntent: string;
    amount: number;
    refunded: number;
    charge?: string;
    metadata?: Record<string, string>;
    at?: Date;
  }) =>
    stripeEvent(
      'charge.refunded',
      {
        id: o.charge ?? rid('ch'),
        object: 'charge',
        customer: o.customer,
        payment_intent: o.paymentIntent,
        amount: o.amount,
        amount_captured: o.amount,
        amount_refunded: o.refunded,
        refunded: o.refunded >= o.amount,
        captured: true,
        paid: true,
        status: 'succeeded',
        currency: 'usd',
        created: unix(o.at ?? new Date()),
        metadata: o.metadata ?? {},
      },
      o.at,
    ),
  /** A dispute as Stripe sends it: its charge and payment intent, no customer, its own (empty) metadata. */
  dispute: (
    type: 'charge.dispute.created' | 'charge.dispute.updated' | 'charge.dispute.closed',
    o: { paymentIntent: string; amount: number; status: string; id?: string; charge?: string },
  ) =>
    stripeEvent(type, {
      id: o.id ?? rid('dp'),
      object: 'dispute',
      charge: o.charge ?? rid('ch'),
      payment_intent: o.paymentIntent,
      amount: o.amount,
      currency: 'usd',
      status: o.status,
      reason: 'fraudulent',
      is_charge_refundable: false,
      livemode: false,
      created: unix(new Date()),
      metadata: {},
    }),
};

/** Posts an event as Stripe does: the raw JSON and its `Stripe-Signature` (signed now unless `timestamp`). */
export function postStripeEvent(
  app: FastifyInstance,
  event: StripeEventJson | string,
  o: { secret?: string; timestamp?: number; signature?: string | null } = {},
) {
  const payload = typeof event === 'string' ? event : JSON.stringify(event);
  const signature =
    o.signature === undefined ? signStripePayload(payload, o.secret ?? webhookSecret, o.timestamp) : o.signature;
  return app.inject({
    method: 'POST',
    url: '/billing/webhooks/stripe/',
    headers: { 'content-type': 'application/json', ...(signature === null ? {} : { 'stripe-signature': signature }) },
    payload,
  });
}
