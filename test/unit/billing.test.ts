/**
 * Billing's pure rules (decision 037): grant periods, what is due at a moment, the plan of a
 * subscription, a pack's credits to take back.
 */
import { describe, expect, it } from 'vitest';
import { addMonths, decideBillingDue, grantPeriodAt, type BillingSnapshot } from '../../domain/billing/periods.js';
import { packCreditsToRevoke, planForSubscription } from '../../domain/billing/provider-events.js';
import { parseStripeEvent } from '../../integrations/payments/stripe.js';

const d = (s: string) => new Date(s);

describe('grant periods', () => {
  it('count calendar months from the anchor, clamping to the end of shorter months', () => {
    expect(addMonths(d('2026-01-31T10:00:00Z'), 1).toISOString()).toBe('2026-02-28T10:00:00.000Z');
    expect(addMonths(d('2028-01-31T10:00:00Z'), 1).toISOString()).toBe('2028-02-29T10:00:00.000Z');
    expect(addMonths(d('2026-01-31T10:00:00Z'), 2).toISOString()).toBe('2026-03-31T10:00:00.000Z');
    expect(addMonths(d('2026-11-15T00:00:00Z'), 2).toISOString()).toBe('2027-01-15T00:00:00.000Z');
  });

  it('find the period containing a moment, its start included and its end excluded', () => {
    const anchor = d('2026-01-31T10:00:00Z');
    expect(grantPeriodAt(anchor, d('2026-01-31T10:00:00Z'))).toMatchObject({ index: 0 });
    expect(grantPeriodAt(anchor, d('2026-02-28T09:59:59Z'))).toMatchObject({ index: 0 });
    expect(grantPeriodAt(anchor, d('2026-02-28T10:00:00Z'))).toMatchObject({
      index: 1,
      end: d('2026-03-31T10:00:00Z'),
    });
    expect(grantPeriodAt(anchor, d('2026-03-30T00:00:00Z'))).toMatchObject({ index: 1 });
    expect(grantPeriodAt(anchor, d('2027-02-01T00:00:00Z'))).toMatchObject({
      index: 12,
      start: d('2027-01-31T10:00:00Z'),
    });
    expect(grantPeriodAt(anchor, d('2025-12-01T00:00:00Z'))).toMatchObject({ index: 0 });
  });
});

describe('decideBillingDue', () => {
  const base: BillingSnapshot = {
    plan: 'paid',
    grantAnchor: d('2026-01-10T00:00:00Z'),
    cancelAtPeriodEnd: false,
    currentPeriodEnd: null,
    graceEndsAt: null,
    designPartner: false,
    lastGrantedPeriodStart: d('2026-03-10T00:00:00Z'),
  };
  const now = d('2026-03-15T00:00:00Z');
  const cases: [
    string,
    Partial<BillingSnapshot>,
    { downgrade: string | null; plan: string; grants: number[]; wake: string },
  ][] = [
    ['paid, nothing pending', {}, { downgrade: null, plan: 'paid', grants: [2000], wake: '2026-04-10T00:00:00.000Z' }],
    [
      'paid, grace ended',
      { graceEndsAt: d('2026-03-14T00:00:00Z') },
      { downgrade: 'grace_ended', plan: 'free', grants: [100], wake: '2026-04-10T00:00:00.000Z' },
    ],
    [
      'paid, grace running: wakes at its end',
      { graceEndsAt: d('2026-03-20T00:00:00Z') },
      { downgrade: null, plan: 'paid', grants: [2000], wake: '2026-03-20T00:00:00.000Z' },
    ],
    [
      'paid, cancelled and the period ended',
      { cancelAtPeriodEnd: true, currentPeriodEnd: d('2026-03-10T00:00:00Z') },
      { downgrade: 'period_ended', plan: 'free', grants: [100], wake: '2026-04-10T00:00:00.000Z' },
    ],
    [
      'paid, cancelled, period running: wakes at its end',
      { cancelAtPeriodEnd: true, currentPeriodEnd: d('2026-04-01T00:00:00Z') },
      { downgrade: null, plan: 'paid', grants: [2000], wake: '2026-04-01T00:00:00.000Z' },
    ],
    [
      'paid, not cancelled, past the period end',
      { currentPeriodEnd: d('2026-03-10T00:00:00Z') },
      { downgrade: null, plan: 'paid', grants: [2000], wake: '2026-04-10T00:00:00.000Z' },
    ],
    [
      'free, grace and cancel flags ignored',
      {
        plan: 'free',
        graceEndsAt: d('2026-03-14T00:00:00Z'),
        cancelAtPeriodEnd: true,
        currentPeriodEnd: d('2026-03-01T00:00:00Z'),
      },
      { downgrade: null, plan: 'free', grants: [100], wake: '2026-04-10T00:00:00.000Z' },
    ],
    [
      'design partner: both grants',
      { designPartner: true },
      { downgrade: null, plan: 'paid', grants: [2000, 1000], wake: '2026-04-10T00:00:00.000Z' },
    ],
  ];
  it.each(cases)('%s', (_name, change, want) => {
    const due = decideBillingDue({ ...base, ...change }, now);
    expect(due.downgrade).toBe(want.downgrade);
    expect(due.plan).toBe(want.plan);
    expect(due.grants.map((g) => g.amount)).toEqual(want.grants);
    expect(due.nextWakeAt.toISOString()).toBe(want.wake);
    // The cause names the period, so each period is granted once.
    for (const g of due.grants) expect(g.causeKey).toMatch(/:2026-03-10T00:00:00\.000Z$/);
  });
});

describe('missed periods', () => {
  const base: BillingSnapshot = {
    plan: 'free',
    grantAnchor: d('2026-01-10T00:00:00Z'),
    cancelAtPeriodEnd: false,
    currentPeriodEnd: null,
    graceEndsAt: null,
    designPartner: false,
    lastGrantedPeriodStart: null,
  };
  const starts = (s: BillingSnapshot, now: string) =>
    decideBillingDue(s, d(now)).grants.map((g) => g.causeKey.slice('plan-grant:'.length, 'plan-grant:'.length + 10));
  it('grant only the current period before any grant', () => {
    expect(starts(base, '2026-05-01T00:00:00Z')).toEqual(['2026-04-10']);
  });
  it('grant every period started since the last grant, oldest first', () => {
    expect(starts({ ...base, lastGrantedPeriodStart: d('2026-01-10T00:00:00Z') }, '2026-04-11T00:00:00Z')).toEqual([
      '2026-02-10',
      '2026-03-10',
      '2026-04-10',
    ]);
    expect(starts({ ...base, lastGrantedPeriodStart: d('2026-04-10T00:00:00Z') }, '2026-04-11T00:00:00Z')).toEqual([
      '2026-04-10',
    ]);
  });
  it('start again from a moved anchor (an upgrade): its first period is new', () => {
    expect(
      starts(
        { ...base, grantAnchor: d('2026-04-20T00:00:00Z'), lastGrantedPeriodStart: d('2026-04-10T00:00:00Z') },
        '2026-04-21T00:00:00Z',
      ),
    ).toEqual(['2026-04-20']);
  });
});

describe('subscription statuses and pack refunds', () => {
  it('map a subscription status to a plan, or to no change', () => {
    expect(planForSubscription('active', false)).toBe('paid');
    expect(planForSubscription('trialing', false)).toBe('paid');
    expect(planForSubscription('past_due', false)).toBeNull();
    expect(planForSubscription('incomplete', false)).toBeNull();
    expect(planForSubscription('unpaid', false)).toBe('free');
    expect(planForSubscription('active', true)).toBe('free');
  });

  it('take back the refunded share rounded up, or everything while a dispute is open or lost', () => {
    const p = { credits: 1000, amountCents: 1000, refundedCents: 0, disputeStatus: null };
    expect(packCreditsToRevoke(p)).toBe(0);
    expect(packCreditsToRevoke({ ...p, refundedCents: 333 })).toBe(333);
    expect(packCreditsToRevoke({ ...p, credits: 5000, amountCents: 4500, refundedCents: 1 })).toBe(2);
    expect(packCreditsToRevoke({ ...p, refundedCents: 5000 })).toBe(1000);
    expect(packCreditsToRevoke({ ...p, disputeStatus: 'open' })).toBe(1000);
    expect(packCreditsToRevoke({ ...p, disputeStatus: 'lost' })).toBe(1000);
    expect(packCreditsToRevoke({ ...p, refundedCents: 200, disputeStatus: 'won' })).toBe(200);
  });
});

describe('Stripe events', () => {
  it('read the subscription of an invoice from its 2025+ place and the older one', () => {
    const invoice = (extra: Record<string, unknown>) => ({
      id: 'evt_1',
      type: 'invoice.paid',
      created: 1_800_000_000,
      data: {
        object: {
          id: 'in_1',
          customer: 'cus_1',
          amount_due: 4900,
          amount_paid: 4900,
          currency: 'USD',
          created: 1_800_000_000,
          ...extra,
        },
      },
    });
    expect(
      parseStripeEvent(
        invoice({ parent: { subscription_details: { subscription: 'sub_new', metadata: { workspace_id: 'w' } } } }),
      ),
    ).toMatchObject({ kind: 'invoice_paid', subscriptionId: 'sub_new', workspaceId: 'w', currency: 'usd' });
    expect(parseStripeEvent(invoice({ subscription: 'sub_old' }))).toMatchObject({
      subscriptionId: 'sub_old',
      workspaceId: null,
    });
    expect(parseStripeEvent({ id: 'evt_2', type: 'customer.created', created: 1, data: { object: {} } })).toMatchObject(
      { kind: 'ignored' },
    );
  });

  it("read an invoice's payment and a charge's invoice where the pinned version has them, and the older places", () => {
    const event = (type: string, object: Record<string, unknown>) => ({
      id: 'evt_3',
      type,
      created: 1_800_000_000,
      data: { object },
    });
    const invoice = { id: 'in_1', amount_due: 4900, amount_paid: 4900, currency: 'usd', created: 1_800_000_000 };
    // Since 2025-03-31: no payment_intent; `payments` only when an event carries it.
    expect(parseStripeEvent(event('invoice.paid', invoice))).toMatchObject({ invoiceId: 'in_1', paymentId: null });
    const payment = (paymentIntent: string, status: string, of = 'in_1') => ({
      invoice: of,
      status,
      payment: { type: 'payment_intent', payment_intent: paymentIntent },
    });
    expect(
      parseStripeEvent(
        event('invoice.paid', {
          ...invoice,
          payments: {
            data: [payment('pi_open', 'open'), payment('pi_other', 'paid', 'in_2'), payment('pi_1', 'paid')],
          },
        }),
      ),
    ).toMatchObject({ paymentId: 'pi_1' });
    expect(parseStripeEvent(event('invoice.paid', { ...invoice, payment_intent: 'pi_old' }))).toMatchObject({
      paymentId: 'pi_old',
    });
    const charge = {
      id: 'ch_1',
      customer: 'cus_1',
      payment_intent: 'pi_1',
      amount: 4900,
      amount_refunded: 1225,
      currency: 'usd',
      created: 1_800_000_000,
    };
    expect(parseStripeEvent(event('charge.refunded', charge))).toMatchObject({
      kind: 'charge_refunded',
      customerId: 'cus_1',
      paymentId: 'pi_1',
      invoiceId: null,
      refundedCents: 1225,
    });
    expect(parseStripeEvent(event('charge.refunded', { ...charge, invoice: 'in_old' }))).toMatchObject({
      invoiceId: 'in_old',
    });
  });
});
