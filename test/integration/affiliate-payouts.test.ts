/**
 * The affiliate payout cycle end to end on the real worker and Postgres, against the PayPal twin
 * (decision 044): each eligible affiliate paid once per period even when the cycle runs twice, the
 * gates, UNCLAIMED then RETURNED putting the money back, failures, a 422 refusal, a lost answer,
 * forfeiture, the program pause, no provider configured — and the payout routes.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPayPalPayouts } from '../../integrations/payouts/paypal.js';
import { ensurePayoutSchedule, runPayoutCycle } from '../../services/affiliates/payouts-client.js';
import { preparePayoutsPage } from '../../services/affiliates/payouts.js';
import { affiliatePayoutScheduleId } from '../../workflows/affiliates/payout-cycle.contract.js';
import { affiliateBalances } from '../../store/affiliates/ledger.js';
import {
  setOperatorGate,
  setPayoutEmail,
  setPayoutProgramPaused,
  type OperatorGate,
} from '../../store/affiliates/payouts.js';
import { startPayPalPayoutsTwin, unclaimedReturnMs, type PayPalPayoutsTwin } from '../../sim/paypal-payouts-server.js';
import { affiliateWithCommission } from '../support/affiliates.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack } = useTestStack({ workspaces: false });
let twin: PayPalPayoutsTwin;
const day = 86_400_000;

beforeAll(async () => {
  twin = await startPayPalPayoutsTwin();
  stack.integrations.affiliatePayouts.provider = createPayPalPayouts(
    { clientId: twin.clientId, clientSecret: twin.clientSecret, apiBase: twin.url },
    { sleep: async () => undefined },
  );
});
afterAll(() => twin?.close());

interface Made {
  affiliateId: string;
  workspaceId: string;
  apiKey: string;
}

/** Sets (or with null removes) the affiliate's payout email through the settings route. */
const putPayoutEmail = (a: Made, email: string | null) =>
  stack.app.inject({
    method: 'PUT',
    url: '/affiliate/payout-settings/',
    headers: withKey(a.apiKey),
    payload: { payout_email: email },
  });

async function affiliate(input: {
  cents: number;
  email?: string | null;
  verified?: boolean;
  gates?: OperatorGate[];
}): Promise<Made> {
  const ws = await stack.createWorkspace('paid');
  const affiliate = await affiliateWithCommission(stack.sql, {
    workspaceId: ws.workspaceId,
    cents: input.cents,
    occurredAt: new Date(Date.now() - day),
    causePrefix: 'test-commission',
  });
  const email = input.email === undefined ? `aff-${randomBytes(3).toString('hex')}@example.com` : input.email;
  if (email !== null)
    await setPayoutEmail(stack.sql, { affiliateId: affiliate.id, workspaceId: ws.workspaceId, email });
  const gates: OperatorGate[] = [
    ...(input.verified === false ? [] : (['identity_verified'] as const)),
    ...(input.gates ?? []),
  ];
  for (const gate of gates)
    await setOperatorGate(stack.sql, {
      affiliateId: affiliate.id,
      workspaceId: ws.workspaceId,
      gate,
      on: true,
      note: null,
      now: new Date(),
    });
  return { affiliateId: affiliate.id, workspaceId: ws.workspaceId, apiKey: ws.apiKey };
}

const payoutsOf = (affiliateId: string) =>
  stack.sql<
    { id: string; period: string; status: string; amount_cents: number; failure_reason: string | null }[]
  >`select * from affiliate_payouts where affiliate_id = ${affiliateId} order by created_at`;
const ledgerSum = async (affiliateId: string) =>
  (
    await stack.sql<
      { s: number }[]
    >`select coalesce(sum(amount_cents), 0)::bigint as s from affiliate_ledger where affiliate_id = ${affiliateId}`
  )[0]!.s;
const available = async (affiliateId: string) =>
  (await affiliateBalances(stack.sql, affiliateId, new Date('2100-01-01'))).availableCents;
const cycle = (at: Date) =>
  runPayoutCycle({ client: stack.client, taskQueue: stack.taskQueue }, { at, followForMs: 0 });

// Each scenario runs in its own month, so periods never collide between tests.
const month = (n: number) => new Date(Date.UTC(2027, n, 1, 0, 0, 5));

describe('the payout cycle', () => {
  it('pays each eligible affiliate once per period, however often the cycle runs, and only past every gate', async () => {
    const ok = await affiliate({ cents: 7500 });
    const atMinimum = await affiliate({ cents: 5000 });
    const below = await affiliate({ cents: 4999 });
    const unverified = await affiliate({ cents: 9000, verified: false });
    const noEmail = await affiliate({ cents: 9000, email: null });
    const blocked = await affiliate({ cents: 9000, gates: ['blocked'] });
    const review = await affiliate({ cents: 9000, gates: ['under_review'] });
    const unavailable = await affiliate({ cents: 9000, gates: ['unavailable'] });
    const held = await affiliate({ cents: 9000, gates: ['destination_hold'] });

    const first = await cycle(month(0));
    expect(first.refused).toBeNull();
    expect(first.period).toBe('2027-01');
    const again = await cycle(month(0));
    expect(again.created).toBe(0);

    for (const a of [ok, atMinimum]) {
      const rows = await payoutsOf(a.affiliateId);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ period: '2027-01', status: 'paid' });
      expect(await available(a.affiliateId)).toBe(0);
      expect(twin.itemsBySenderItemId().get(rows[0]!.id)).toBe(1);
    }
    expect((await payoutsOf(ok.affiliateId))[0]!.amount_cents).toBe(7500);
    // Each paid payout is a workspace event of its affiliate's workspace, once (the catalogue of
    // domain/notifications/events.ts).
    const sent = await stack.sql<
      { workspace_id: string; payload: { payout_id: string; amount_cents: number; period: string } }[]
    >`
      select workspace_id, payload from workspace_events where type = 'affiliate.payout_sent' and workspace_id = any(${[ok.workspaceId, atMinimum.workspaceId, below.workspaceId]}::uuid[])`;
    expect(sent.map((e) => [e.workspace_id, e.payload.amount_cents, e.payload.period]).sort()).toEqual(
      [
        [ok.workspaceId, 7500, '2027-01'],
        [atMinimum.workspaceId, 5000, '2027-01'],
      ].sort(),
    );
    for (const a of [below, unverified, noEmail, blocked, review, unavailable, held]) {
      expect(await payoutsOf(a.affiliateId)).toEqual([]);
      expect(await available(a.affiliateId)).toBe(a === below ? 4999 : 9000);
    }

    // The routes: the list, and the settings with the same gate the cycle used.
    const list = await stack.app.inject({ method: 'GET', url: '/affiliate/payouts/', headers: withKey(ok.apiKey) });
    expect(list.statusCode).toBe(200);
    expect(list.json()).toMatchObject({
      payouts: [{ period: '2027-01', amount_cents: 7500, status: 'paid' }],
      next_offset: null,
    });
    expect(list.json().payouts[0].paid_at).not.toBeNull();
    const settings = await stack.app.inject({
      method: 'GET',
      url: '/affiliate/payout-settings/',
      headers: withKey(noEmail.apiKey),
    });
    expect(settings.json()).toMatchObject({
      payout_email: null,
      identity_verified: true,
      next_payout_status: 'scheduled',
      next_payout_blocker: 'no_payout_email',
      next_payout_cents: 9000,
    });
  });

  it('the program pause stops every payout until it is lifted', async () => {
    const a = await affiliate({ cents: 6000 });
    await setPayoutProgramPaused(stack.sql, true, 'audit');
    try {
      await cycle(month(1));
      expect(await payoutsOf(a.affiliateId)).toEqual([]);
      const settings = await stack.app.inject({
        method: 'GET',
        url: '/affiliate/payout-settings/',
        headers: withKey(a.apiKey),
      });
      expect(settings.json()).toMatchObject({ program_paused: true, next_payout_status: 'paused' });
    } finally {
      await setPayoutProgramPaused(stack.sql, false, null);
    }
    await cycle(new Date(month(1).getTime() + day));
    expect(await payoutsOf(a.affiliateId)).toMatchObject([{ period: '2027-02', status: 'paid', amount_cents: 6000 }]);
  });

  it('an unclaimed payout returned after 30 days puts its money back and holds the destination; still unclaimed past the period, the balance is forfeited', async () => {
    const a = await affiliate({ cents: 8000, email: `ann+unclaimed-${randomBytes(2).toString('hex')}@example.com` });
    await cycle(month(2));
    expect(await payoutsOf(a.affiliateId)).toMatchObject([{ status: 'unclaimed', amount_cents: 8000 }]);
    expect(await available(a.affiliateId)).toBe(0);

    twin.advance(unclaimedReturnMs);
    await cycle(month(3));
    expect(await payoutsOf(a.affiliateId)).toMatchObject([{ status: 'returned' }]);
    expect(await available(a.affiliateId)).toBe(8000);
    expect(await ledgerSum(a.affiliateId)).toBe(8000);
    const settings = await stack.app.inject({
      method: 'GET',
      url: '/affiliate/payout-settings/',
      headers: withKey(a.apiKey),
    });
    expect(settings.json()).toMatchObject({
      destination_hold: true,
      destination_hold_reason: 'returned',
      next_payout_blocker: 'destination_hold',
    });

    // Held destination: the next cycle pays nothing; 180 days after the return the balance is forfeited, once.
    await cycle(month(4));
    expect(await payoutsOf(a.affiliateId)).toHaveLength(1);
    await cycle(month(10));
    await cycle(new Date(month(10).getTime() + day));
    const forfeitures = await stack.sql<
      { amount_cents: number }[]
    >`select amount_cents from affiliate_ledger where affiliate_id = ${a.affiliateId} and kind = 'forfeiture'`;
    expect(forfeitures).toEqual([{ amount_cents: -8000 }]);
    expect(await available(a.affiliateId)).toBe(0);
    expect(await ledgerSum(a.affiliateId)).toBe(0);
  });

  it('a failed item puts the money back; a new payout email lifts the hold and the next cycle pays', async () => {
    const a = await affiliate({ cents: 5500, email: `bob+fail-${randomBytes(2).toString('hex')}@example.com` });
    await cycle(month(5));
    expect(await payoutsOf(a.affiliateId)).toMatchObject([{ status: 'failed', amount_cents: 5500 }]);
    expect(await available(a.affiliateId)).toBe(5500);
    const put = await putPayoutEmail(a, 'bob@example.com');
    expect(put.statusCode).toBe(200);
    expect(put.json()).toMatchObject({
      payout_email: 'bob@example.com',
      destination_hold: false,
      next_payout_blocker: null,
    });
    await cycle(month(6));
    expect((await payoutsOf(a.affiliateId)).map((p) => p.status)).toEqual(['failed', 'paid']);
    expect(await available(a.affiliateId)).toBe(0);
  });

  it('a 422 fails only the items it names, with the reason; the rest of the batch is paid', async () => {
    const good = await affiliate({ cents: 5100 });
    const bad = await affiliate({ cents: 5200 });
    await stack.sql`update affiliate_payout_settings set payout_email = 'nobody@nowhere' where affiliate_id = ${bad.affiliateId}`;
    const result = await cycle(month(7));
    expect(result.failed).toBeGreaterThanOrEqual(1);
    expect(await payoutsOf(good.affiliateId)).toMatchObject([{ status: 'paid' }]);
    const [refused] = await payoutsOf(bad.affiliateId);
    expect(refused).toMatchObject({ status: 'failed' });
    expect(refused!.failure_reason).toMatch(/receiver: Receiver is invalid/);
    expect(await available(bad.affiliateId)).toBe(5200);
  });

  it('a lost answer to the send is sent again under the same batch id and pays once', async () => {
    const a = await affiliate({ cents: 5300 });
    twin.loseNextCreateAnswer();
    await cycle(month(8));
    const [p] = await payoutsOf(a.affiliateId);
    expect(p).toMatchObject({ status: 'paid' });
    expect(twin.itemsBySenderItemId().get(p!.id)).toBe(1);
    expect(twin.counts.duplicate).toBeGreaterThanOrEqual(1);
  });

  it('without PayPal settings the cycle refuses with the reason and pays nothing', async () => {
    const a = await affiliate({ cents: 5400 });
    const provider = stack.integrations.affiliatePayouts.provider;
    stack.integrations.affiliatePayouts.provider = { missing: ['PAYPAL_CLIENT_ID', 'PAYPAL_CLIENT_SECRET'] };
    try {
      const result = await cycle(month(9));
      expect(result.refused).toBe(
        'No payout provider: set PAYPAL_CLIENT_ID and PAYPAL_CLIENT_SECRET. Nothing was paid.',
      );
      expect(await payoutsOf(a.affiliateId)).toEqual([]);
    } finally {
      stack.integrations.affiliatePayouts.provider = provider;
    }
  });
});

describe('a payout an earlier cycle made but could not send', () => {
  it('goes out with the next cycle, once', async () => {
    const a = await affiliate({ cents: 5600 });
    // The earlier cycle made its payouts and died before sending (or lost its provider).
    await preparePayoutsPage(stack.sql, {
      cycleAt: month(11),
      after: null,
      limit: 10_000,
      terms: stack.integrations.affiliatePayouts,
    });
    expect(await payoutsOf(a.affiliateId)).toMatchObject([{ period: '2027-12', status: 'held' }]);
    await cycle(new Date(Date.UTC(2028, 0, 1)));
    const rows = await payoutsOf(a.affiliateId);
    expect(rows).toMatchObject([{ period: '2027-12', status: 'paid', amount_cents: 5600 }]);
    expect(twin.itemsBySenderItemId().get(rows[0]!.id)).toBe(1);
    expect(await available(a.affiliateId)).toBe(0);
  });
});

describe('payout routes', () => {
  it('refuse a payout email that is not an email, and answer 404 before enrolment', async () => {
    const a = await affiliate({ cents: 0 });
    const bad = await putPayoutEmail(a, 'not an email');
    expect(bad.statusCode).toBe(422);
    const long = await putPayoutEmail(a, `${'a'.repeat(245)}@example.com`);
    expect(long.statusCode).toBe(422);
    const atBound = await putPayoutEmail(a, `${'a'.repeat(242)}@example.com`);
    expect(atBound.statusCode).toBe(200);
    const removed = await putPayoutEmail(a, null);
    expect(removed.json()).toMatchObject({ payout_email: null, next_payout_blocker: 'no_payout_email' });

    const stranger = await stack.createWorkspace('paid');
    for (const url of ['/affiliate/payouts/', '/affiliate/payout-settings/']) {
      const r = await stack.app.inject({ method: 'GET', url, headers: withKey(stranger.apiKey) });
      expect(r.statusCode).toBe(404);
    }
  });

  it('pages payouts with limit and offset at and past their bounds', async () => {
    const a = await affiliate({ cents: 0 });
    const statusOf = async (query: string) =>
      (await stack.app.inject({ method: 'GET', url: `/affiliate/payouts/?${query}`, headers: withKey(a.apiKey) }))
        .statusCode;
    for (const limit of [0, 201]) expect(await statusOf(`limit=${limit}`)).toBe(422);
    for (const limit of [1, 200]) expect(await statusOf(`limit=${limit}`)).toBe(200);
    expect(await statusOf('offset=-1')).toBe(422);
  });
});

describe('the payout schedule', () => {
  it('is made once, monthly on the configured day at 00:00 UTC, and moves when the day changes', async () => {
    const temporal = { client: stack.client, taskQueue: stack.taskQueue };
    const handle = stack.client.schedule.getHandle(affiliatePayoutScheduleId(stack.taskQueue));
    await handle.delete().catch(() => undefined);
    try {
      expect(await ensurePayoutSchedule(temporal, 1)).toBe('created');
      expect(await ensurePayoutSchedule(temporal, 1)).toBe('kept');
      const first = (await handle.describe()).info.nextActionTimes[0]!;
      expect([first.getUTCDate(), first.getUTCHours(), first.getUTCMinutes()]).toEqual([1, 0, 0]);
      expect(await ensurePayoutSchedule(temporal, 15)).toBe('updated');
      const moved = (await handle.describe()).info.nextActionTimes[0]!;
      expect(moved.getUTCDate()).toBe(15);
    } finally {
      await handle.delete().catch(() => undefined);
    }
  });
});
