/**
 * The affiliate program's routes and its share of billing events (decision 043): enrolment and
 * codes at and past their bounds, the public link (counted once per visitor and day, bots not
 * counted, rate limited), signup attribution by code or click within the cookie window, and
 * commissions, clawbacks and reversals from signed Stripe events, each written once.
 */
import { describe, expect, it, vi } from 'vitest';
import { runAdmin } from '../support/admin.js';
import { createWorkspaceWithAdmin } from '../../worker/provisioning.js';
import { affiliateBalances } from '../../store/affiliates/ledger.js';
import { commissionMaturationWorkflowId } from '../../workflows/affiliates/commission-maturation.contract.js';
import { commissionMaturationWorkflow } from '../../workflows/affiliates/commission-maturation.js';
import { wakeCommissions } from '../../services/affiliates/maturation.js';
import { events, postStripeEvent, useStripeMock } from '../support/billing.js';
import { useTestStack, withKey, type TestWorkspace } from '../support/test-stack.js';

// The click route's limit is read when the app is built.
process.env.AFFILIATE_CLICK_RATE_PER_MINUTE = '40';
process.env.AFFILIATE_LANDING_URL = 'https://landing.example.com/welcome?src=aff';
const { stack } = useTestStack({ workspaces: false });
const stripe = useStripeMock();

const call = (ws: TestWorkspace, method: 'GET' | 'POST', url: string, payload?: object) =>
  stack.app.inject({ method, url, headers: withKey(ws.apiKey), ...(payload ? { payload } : {}) });

async function enrolled(displayName = 'Ann', timeZone?: string) {
  const ws = await stack.createWorkspace('paid');
  const res = await call(ws, 'POST', '/affiliate/', {
    display_name: displayName,
    ...(timeZone ? { time_zone: timeZone } : {}),
  });
  expect(res.statusCode).toBe(201);
  return { ws, affiliate: res.json<{ id: string; codes: { code: string }[] }>() };
}

const click = (code: string, o: { ua?: string; visitor?: string; ip?: string } = {}) =>
  stack.app.inject({
    method: 'GET',
    url: `/affiliate/links/${encodeURIComponent(code)}/${o.visitor ? `?visitor=${o.visitor}` : ''}`,
    headers: { 'user-agent': o.ua ?? 'Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0' },
    remoteAddress: o.ip ?? '203.0.113.7',
  });

describe('enrolment and codes', () => {
  it('enrols once with a display name of 1 to 255 characters and a generated code', async () => {
    const ws = await stack.createWorkspace('paid');
    expect((await call(ws, 'GET', '/affiliate/')).statusCode).toBe(404);
    expect((await call(ws, 'POST', '/affiliate/', { display_name: '' })).statusCode).toBe(422);
    expect((await call(ws, 'POST', '/affiliate/', { display_name: 'x'.repeat(256) })).statusCode).toBe(422);
    expect((await call(ws, 'POST', '/affiliate/', { display_name: 'x', time_zone: 'Mars/Olympus' })).statusCode).toBe(
      422,
    );
    const created = await call(ws, 'POST', '/affiliate/', { display_name: 'x'.repeat(255) });
    expect(created.statusCode).toBe(201);
    expect(created.json()).toMatchObject({
      display_name: 'x'.repeat(255),
      time_zone: 'UTC',
      available_cents: 0,
      held_cents: 0,
      commission_percent: 20,
      commission_months: 12,
    });
    expect(created.json().codes).toEqual([expect.objectContaining({ is_vanity: false })]);
    expect((await call(ws, 'POST', '/affiliate/', { display_name: 'again' })).statusCode).toBe(409);
    // A holding period in fractions of a day (AFFILIATE_HOLDING_DAYS=1.5) reads as such.
    const holdingMs = stack.integrations.affiliates.holdingMs;
    stack.integrations.affiliates.holdingMs = 1.5 * 86_400_000;
    expect((await call(ws, 'GET', '/affiliate/')).json()).toMatchObject({ holding_days: 1.5, cookie_window_days: 30 });
    stack.integrations.affiliates.holdingMs = holdingMs;
    const other = await stack.createWorkspace('paid');
    expect((await call(other, 'POST', '/affiliate/', { display_name: 'y' })).statusCode).toBe(201);
  });

  it('adds vanity codes of 3 to 32 characters, unique whatever the case, at most ten', async () => {
    const { ws } = await enrolled();
    const { ws: rival } = await enrolled('Rival');
    const tag = Math.random().toString(36).slice(2, 8);
    expect((await call(ws, 'POST', '/affiliate/codes/', { code: 'ab' })).statusCode).toBe(422);
    expect((await call(ws, 'POST', '/affiliate/codes/', { code: 'a'.repeat(33) })).statusCode).toBe(422);
    expect((await call(ws, 'POST', '/affiliate/codes/', { code: '-abc' })).statusCode).toBe(422);
    expect((await call(ws, 'POST', '/affiliate/codes/', { code: `${tag}x`.padEnd(32, 'z') })).statusCode).toBe(201);
    const three = await call(ws, 'POST', '/affiliate/codes/', { code: `Q${tag.slice(0, 2)}` });
    expect(three.statusCode).toBe(201);
    expect(three.json()).toMatchObject({ code: `Q${tag.slice(0, 2)}`, is_vanity: true });
    const taken = await call(rival, 'POST', '/affiliate/codes/', { code: `q${tag.slice(0, 2)}`.toUpperCase() });
    expect(taken.statusCode).toBe(409);
    expect(taken.json().detail).toMatch(/taken/);
    for (let i = 2; i < 10; i += 1)
      expect((await call(ws, 'POST', '/affiliate/codes/', { code: `${tag}-${i}` })).statusCode).toBe(201);
    const eleventh = await call(ws, 'POST', '/affiliate/codes/', { code: `${tag}-11` });
    expect(eleventh.statusCode).toBe(409);
    expect(eleventh.json().detail).toMatch(/at most 10/);
    const codes = (await call(ws, 'GET', '/affiliate/codes/')).json().codes as { is_vanity: boolean }[];
    expect(codes.filter((c) => c.is_vanity)).toHaveLength(10);
    expect(codes.filter((c) => !c.is_vanity)).toHaveLength(1);
  });

  it('answers 404 on every read of a workspace that is not enrolled', async () => {
    const ws = await stack.createWorkspace('paid');
    for (const url of [
      '/affiliate/codes/',
      '/affiliate/stats/daily/',
      '/affiliate/feed/',
      '/affiliate/ledger/',
      '/affiliate/maturities/',
      '/affiliate/performance/',
    ]) {
      expect((await call(ws, 'GET', url)).statusCode, url).toBe(404);
    }
  });
});

describe('the public link', () => {
  it('redirects with the click id, counts a visitor once per day, and never counts bots', async () => {
    const { ws, affiliate } = await enrolled();
    const code = affiliate.codes[0]!.code;
    const first = await click(code.toUpperCase(), { ip: '198.51.100.1' });
    expect(first.statusCode).toBe(302);
    const location = new URL(first.headers.location as string);
    expect(location.origin + location.pathname).toBe('https://landing.example.com/welcome');
    expect(location.searchParams.get('src')).toBe('aff');
    const clickId = location.searchParams.get('aff_click');
    expect(clickId).toMatch(/^[0-9a-f-]{36}$/);
    expect(first.headers['set-cookie']).toMatch(new RegExp(`aff_click=${clickId}; Max-Age=2592000`));
    const again = await click(code, { ip: '198.51.100.1' });
    expect(new URL(again.headers.location as string).searchParams.get('aff_click')).toBe(clickId);
    await click(code, { ip: '198.51.100.2' });
    await click(code, { ip: '198.51.100.1', visitor: 'landing-visitor-1' });
    const bot = await click(code, { ip: '198.51.100.3', ua: 'Googlebot/2.1 (+http://www.google.com/bot.html)' });
    expect(bot.statusCode).toBe(302);
    expect(new URL(bot.headers.location as string).searchParams.get('aff_click')).toBeNull();
    expect((await click('no-such-code-here', { ip: '198.51.100.4' })).statusCode).toBe(404);
    // A visitor id or code Postgres cannot store or compare (a NUL character) is refused by the schema, counting nothing.
    const nul = await click(code, { ip: '198.51.100.5', visitor: '%00x' });
    expect(nul.statusCode).toBe(422);
    expect(nul.json().issues[0].loc).toEqual(['query', 'visitor']);
    expect((await click('a\u0000b', { ip: '198.51.100.5' })).statusCode).toBe(422);
    const stats = (await call(ws, 'GET', '/affiliate/stats/daily/?days=1')).json().days;
    expect(stats).toEqual([expect.objectContaining({ clicks: 3, signups: 0, conversions: 0, earned_cents: 0 })]);
  });

  it('limits one address to the configured clicks per minute (429 with Retry-After)', async () => {
    const { affiliate } = await enrolled();
    const code = affiliate.codes[0]!.code;
    const answers: number[] = [];
    for (let i = 0; i < 41; i += 1)
      answers.push((await click(code, { ip: '192.0.2.99', visitor: `v${i}` })).statusCode);
    expect(answers.slice(0, 40).every((s) => s === 302)).toBe(true);
    expect(answers[40]).toBe(429);
  });
});

describe('daily stats', () => {
  it('answers 1 to 366 days, quiet days as zeros, in the affiliate time zone', async () => {
    const { ws } = await enrolled('Zoned', 'Pacific/Kiritimati');
    expect((await call(ws, 'GET', '/affiliate/stats/daily/?days=0')).statusCode).toBe(422);
    expect((await call(ws, 'GET', '/affiliate/stats/daily/?days=367')).statusCode).toBe(422);
    const year = (await call(ws, 'GET', '/affiliate/stats/daily/?days=366')).json().days as {
      day: string;
      clicks: number;
    }[];
    expect(year).toHaveLength(366);
    expect(year.every((d) => d.clicks === 0)).toBe(true);
    const kiritimatiToday = new Intl.DateTimeFormat('en-CA', { timeZone: 'Pacific/Kiritimati' }).format(new Date());
    expect(year.at(-1)!.day).toBe(kiritimatiToday);
  });
});

describe('attribution and money from billing events', () => {
  const paidInvoice = (workspaceId: string, invoice: string, amount: number, at = new Date()) =>
    events.invoice('invoice.paid', workspaceId, { invoice, amount, at });

  async function referred(code: string) {
    const created = await createWorkspaceWithAdmin(stack.sql, { name: 'Referred', plan: 'free', affiliateCode: code });
    return created.workspace_id;
  }

  it('attributes a signup by code or by a click within the cookie window, and refuses unknown ones', async () => {
    const { ws, affiliate } = await enrolled();
    const code = affiliate.codes[0]!.code;
    await referred(code.toUpperCase());
    await expect(
      createWorkspaceWithAdmin(stack.sql, { name: 'x', plan: 'free', affiliateCode: 'nobody-has-this' }),
    ).rejects.toThrow(/No affiliate has the code/);
    const link = await click(code, { ip: '198.51.100.20' });
    const clickId = new URL(link.headers.location as string).searchParams.get('aff_click')!;
    // At the window's end exactly it still counts; a millisecond past it, it does not.
    await stack.sql`update affiliate_clicks set clicked_at = now() - interval '30 days' + interval '2 seconds' where id = ${clickId}`;
    await createWorkspaceWithAdmin(stack.sql, { name: 'By click', plan: 'free', affiliateClick: clickId });
    await stack.sql`update affiliate_clicks set clicked_at = now() - interval '30 days' - interval '1 second' where id = ${clickId}`;
    await expect(
      createWorkspaceWithAdmin(stack.sql, { name: 'Late', plan: 'free', affiliateClick: clickId }),
    ).rejects.toThrow(/older than the 30-day window/);
    await expect(
      createWorkspaceWithAdmin(stack.sql, { name: 'Bad', plan: 'free', affiliateClick: 'not-a-click' }),
    ).rejects.toThrow(/No affiliate click/);
    const feed = (await call(ws, 'GET', '/affiliate/feed/')).json().items as {
      kind: string;
      amount_cents: number | null;
    }[];
    expect(feed.filter((i) => i.kind === 'signup')).toHaveLength(2);
    expect(feed.every((i) => i.amount_cents === null)).toBe(true);
  });

  it('converts at the first payment and earns 20% of each paid invoice once; a refund inside the holding period claws back its share', async () => {
    stripe.configure(stack.integrations);
    const { ws, affiliate } = await enrolled();
    const workspaceId = await referred(affiliate.codes[0]!.code);
    const invoice = `in_aff_${workspaceId.slice(0, 8)}`;
    // Stripe's events name no link between the invoice and its payment intent: its invoice payment does.
    const paymentIntent = `pi_aff_${workspaceId.slice(0, 8)}`;
    const customer = `cus_aff_${workspaceId.slice(0, 8)}`;
    stripe.holdInvoicePayment({ invoice, paymentIntent, amount: 4900, customer, workspaceId });
    const paid = paidInvoice(workspaceId, invoice, 4900);
    expect((await postStripeEvent(stack.app, paid)).statusCode).toBe(200);
    expect((await postStripeEvent(stack.app, paid)).json().duplicate).toBe(true);
    // The same invoice under another event id (Stripe resends as a new event) earns nothing more.
    expect((await postStripeEvent(stack.app, paidInvoice(workspaceId, invoice, 4900))).statusCode).toBe(200);
    expect(await affiliateBalances(stack.sql, affiliate.id)).toEqual({ availableCents: 0, heldCents: 980 });
    const read = (await call(ws, 'GET', '/affiliate/')).json();
    expect(read).toMatchObject({ held_cents: 980, available_cents: 0 });
    // The webhook woke the maturation workflow of the commission's shard after the commit (decision 047).
    const [{ shard, id: commissionId }] = await stack.sql<
      [{ shard: number; id: string }]
    >`select maturation_shard as shard, id from affiliate_commissions where invoice_id = ${invoice}`;
    expect(
      (await stack.client.workflow.getHandle(commissionMaturationWorkflowId(stack.taskQueue, shard)).describe()).status
        .name,
    ).toBe('RUNNING');
    // Another lane of the namespace (its own task queue and database) may run the same shard, and
    // nobody may be polling its queue: this lane's wakes still reach this lane's workflow.
    const otherLane = `other-lane-${workspaceId.slice(0, 8)}`;
    const foreign = await stack.client.workflow.start(commissionMaturationWorkflow, {
      taskQueue: otherLane,
      workflowId: commissionMaturationWorkflowId(otherLane, shard),
      args: [{ shard }],
    });
    await stack.client.workflow
      .getHandle(commissionMaturationWorkflowId(stack.taskQueue, shard))
      .terminate('a lane beside this one');
    await stack.sql`update affiliate_maturation_shards set wake_at = null where shard = ${shard}`;
    expect(await wakeCommissions(stack.client, stack.taskQueue, stack.sql, [commissionId], 'created')).toBe(1);
    await vi.waitFor(
      async () =>
        expect(
          (
            await stack.sql<
              { w: Date | null }[]
            >`select wake_at as w from affiliate_maturation_shards where shard = ${shard}`
          )[0]!.w,
        ).not.toBeNull(),
      { timeout: 10_000, interval: 100 },
    );
    expect(
      (await stack.client.workflow.getHandle(commissionMaturationWorkflowId(stack.taskQueue, shard)).describe()).status
        .name,
    ).toBe('RUNNING');
    await foreign.terminate('test over');
    const maturities = (await call(ws, 'GET', '/affiliate/maturities/')).json().maturities;
    expect(maturities).toEqual([{ day: expect.any(String), amount_cents: 980, running_available_cents: 980 }]);

    // A partial refund (1,225 of 4,900 cents) takes back a quarter; the full refund the rest.
    await postStripeEvent(stack.app, events.refund({ customer, paymentIntent, amount: 4900, refunded: 1225 }));
    expect(await affiliateBalances(stack.sql, affiliate.id)).toEqual({ availableCents: 0, heldCents: 735 });
    await postStripeEvent(stack.app, events.refund({ customer, paymentIntent, amount: 4900, refunded: 4900 }));
    await postStripeEvent(stack.app, events.refund({ customer, paymentIntent, amount: 4900, refunded: 4900 }));
    expect(await affiliateBalances(stack.sql, affiliate.id)).toEqual({ availableCents: 0, heldCents: 0 });
    const ledger = (await call(ws, 'GET', '/affiliate/ledger/')).json().entries as {
      kind: string;
      amount_cents: number;
    }[];
    // Events carry whole seconds: rows of one second are in no particular order among themselves.
    expect(ledger.map((e) => [e.kind, e.amount_cents]).sort()).toEqual([
      ['clawback_refund', -245],
      ['clawback_refund', -735],
      ['commission', 980],
    ]);
    const [row] = await stack.sql<
      { status: string }[]
    >`select status from affiliate_commissions where invoice_id = ${invoice}`;
    expect(row!.status).toBe('clawed_back');
    const perf = (await call(ws, 'GET', '/affiliate/performance/?days=7')).json();
    expect(perf).toMatchObject({
      days: 7,
      signups: { value: 1, previous: 0, change: 1, change_ratio: null },
      conversions: { value: 1, previous: 0 },
      earned_cents: { value: 980, previous: 0, change: 980 },
      conversion_rate: 1,
      lifetime_gross_cents: 980,
      lifetime_clawed_back_cents: 980,
      lifetime_net_cents: 0,
      never_paid_count: 0,
      held_cents: 0,
      next_payout_status: expect.any(String),
      upcoming_maturities: [],
    });
  });

  it('claws back on a dispute and gives it back when the dispute is won, whatever the order of a redelivery', async () => {
    stripe.configure(stack.integrations);
    const { ws, affiliate } = await enrolled();
    const workspaceId = await referred(affiliate.codes[0]!.code);
    const invoice = `in_dsp_${workspaceId.slice(0, 8)}`;
    const paymentIntent = `pi_dsp_${workspaceId.slice(0, 8)}`;
    stripe.holdInvoicePayment({
      invoice,
      paymentIntent,
      amount: 10000,
      customer: `cus_dsp_${workspaceId.slice(0, 8)}`,
      workspaceId,
    });
    // The dispute arrives before the invoice's payment: it is applied when the commission is made.
    const opened = events.dispute('charge.dispute.created', { paymentIntent, amount: 10000, status: 'needs_response' });
    await postStripeEvent(stack.app, opened);
    await postStripeEvent(stack.app, paidInvoice(workspaceId, invoice, 10000));
    expect(await affiliateBalances(stack.sql, affiliate.id)).toEqual({ availableCents: 0, heldCents: 0 });
    const won = events.dispute('charge.dispute.closed', { paymentIntent, amount: 10000, status: 'won' });
    await postStripeEvent(stack.app, won);
    await postStripeEvent(stack.app, won);
    expect(await affiliateBalances(stack.sql, affiliate.id)).toEqual({ availableCents: 0, heldCents: 2000 });
    const kinds = (await call(ws, 'GET', '/affiliate/ledger/?limit=1')).json<{
      entries: { kind: string }[];
      next_offset: number | null;
    }>();
    expect(kinds.entries.map((e) => e.kind)).toEqual(['dispute_reversal']);
    expect(kinds.next_offset).toBe(1);
    const feed = (await call(ws, 'GET', '/affiliate/feed/')).json().items as {
      kind: string;
      amount_cents: number | null;
    }[];
    expect(feed.map((i) => i.kind).sort()).toEqual(['clawback', 'clawback', 'commission', 'conversion', 'signup']);
    expect((await call(ws, 'GET', '/affiliate/feed/?limit=0')).statusCode).toBe(422);
    expect((await call(ws, 'GET', '/affiliate/feed/?limit=201')).statusCode).toBe(422);
    expect((await call(ws, 'GET', '/affiliate/ledger/?offset=-1')).statusCode).toBe(422);
  });

  it('earns nothing on an invoice paid at or after the end of the commission months', async () => {
    stripe.configure(stack.integrations);
    const { affiliate } = await enrolled();
    const workspaceId = await referred(affiliate.codes[0]!.code);
    const first = new Date(Date.now() - 366 * 86_400_000);
    await postStripeEvent(stack.app, paidInvoice(workspaceId, `in_first_${workspaceId.slice(0, 6)}`, 1000, first));
    const [conv] = await stack.sql<
      { converted_at: Date }[]
    >`select converted_at from affiliate_attributions where workspace_id = ${workspaceId}`;
    const end = new Date(conv!.converted_at);
    end.setUTCMonth(end.getUTCMonth() + 12);
    await postStripeEvent(
      stack.app,
      paidInvoice(workspaceId, `in_last_${workspaceId.slice(0, 6)}`, 1000, new Date(end.getTime() - 1000)),
    );
    await postStripeEvent(stack.app, paidInvoice(workspaceId, `in_after_${workspaceId.slice(0, 6)}`, 1000, end));
    const rows = await stack.sql<
      { invoice_id: string }[]
    >`select invoice_id from affiliate_commissions where workspace_id = ${workspaceId} order by earned_at`;
    expect(rows.map((r) => r.invoice_id.split('_')[1])).toEqual(['first', 'last']);
  });

  it('attributes a workspace made by the admin command line with --affiliate, and refuses a code no one has', async () => {
    const { ws, affiliate } = await enrolled();
    const admin = async (...args: string[]) => {
      const r = await runAdmin(['create-workspace', '--name', 'Cli', '--plan', 'free', ...args], {
        DATABASE_URL: stack.databaseUrl,
      });
      return { code: r.code, out: r.code === 0 ? r.stdout : r.stderr };
    };
    const made = await admin('--affiliate', affiliate.codes[0]!.code);
    expect(made.code).toBe(0);
    const workspaceId = (JSON.parse(made.out) as { workspace_id: string }).workspace_id;
    const [row] = await stack.sql<
      { affiliate_id: string }[]
    >`select affiliate_id from affiliate_attributions where workspace_id = ${workspaceId}`;
    expect(row!.affiliate_id).toBe(affiliate.id);
    const refused = await admin('--affiliate', 'nobody-has-this-code');
    expect(refused.code).not.toBe(0);
    expect(refused.out).toMatch(/No affiliate has the code/);
    expect((await call(ws, 'GET', '/affiliate/stats/daily/?days=1')).json().days[0].signups).toBe(1);
  });
});
