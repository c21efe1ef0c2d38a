/**
 * Billing (decision 037) against stripe-mock and signed webhook payloads: checkout and the portal,
 * the webhook's signature, replay and ordering rules, the plan's effect on API keys, a downgrade at
 * period end, credit packs with refunds and disputes, referrals and design partners.
 */
import { describe, expect, it, vi } from 'vitest';
import { getBalance } from '../../store/platform/credits.js';
import { useTestStack, withKey, withToken, type TestWorkspace } from '../support/test-stack.js';
import { events, postStripeEvent, useStripeMock } from '../support/billing.js';
import { createWorkspaceWithAdmin, decideDesignPartnerApplication } from '../../worker/provisioning.js';
import { settleBillingAt } from '../../services/billing/settle.js';
import { lockBillingAccount, setCustomer, upgradeToPaid } from '../../store/billing/accounts.js';

const { stack } = useTestStack({ workspaces: false });
const stripe = useStripeMock();

const plan = async (workspaceId: string) =>
  (await stack.sql<{ plan: string }[]>`select plan from workspaces where id = ${workspaceId}`)[0]!.plan;
const available = async (workspaceId: string) => (await getBalance(stack.sql, workspaceId)).available;
const billing = (ws: TestWorkspace) =>
  stack.app.inject({ method: 'GET', url: '/billing/', headers: withKey(ws.apiKey) });
/** Checkout for `purchase` (the plan or a credit pack), as the holder of `headers`. */
const postCheckout = (headers: Record<string, string>, purchase: string) =>
  stack.app.inject({ method: 'POST', url: '/billing/checkout/', headers, payload: { purchase } });
const postPortal = (headers: Record<string, string>) =>
  stack.app.inject({ method: 'POST', url: '/billing/portal/', headers });
const unconfigure = () => {
  stack.integrations.payments = { missing: ['STRIPE_SECRET_KEY', 'STRIPE_WEBHOOK_SECRET'] };
};

describe('without a payment provider', () => {
  it('shows the plan and credits, and says plainly that billing is not configured for checkout, the portal and the webhook', async () => {
    unconfigure();
    const ws = await stack.createWorkspace('free');
    const overview = await billing(ws);
    expect(overview.statusCode).toBe(200);
    expect(overview.json()).toMatchObject({
      plan: 'free',
      billing_configured: false,
      next_invoice: null,
      grants_per_period: { plan: 100, design_partner: 0, total: 100 },
    });
    for (const [method, url, payload] of [
      ['POST', '/billing/checkout/', { purchase: 'plan' }],
      ['POST', '/billing/portal/', undefined],
    ] as const) {
      const res = await stack.app.inject({
        method,
        url,
        headers: withToken(ws.accessToken),
        ...(payload ? { payload } : {}),
      });
      expect(res.statusCode).toBe(503);
      expect(res.json().detail).toMatch(/Billing is not configured.*STRIPE_SECRET_KEY.*admin command line/);
    }
    expect((await postStripeEvent(stack.app, events.subscriptionCheckout(ws.workspaceId))).statusCode).toBe(503);
    expect(await plan(ws.workspaceId)).toBe('free');
  });
});

describe('with Stripe (stripe-mock)', () => {
  const configure = () => stripe.configure(stack.integrations);

  it("opens checkout for the plan and for a pack, and the portal once a customer exists; admins signed in only (a free plan's keys read only)", async () => {
    configure();
    const ws = await stack.createWorkspace('free');
    const portalBefore = await postPortal(withToken(ws.accessToken));
    expect(portalBefore.statusCode).toBe(409);
    const checkout = await postCheckout(withToken(ws.accessToken), 'plan');
    expect(checkout.statusCode).toBe(200);
    expect(checkout.json().url).toMatch(/^https:\/\/checkout\.stripe\.com\//);
    const [account] = await stack.sql<
      { customer_id: string | null }[]
    >`select customer_id from billing_accounts where workspace_id = ${ws.workspaceId}`;
    expect(account!.customer_id).toMatch(/^cus_/);
    const pack = await postCheckout(withToken(ws.accessToken), 'pack_5000');
    expect(pack.statusCode).toBe(200);
    const portal = await postPortal(withToken(ws.accessToken));
    expect(portal.statusCode).toBe(200);
    expect(portal.json().url).toMatch(/^https:\/\//);

    const byKey = await postCheckout(withKey(ws.apiKey), 'plan');
    expect(byKey.statusCode).toBe(403);
    const unknown = await postCheckout(withToken(ws.accessToken), 'pack_7');
    expect(unknown.statusCode).toBe(422);
    const member = await stack.addMember(ws.workspaceId, 'member');
    const refused = await postCheckout(withToken(member.accessToken), 'plan');
    expect(refused.statusCode).toBe(403);
    const paid = await stack.createWorkspace('paid');
    const again = await postCheckout(withToken(paid.accessToken), 'plan');
    expect(again.statusCode).toBe(409);
  });

  it('refuses a missing, wrong or stale signature with 400 and changes nothing', async () => {
    configure();
    const ws = await stack.createWorkspace('free');
    const event = events.subscriptionCheckout(ws.workspaceId);
    const missing = await postStripeEvent(stack.app, event, { signature: null });
    const wrong = await postStripeEvent(stack.app, event, { secret: 'whsec_someone_else' });
    const stale = await postStripeEvent(stack.app, event, { timestamp: Math.floor(Date.now() / 1000) - 301 });
    const tampered = await postStripeEvent(stack.app, JSON.stringify(event), {
      signature: (await import('../../integrations/payments/stripe.js')).signStripePayload(
        JSON.stringify({ ...event, id: 'evt_other' }),
        'whsec_test_billing',
      ),
    });
    for (const res of [missing, wrong, stale, tampered]) {
      expect(res.statusCode).toBe(400);
      expect(res.json().detail).toMatch(/signature/i);
    }
    const [{ n }] = (await stack.sql<
      { n: number }[]
    >`select count(*)::int as n from billing_events where event_id = ${event.id}`) as unknown as [{ n: number }];
    expect(n).toBe(0);
    expect(await plan(ws.workspaceId)).toBe('free');
    const notJson = await postStripeEvent(stack.app, '{"id": 1}');
    expect(notJson.statusCode).toBe(400);
  });

  it('upgrades on a paid checkout once, grants the paid period, and a redelivery changes nothing', async () => {
    configure();
    const ws = await stack.createWorkspace('free');
    const event = events.subscriptionCheckout(ws.workspaceId);
    const first = await postStripeEvent(stack.app, event);
    expect(first.statusCode).toBe(200);
    expect(first.json()).toMatchObject({ received: true, duplicate: false, outcome: 'upgraded to paid' });
    expect(await plan(ws.workspaceId)).toBe('paid');
    // The workspace's billing workflow grants the new period's credits.
    await vi.waitFor(async () => expect(await available(ws.workspaceId)).toBe(2000), {
      timeout: 15_000,
      interval: 100,
    });
    const second = await postStripeEvent(stack.app, event);
    expect(second.json()).toMatchObject({ duplicate: true });
    await new Promise((r) => setTimeout(r, 300));
    expect(await available(ws.workspaceId)).toBe(2000);
    const grants =
      await stack.sql`select 1 from credit_ledger where workspace_id = ${ws.workspaceId} and cause_key like 'plan-grant:%'`;
    expect(grants).toHaveLength(1);
  });

  it('prices a period settled while an upgrade commits on the paid plan, not the plan read before the wait', async () => {
    // The billing fault test caught a paid period granted at the free plan's 100: the period's
    // settle waited on the account's lock behind the upgrade, then saw the upgrade's new anchor
    // with the workspace's plan as it was before the wait.
    const ws = await stack.createWorkspace('free');
    const anchor = new Date(Date.now() + 3_600_000);
    let commit!: () => void;
    let locked!: () => void;
    const held = new Promise<void>((r) => (commit = r));
    const holding = new Promise<void>((r) => (locked = r));
    const upgrade = stack.sql.begin(async (tx) => {
      await lockBillingAccount(tx, ws.workspaceId);
      await upgradeToPaid(tx, ws.workspaceId, anchor);
      locked();
      await held;
    });
    await holding;
    const settle = settleBillingAt(stack.sql, ws.workspaceId, new Date(anchor.getTime() + 1000));
    await vi.waitFor(
      async () => {
        const [waiting] = await stack.sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like '%billing_accounts%'`;
        expect(waiting!.n).toBe(1);
      },
      { timeout: 5_000, interval: 20 },
    );
    commit();
    await upgrade;
    expect(await settle).toMatchObject({ plan: 'paid', granted: 2000, periodStart: anchor.toISOString() });
    const grant = await stack.sql<{ amount: number }[]>`
      select amount from credit_ledger where workspace_id = ${ws.workspaceId} and cause_key = ${`plan-grant:${anchor.toISOString()}`}`;
    expect(grant).toEqual([{ amount: 2000 }]);
  });

  it('lets the plan decide API keys: a write key of a workspace gone free reads only', async () => {
    configure();
    const ws = await stack.createWorkspace('paid');
    const subscription = 'sub_keys';
    await postStripeEvent(
      stack.app,
      events.subscription('customer.subscription.updated', ws.workspaceId, { subscription, status: 'active' }),
    );
    const create = () =>
      stack.app.inject({
        method: 'POST',
        url: '/tables/',
        headers: withKey(ws.apiKey),
        payload: { name: `T ${Math.random()}` },
      });
    expect((await create()).statusCode).toBe(201);
    const scopes = await stack.app.inject({ method: 'GET', url: '/api-keys/scopes/', headers: withKey(ws.apiKey) });
    expect(scopes.json().scopes).toEqual(['read', 'write']);
    await postStripeEvent(
      stack.app,
      events.subscription('customer.subscription.deleted', ws.workspaceId, { subscription, status: 'canceled' }),
    );
    expect(await plan(ws.workspaceId)).toBe('free');
    const refused = await create();
    expect(refused.statusCode).toBe(403);
    expect(refused.json().detail).toMatch(/free plan/);
    expect((await stack.app.inject({ method: 'GET', url: '/tables/', headers: withKey(ws.apiKey) })).statusCode).toBe(
      200,
    );
    expect(
      (await stack.app.inject({ method: 'GET', url: '/api-keys/scopes/', headers: withKey(ws.apiKey) })).json().scopes,
    ).toEqual(['read']);
  });

  it('applies subscription events in any order: an older update after a newer one, or any after the end, changes nothing', async () => {
    configure();
    const ws = await stack.createWorkspace('free');
    const subscription = 'sub_order';
    const t = (s: number) => new Date(Date.now() - 3600_000 + s * 1000);
    const newer = events.subscription('customer.subscription.updated', ws.workspaceId, {
      subscription,
      status: 'active',
      cancelAtPeriodEnd: true,
      at: t(20),
    });
    const older = events.subscription('customer.subscription.updated', ws.workspaceId, {
      subscription,
      status: 'active',
      cancelAtPeriodEnd: false,
      at: t(10),
    });
    expect((await postStripeEvent(stack.app, newer)).json().outcome).toMatch(/upgraded to paid/);
    expect((await postStripeEvent(stack.app, older)).json().outcome).toMatch(/^stale/);
    expect((await billing(ws)).json()).toMatchObject({ plan: 'paid', cancel_at_period_end: true, next_invoice: null });
    const deleted = events.subscription('customer.subscription.deleted', ws.workspaceId, {
      subscription,
      status: 'canceled',
      at: t(30),
    });
    expect((await postStripeEvent(stack.app, deleted)).json().outcome).toMatch(/downgraded to free/);
    const late = events.subscription('customer.subscription.updated', ws.workspaceId, {
      subscription,
      status: 'active',
      at: t(40),
    });
    expect((await postStripeEvent(stack.app, late)).json().outcome).toMatch(/^stale: the subscription has ended/);
    const lateCheckout = events.subscriptionCheckout(ws.workspaceId, { subscription, at: t(5) });
    expect((await postStripeEvent(stack.app, lateCheckout)).json().outcome).toMatch(/^stale/);
    expect(await plan(ws.workspaceId)).toBe('free');
  });

  it('keeps the plan through a failed renewal (grace, and an event for the owner), and a later payment ends the grace', async () => {
    configure();
    const ws = await stack.createWorkspace('free');
    const subscription = 'sub_grace';
    await postStripeEvent(
      stack.app,
      events.subscription('customer.subscription.created', ws.workspaceId, { subscription, status: 'active' }),
    );
    const invoice = 'in_grace_1';
    const failed = await postStripeEvent(
      stack.app,
      events.invoice('invoice.payment_failed', ws.workspaceId, { invoice, subscription }),
    );
    expect(failed.json().outcome).toMatch(/kept until/);
    const overview = (await billing(ws)).json();
    expect(overview.plan).toBe('paid');
    expect(Date.parse(overview.grace_ends_at) - Date.now()).toBeGreaterThan(6.9 * 86_400_000);
    const notices = await stack.sql<{ payload: { invoice_id: string; amount_due_cents: number } }[]>`
      select payload from workspace_events where workspace_id = ${ws.workspaceId} and type = 'billing.payment_failed'`;
    expect(notices.map((n) => n.payload)).toEqual([
      expect.objectContaining({ invoice_id: invoice, amount_due_cents: 4900 }),
    ]);
    const again = await postStripeEvent(
      stack.app,
      events.invoice('invoice.payment_failed', ws.workspaceId, { invoice, subscription }),
    );
    expect(again.json().outcome).toMatch(/already runs/);
    await postStripeEvent(stack.app, events.invoice('invoice.paid', ws.workspaceId, { invoice, subscription }));
    expect((await billing(ws)).json()).toMatchObject({ plan: 'paid', grace_ends_at: null, payment_failed_at: null });
    const afterPaid = await postStripeEvent(
      stack.app,
      events.invoice('invoice.payment_failed', ws.workspaceId, { invoice, subscription }),
    );
    expect(afterPaid.json().outcome).toBe('stale: the invoice is paid');
    const invoices = (
      await stack.app.inject({ method: 'GET', url: '/billing/invoices/', headers: withKey(ws.apiKey) })
    ).json().invoices;
    expect(invoices).toEqual([
      expect.objectContaining({
        id: invoice,
        status: 'paid',
        amount_due_cents: 4900,
        amount_paid_cents: 4900,
        currency: 'usd',
      }),
    ]);
  });

  it('schedules the downgrade for the period end with Stripe, and takes it back', async () => {
    configure();
    const ws = await stack.createWorkspace('free');
    const end = new Date(Date.now() + 20 * 86_400_000);
    await postStripeEvent(
      stack.app,
      events.subscription('customer.subscription.created', ws.workspaceId, {
        subscription: 'sub_down',
        status: 'active',
        periodStart: new Date(end.getTime() - 30 * 86_400_000),
      }),
    );
    const down = await stack.app.inject({
      method: 'POST',
      url: '/billing/downgrade/',
      headers: withToken(ws.accessToken),
    });
    expect(down.statusCode).toBe(200);
    expect(down.json()).toMatchObject({ cancel_at_period_end: true });
    expect(
      (await stack.app.inject({ method: 'POST', url: '/billing/downgrade/', headers: withToken(ws.accessToken) }))
        .statusCode,
    ).toBe(409);
    expect(await plan(ws.workspaceId)).toBe('paid');
    const undo = await stack.app.inject({
      method: 'DELETE',
      url: '/billing/downgrade/',
      headers: withToken(ws.accessToken),
    });
    expect(undo.json()).toMatchObject({ cancel_at_period_end: false });
    const operatorPaid = await stack.createWorkspace('paid');
    const refused = await stack.app.inject({
      method: 'POST',
      url: '/billing/downgrade/',
      headers: withToken(operatorPaid.accessToken),
    });
    expect(refused.statusCode).toBe(409);
    expect(refused.json().detail).toMatch(/operator/);
  });

  it('credits a pack once, takes back refunded and disputed credits, gives them back when the dispute is won, whatever the order', async () => {
    configure();
    const ws = await stack.createWorkspace('free');
    // The period's free credits first (as the workspace's workflow grants them), so what follows is the pack's alone.
    await settleBillingAt(stack.sql, ws.workspaceId, new Date());
    const base = await available(ws.workspaceId);
    expect(base).toBe(100);
    const pi = 'pi_pack_order';
    const customer = 'cus_pack_order';
    // Made when the workspace opened checkout; the charge names it (and its payment intent, which paid no invoice).
    await setCustomer(stack.sql, ws.workspaceId, customer);
    // The refund of half arrives before the checkout that bought the pack.
    expect(
      (await postStripeEvent(stack.app, events.refund({ customer, paymentIntent: pi, amount: 1000, refunded: 500 })))
        .statusCode,
    ).toBe(200);
    const checkout = events.packCheckout(ws.workspaceId, 'pack_1000', { paymentIntent: pi, amount: 1000, customer });
    expect((await postStripeEvent(stack.app, checkout)).json().outcome).toMatch(
      /granted 1000 credits.*500 credits taken back/,
    );
    expect((await postStripeEvent(stack.app, checkout)).json().duplicate).toBe(true);
    expect(await available(ws.workspaceId)).toBe(base + 500);
    const dispute = 'dp_pack_order';
    await postStripeEvent(
      stack.app,
      events.dispute('charge.dispute.created', {
        paymentIntent: pi,
        amount: 500,
        status: 'needs_response',
        id: dispute,
      }),
    );
    expect(await available(ws.workspaceId)).toBe(base);
    await postStripeEvent(
      stack.app,
      events.dispute('charge.dispute.closed', {
        paymentIntent: pi,
        amount: 500,
        status: 'won',
        id: dispute,
      }),
    );
    expect(await available(ws.workspaceId)).toBe(base + 500);
    // A late "created" after the close does not reopen it.
    await postStripeEvent(
      stack.app,
      events.dispute('charge.dispute.created', {
        paymentIntent: pi,
        amount: 500,
        status: 'needs_response',
        id: dispute,
      }),
    );
    expect(await available(ws.workspaceId)).toBe(base + 500);
    const payments = (
      await stack.app.inject({ method: 'GET', url: '/billing/payments/', headers: withKey(ws.apiKey) })
    ).json().payments;
    expect(payments).toEqual([
      expect.objectContaining({
        id: pi,
        purpose: 'credit_pack',
        credits: 1000,
        amount_cents: 1000,
        refunded_cents: 500,
        credits_taken_back: 500,
        dispute_status: 'won',
      }),
    ]);
    // The ledger sums to the balance.
    const [sum] = await stack.sql<{ total: number }[]>`
      select coalesce(sum(case kind when 'grant' then amount when 'revoke' then -amount else 0 end), 0)::int as total from credit_ledger where workspace_id = ${ws.workspaceId}`;
    expect(sum!.total).toBe(base + 500);
  });

  it('pays the referral reward to both sides once, when the referred workspace first pays', async () => {
    configure();
    const referrer = await stack.createWorkspace('free');
    const code = (
      await stack.app.inject({ method: 'GET', url: '/referrals/', headers: withKey(referrer.apiKey) })
    ).json().code as string;
    const created = await createWorkspaceWithAdmin(stack.sql, {
      name: 'Referred',
      plan: 'free',
      referralCode: code.toUpperCase(),
    });
    await expect(
      createWorkspaceWithAdmin(stack.sql, { name: 'Nobody', plan: 'free', referralCode: 'no-such-code' }),
    ).rejects.toThrow(/referral code/);
    const referred = created.workspace_id;
    const referredView = (
      await stack.app.inject({ method: 'GET', url: '/referrals/', headers: withKey(created.api_key) })
    ).json();
    expect(referredView.referred_by_another).toBe(true);
    await postStripeEvent(stack.app, events.invoice('invoice.paid', referred, { subscription: 'sub_ref' }));
    await postStripeEvent(stack.app, events.invoice('invoice.paid', referred, { subscription: 'sub_ref' }));
    const rewards =
      await stack.sql`select amount from credit_ledger where workspace_id = ${referrer.workspaceId} and cause_key like 'referral-reward:%'`;
    expect(rewards).toEqual([{ amount: 500 }]);
    const ledger =
      await stack.sql`select amount from credit_ledger where workspace_id = ${referred} and cause_key = 'referral-reward:referred'`;
    expect(ledger).toEqual([{ amount: 500 }]);
    const view = (
      await stack.app.inject({ method: 'GET', url: '/referrals/', headers: withKey(referrer.apiKey) })
    ).json();
    expect(view).toMatchObject({
      referred_workspaces: 1,
      rewarded_workspaces: 1,
      credits_earned: 500,
      reward: { referrer_credits: 500, referred_credits: 500 },
    });
  });

  it('takes design-partner applications within bounds; an operator accepts, and the benefit is granted once per period', async () => {
    const ws = await stack.createWorkspace('free');
    const apply = (body: Record<string, unknown>) =>
      stack.app.inject({ method: 'POST', url: '/design-partner/', headers: withToken(ws.accessToken), payload: body });
    const good = { company_website: 'https://example.com', use_case: 'x'.repeat(2000), team_size: 100000 };
    for (const bad of [
      { ...good, use_case: 'x'.repeat(2001) },
      { ...good, use_case: '' },
      { ...good, team_size: 0 },
      { ...good, team_size: 100001 },
      { ...good, company_website: 'nope' },
    ]) {
      expect((await apply(bad)).statusCode).toBe(422);
    }
    const applied = await apply({ ...good, team_size: 1 });
    expect(applied.statusCode).toBe(201);
    expect(applied.json()).toMatchObject({ status: 'pending', benefit: { monthly_credits: 1000 } });
    expect((await apply(good)).statusCode).toBe(409);
    await settleBillingAt(stack.sql, ws.workspaceId, new Date());
    const before = await available(ws.workspaceId);
    await expect(decideDesignPartnerApplication(stack.sql, ws.workspaceId, 'end', null)).rejects.toThrow(/pending/);
    expect(await decideDesignPartnerApplication(stack.sql, ws.workspaceId, 'accept', 'welcome')).toMatchObject({
      status: 'accepted',
      granted: 1000,
    });
    expect(await decideDesignPartnerApplication(stack.sql, ws.workspaceId, 'end', null)).toMatchObject({
      status: 'ended',
      granted: 0,
    });
    expect(await available(ws.workspaceId)).toBe(before + 1000);
    expect(
      (await stack.app.inject({ method: 'GET', url: '/design-partner/', headers: withKey(ws.apiKey) })).json(),
    ).toMatchObject({ status: 'ended', decision_note: null });
    expect((await apply(good)).statusCode).toBe(201);
  });

  it('lists invoices and payments within their limit bounds', async () => {
    const ws = await stack.createWorkspace('free');
    const statusOf = async (url: string) =>
      (await stack.app.inject({ method: 'GET', url, headers: withKey(ws.apiKey) })).statusCode;
    for (const limit of [0, 101]) {
      expect(await statusOf(`/billing/invoices/?limit=${limit}`)).toBe(422);
    }
    for (const limit of [1, 100]) {
      expect(await statusOf(`/billing/payments/?limit=${limit}`)).toBe(200);
    }
  });
});
