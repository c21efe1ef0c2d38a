/**
 * Billing tests' helpers: stripe-mock as the provider, and Stripe events in the shapes Stripe
 * sends them (ids, `created` in unix seconds, the object under `data.object`), signed with the
 * package's test-header helper and posted to the webhook route.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll } from 'vitest';
import { createStripeProvider, signStripePayload } from '../../integrations/payments/stripe.js';
import type { Integrations } from '../../integrations/config.js';
import { startStripeMock, type StripeMock } from '../../sim/stripe-mock.js';

export const webhookSecret = 'whsec_test_billing';

/** stripe-mock for the file, and a function that points an integrations object at it. */
export function useStripeMock() {
  const ctx = {} as { mock: StripeMock; configure: (integrations: Integrations) => void };
  beforeAll(async () => {
    ctx.mock = await startStripeMock();
    ctx.configure = (integrations) => {
      integrations.payments = {
        provider: createStripeProvider({ secretKey: 'sk_test_billing', webhookSecret, apiBase: ctx.mock.apiBase }),
        returnUrl: 'https://app.example.com/billing/',
      };
    };
  });
  afterAll(() => ctx.mock?.stop());
  return ctx;
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
        id: o.invoice ?? rid('in'),
        object: 'invoice',
        customer: o.customer ?? null,
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
  refund: (workspaceId: string, o: { paymentIntent: string; amount: number; refunded: number; at?: Date }) =>
    stripeEvent(
      'charge.refunded',
      {
        id: rid('ch'),
        object: 'charge',
        customer: null,
        payment_intent: o.paymentIntent,
        amount: o.amount,
        amount_refunded: o.refunded,
        currency: 'usd',
        created: unix(o.at ?? new Date()),
        metadata: { workspace_id: workspaceId },
      },
      o.at,
    ),
  dispute: (
    type: 'charge.dispute.created' | 'charge.dispute.closed',
    workspaceId: string,
    o: { paymentIntent: string; amount: number; status: string; id?: string },
  ) =>
    stripeEvent(type, {
      id: o.id ?? rid('dp'),
      object: 'dispute',
      charge: rid('ch'),
      payment_intent: o.paymentIntent,
      amount: o.amount,
      currency: 'usd',
      status: o.status,
      created: unix(new Date()),
      metadata: { workspace_id: workspaceId },
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
