/**
 * Refunds and disputes in the event shapes of the Stripe API version the `stripe` package pins
 * (decision 053): an invoice names no payment intent, a charge names its payment intent and
 * customer but no invoice, a dispute names its payment intent and no customer. Against stripe-mock,
 * whose invoice payments say which payment intent paid which invoice: each payment is one row,
 * its refunds and dispute land on it, and the referring affiliate's commission is clawed back once.
 */
import { describe, expect, it } from 'vitest';
import { createWorkspaceWithAdmin } from '../../worker/provisioning.js';
import { handleBillingEvent } from '../../services/billing/events.js';
import { affiliateBalances } from '../../store/affiliates/ledger.js';
import { setCustomer } from '../../store/billing/accounts.js';
import { events, postStripeEvent, useStripeMock } from '../support/billing.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack } = useTestStack({ workspaces: false });
const stripe = useStripeMock();

let n = 0;
/** A referred workspace with its Stripe customer, and the affiliate who referred it. */
async function referredWorkspace() {
  stripe.configure(stack.integrations);
  n += 1;
  const affiliateWs = await stack.createWorkspace('paid');
  const enrolled = await stack.app.inject({
    method: 'POST',
    url: '/affiliate/',
    headers: withKey(affiliateWs.apiKey),
    payload: { display_name: `Refunds ${n}` },
  });
  expect(enrolled.statusCode).toBe(201);
  const affiliate = enrolled.json<{ id: string; codes: { code: string }[] }>();
  const created = await createWorkspaceWithAdmin(stack.sql, {
    name: `Referred ${n}`,
    plan: 'free',
    affiliateCode: affiliate.codes[0]!.code,
  });
  const workspaceId = created.workspace_id;
  const tag = workspaceId.slice(0, 8);
  const customer = `cus_${tag}`;
  // Made when the workspace first opened checkout (services/billing customerOf).
  await setCustomer(stack.sql, workspaceId, customer);
  return {
    workspaceId,
    apiKey: created.api_key,
    affiliateId: affiliate.id,
    customer,
    invoice: `in_${tag}`,
    paymentIntent: `pi_${tag}`,
  };
}

type Referred = Awaited<ReturnType<typeof referredWorkspace>>;

/** What Stripe holds once the invoice is paid: the invoice payment linking it to its payment intent. */
const holdPayment = (r: Referred, amount: number) =>
  stripe.holdInvoicePayment({
    invoice: r.invoice,
    paymentIntent: r.paymentIntent,
    amount,
    customer: r.customer,
    workspaceId: r.workspaceId,
  });

const payInvoice = (r: Referred, amount: number) =>
  postStripeEvent(
    stack.app,
    events.invoice('invoice.paid', r.workspaceId, { invoice: r.invoice, customer: r.customer, amount }),
  );

const refund = (r: Referred, amount: number, refunded: number, charge?: string) =>
  postStripeEvent(
    stack.app,
    events.refund({
      customer: r.customer,
      paymentIntent: r.paymentIntent,
      amount,
      refunded,
      ...(charge ? { charge } : {}),
    }),
  );

async function payments(r: Referred) {
  const res = await stack.app.inject({ method: 'GET', url: '/billing/payments/', headers: withKey(r.apiKey) });
  expect(res.statusCode).toBe(200);
  return res.json<{
    payments: { id: string; invoice_id: string | null; amount_cents: number; refunded_cents: number }[];
  }>().payments;
}

async function ledger(r: Referred) {
  const rows = await stack.sql<{ kind: string; amount_cents: string }[]>`
    select kind, amount_cents from affiliate_ledger where affiliate_id = ${r.affiliateId}`;
  return rows.map((row) => [row.kind, Number(row.amount_cents)] as const).sort();
}

describe('refunds in the pinned API version', () => {
  it('lands a refund named by payment intent and customer on the invoice payment, and claws the commission back once', async () => {
    const r = await referredWorkspace();
    holdPayment(r, 4900);
    expect((await payInvoice(r, 4900)).statusCode).toBe(200);
    expect(await affiliateBalances(stack.sql, r.affiliateId)).toEqual({ availableCents: 0, heldCents: 980 });

    const res = await refund(r, 4900, 4900, `ch_${r.workspaceId.slice(0, 8)}`);
    expect(res.statusCode).toBe(200);
    expect(res.json().outcome).toBe('refunded 4900 of 4900 cents');
    expect(await payments(r)).toEqual([
      expect.objectContaining({ id: r.paymentIntent, invoice_id: r.invoice, amount_cents: 4900, refunded_cents: 4900 }),
    ]);
    expect(await ledger(r)).toEqual([
      ['clawback_refund', -980],
      ['commission', 980],
    ]);
    expect(await affiliateBalances(stack.sql, r.affiliateId)).toEqual({ availableCents: 0, heldCents: 0 });

    // Stripe sends the charge again under another event (charge.refunded after a refund's update): nothing moves.
    expect((await refund(r, 4900, 4900, `ch_${r.workspaceId.slice(0, 8)}`)).statusCode).toBe(200);
    expect(await payments(r)).toHaveLength(1);
    expect(await ledger(r)).toHaveLength(2);
  });

  it('claws back partial refunds by their share, on the one payment row', async () => {
    const r = await referredWorkspace();
    holdPayment(r, 4900);
    await payInvoice(r, 4900);
    expect((await refund(r, 4900, 1225)).json().outcome).toBe('refunded 1225 of 4900 cents');
    expect(await affiliateBalances(stack.sql, r.affiliateId)).toEqual({ availableCents: 0, heldCents: 735 });
    await refund(r, 4900, 4900);
    await refund(r, 4900, 4900);
    expect(await payments(r)).toEqual([
      expect.objectContaining({ id: r.paymentIntent, invoice_id: r.invoice, refunded_cents: 4900 }),
    ]);
    expect(await ledger(r)).toEqual([
      ['clawback_refund', -245],
      ['clawback_refund', -735],
      ['commission', 980],
    ]);
  });

  it('applies a refund that arrives before its invoice is paid when the commission is made', async () => {
    const r = await referredWorkspace();
    holdPayment(r, 4900);
    expect((await refund(r, 4900, 4900)).statusCode).toBe(200);
    expect((await payInvoice(r, 4900)).statusCode).toBe(200);
    expect(await payments(r)).toEqual([
      expect.objectContaining({ id: r.paymentIntent, invoice_id: r.invoice, amount_cents: 4900, refunded_cents: 4900 }),
    ]);
    expect(await ledger(r)).toEqual([
      ['clawback_refund', -980],
      ['commission', 980],
    ]);
  });

  it("lands a refund on an invoice's payment recorded under the invoice's id before its payment intent was known", async () => {
    const r = await referredWorkspace();
    // As recorded before invoice payments were looked up: the invoice's event named no payment.
    await handleBillingEvent(stack.sql, {
      id: `evt_legacy_${r.invoice}`,
      type: 'invoice.paid',
      occurredAt: new Date(),
      workspaceId: r.workspaceId,
      customerId: r.customer,
      kind: 'invoice_paid',
      invoiceId: r.invoice,
      subscriptionId: null,
      paymentId: null,
      amountDueCents: 4900,
      amountPaidCents: 4900,
      currency: 'usd',
      periodStart: null,
      periodEnd: null,
      hostedInvoiceUrl: null,
      createdAt: new Date(),
    });
    holdPayment(r, 4900);
    expect((await refund(r, 4900, 4900)).statusCode).toBe(200);
    expect(await payments(r)).toEqual([
      expect.objectContaining({ id: r.invoice, invoice_id: r.invoice, refunded_cents: 4900 }),
    ]);
    expect(await ledger(r)).toEqual([
      ['clawback_refund', -980],
      ['commission', 980],
    ]);
  });

  it('claws back on a dispute named only by payment intent, before or after the payment, and reverses it when won', async () => {
    const r = await referredWorkspace();
    holdPayment(r, 10000);
    const id = `dp_${r.workspaceId.slice(0, 8)}`;
    // Before the invoice's payment: the workspace comes from the invoice payment's invoice.
    const opened = await postStripeEvent(
      stack.app,
      events.dispute('charge.dispute.created', {
        paymentIntent: r.paymentIntent,
        amount: 10000,
        status: 'needs_response',
        id,
      }),
    );
    expect(opened.json().outcome).toBe('dispute open');
    await payInvoice(r, 10000);
    expect(await affiliateBalances(stack.sql, r.affiliateId)).toEqual({ availableCents: 0, heldCents: 0 });
    const won = events.dispute('charge.dispute.closed', {
      paymentIntent: r.paymentIntent,
      amount: 10000,
      status: 'won',
      id,
    });
    expect((await postStripeEvent(stack.app, won)).json().outcome).toBe('dispute won');
    await postStripeEvent(stack.app, won);
    expect(await affiliateBalances(stack.sql, r.affiliateId)).toEqual({ availableCents: 0, heldCents: 2000 });
    expect(await payments(r)).toEqual([
      expect.objectContaining({ id: r.paymentIntent, invoice_id: r.invoice, amount_cents: 10000 }),
    ]);
    expect(await ledger(r)).toEqual([
      ['clawback_dispute', -2000],
      ['commission', 2000],
      ['dispute_reversal', 2000],
    ]);

    // After the payment, a lost dispute of another workspace's invoice stands.
    const other = await referredWorkspace();
    holdPayment(other, 4900);
    await payInvoice(other, 4900);
    await postStripeEvent(
      stack.app,
      events.dispute('charge.dispute.created', {
        paymentIntent: other.paymentIntent,
        amount: 4900,
        status: 'needs_response',
      }),
    );
    await postStripeEvent(
      stack.app,
      events.dispute('charge.dispute.closed', { paymentIntent: other.paymentIntent, amount: 4900, status: 'lost' }),
    );
    expect(await payments(other)).toEqual([
      expect.objectContaining({ id: other.paymentIntent, invoice_id: other.invoice }),
    ]);
    expect(await ledger(other)).toEqual([
      ['clawback_dispute', -980],
      ['commission', 980],
    ]);
  });

  it('still reads the links of the older shapes (invoice.payment_intent, charge.invoice)', async () => {
    // Stripe holds no invoice payment here: the links can only come from the events.
    const r = await referredWorkspace();
    const paid = events.invoice('invoice.paid', r.workspaceId, { invoice: r.invoice, customer: r.customer });
    paid.data.object.payment_intent = r.paymentIntent;
    paid.api_version = '2024-06-20';
    await postStripeEvent(stack.app, paid);
    const refunded = events.refund({
      customer: r.customer,
      paymentIntent: r.paymentIntent,
      amount: 4900,
      refunded: 4900,
    });
    refunded.data.object.invoice = r.invoice;
    refunded.api_version = '2024-06-20';
    expect((await postStripeEvent(stack.app, refunded)).statusCode).toBe(200);
    expect(await payments(r)).toEqual([
      expect.objectContaining({ id: r.paymentIntent, invoice_id: r.invoice, refunded_cents: 4900 }),
    ]);
    expect(await ledger(r)).toEqual([
      ['clawback_refund', -980],
      ['commission', 980],
    ]);
  });

  it('answers 502 and records nothing when Stripe cannot be asked, and applies the event when it is delivered again', async () => {
    const r = await referredWorkspace();
    holdPayment(r, 4900);
    const event = events.invoice('invoice.paid', r.workspaceId, { invoice: r.invoice, customer: r.customer });
    const { createStripeProvider } = await import('../../integrations/payments/stripe.js');
    stack.integrations.payments = {
      provider: createStripeProvider({
        secretKey: 'sk_test_billing',
        webhookSecret: 'whsec_test_billing',
        apiBase: 'http://127.0.0.1:9',
      }),
      returnUrl: 'https://app.example.com/billing/',
    };
    const failed = await postStripeEvent(stack.app, event);
    expect(failed.statusCode).toBe(502);
    expect(failed.json().detail).toMatch(/could not be linked to its invoice/);
    expect(await stack.sql`select 1 from billing_events where event_id = ${event.id}`).toHaveLength(0);
    stripe.configure(stack.integrations);
    expect((await postStripeEvent(stack.app, event)).json()).toMatchObject({ duplicate: false });
    expect((await refund(r, 4900, 4900)).json().outcome).toBe('refunded 4900 of 4900 cents');
    expect(await payments(r)).toEqual([
      expect.objectContaining({ id: r.paymentIntent, invoice_id: r.invoice, refunded_cents: 4900 }),
    ]);
    expect(await ledger(r)).toEqual([
      ['clawback_refund', -980],
      ['commission', 980],
    ]);
  });
});
