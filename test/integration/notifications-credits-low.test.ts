/**
 * `credits.low` from real spends: the ledger records it in the same statement or transaction as a
 * hold or a revoke that takes the available balance from the catalogue's threshold or above to
 * below it, once per crossing (a spend already below records nothing; a grant or release back to
 * the threshold re-arms it), and a notification rule on the type delivers each one.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveHttp, type LocalHttp } from '../../sim/local-http.js';
import { creditsLowThreshold } from '../../domain/notifications/events.js';
import { webhookSender } from '../../integrations/webhooks/sender.js';
import type { EventDispatcher } from '../../services/notifications/dispatcher.js';
import {
  chargeHold,
  getBalance,
  grantCredits,
  holdCredits,
  releaseHold,
  revokeCreditsIn,
} from '../../store/platform/credits.js';
import { startTestDispatcher, waitFor } from '../support/notifications.js';
import { useTestStack, withKey, type TestWorkspace } from '../support/test-stack.js';

const { stack } = useTestStack({ workspaces: false });
let receiver: LocalHttp;
let dispatcher: EventDispatcher;

beforeAll(async () => {
  receiver = await serveHttp((_req, res) => void res.writeHead(200).end('ok'));
  // The receiver is on loopback: the development setting allows it here.
  stack.integrations.notifications.webhooks = webhookSender({ allowPrivateNetworks: true });
  dispatcher = startTestDispatcher(stack);
});
afterAll(async () => {
  await dispatcher?.stop();
  await receiver?.close();
});

let causes = 0;
const hold = (ws: TestWorkspace, amount: number) =>
  stack.sql.begin((tx) => holdCredits(tx, { workspaceId: ws.workspaceId, amount, causeKey: `spend-${++causes}` }));
/** A spend: a hold charged in full. */
const spend = async (ws: TestWorkspace, amount: number) => {
  const held = await hold(ws, amount);
  await stack.sql.begin((tx) => chargeHold(tx, held.id));
};
const grant = (ws: TestWorkspace, amount: number) =>
  grantCredits(stack.sql, { workspaceId: ws.workspaceId, amount, causeKey: `grant-${++causes}` });
const available = async (ws: TestWorkspace) => (await getBalance(stack.sql, ws.workspaceId)).available;

const lowEvents = (ws: TestWorkspace) =>
  stack.sql<{ id: string; payload: { balance: number; threshold: number } }[]>`
    select id, payload from workspace_events where workspace_id = ${ws.workspaceId} and type = 'credits.low' order by seq`;

/** A workspace with exactly `amount` available (at or above the threshold, so nothing is recorded). */
async function workspaceWith(amount: number): Promise<TestWorkspace> {
  const ws = await stack.createWorkspace('paid');
  const now = await available(ws);
  if (now < amount) await grant(ws, amount - now);
  if (now > amount) await spend(ws, now - amount);
  expect(await available(ws)).toBe(amount);
  expect(await lowEvents(ws)).toEqual([]);
  return ws;
}

describe('credits.low', () => {
  it('is recorded once per crossing below the threshold, and a rule on it delivers each', async () => {
    expect(creditsLowThreshold).toBe(100);
    const ws = await workspaceWith(150);
    const endpoint = await stack.app.inject({
      method: 'POST',
      url: '/webhooks/endpoints/',
      headers: withKey(ws.apiKey),
      // Subscribed to another type: only the rule brings credits.low here.
      payload: { url: `${receiver.url}/low`, event_types: ['reply.received'] },
    });
    expect(endpoint.statusCode, endpoint.body).toBe(201);
    const rule = await stack.app.inject({
      method: 'POST',
      url: '/notifications/rules/',
      headers: withKey(ws.apiKey),
      payload: { event_type: 'credits.low', channel: 'webhook', webhook_endpoint_id: endpoint.json().id },
    });
    expect(rule.statusCode, rule.body).toBe(201);

    // Down to the threshold itself: not below it yet.
    await spend(ws, 50);
    expect(await available(ws)).toBe(100);
    expect(await lowEvents(ws)).toEqual([]);

    // One credit past it: the crossing.
    await spend(ws, 1);
    expect((await lowEvents(ws)).map((e) => e.payload)).toEqual([{ balance: 99, threshold: 100 }]);

    // Further spends below it record nothing more.
    await spend(ws, 9);
    await hold(ws, 5);
    expect(await available(ws)).toBe(85);
    expect(await lowEvents(ws)).toHaveLength(1);

    // A grant back to the threshold re-arms it: the next spend below is a second crossing.
    await grant(ws, 15);
    expect(await available(ws)).toBe(100);
    const second = await hold(ws, 40);
    expect((await lowEvents(ws)).map((e) => e.payload.balance)).toEqual([99, 60]);

    // A released hold re-arms it too, and a revoke (a refunded purchase) crosses like a spend.
    await stack.sql.begin((tx) => releaseHold(tx, second.id));
    expect(await available(ws)).toBe(100);
    await stack.sql.begin((tx) =>
      revokeCreditsIn(tx, { workspaceId: ws.workspaceId, amount: 1, causeKey: 'refund-1', note: 'refunded' }),
    );
    const events = await lowEvents(ws);
    expect(events.map((e) => e.payload.balance)).toEqual([99, 60, 99]);

    // The rule delivers each event, once.
    const toRule = () => receiver.requests.filter((r) => r.path === '/low');
    await waitFor(() => (toRule().length >= events.length ? true : undefined), 'the three deliveries');
    await new Promise((r) => setTimeout(r, 500));
    const bodies = toRule().map((r) => JSON.parse(r.body) as { id: string; type: string; payload: unknown });
    expect(bodies.map((b) => b.id).sort()).toEqual(events.map((e) => e.id).sort());
    for (const event of events)
      expect(bodies.find((b) => b.id === event.id)).toMatchObject({ type: 'credits.low', payload: event.payload });
  });

  it('is recorded once when concurrent spends cross together', async () => {
    const ws = await workspaceWith(120);
    await Promise.all(Array.from({ length: 5 }, () => hold(ws, 10)));
    expect(await available(ws)).toBe(70);
    expect((await lowEvents(ws)).map((e) => e.payload)).toEqual([{ balance: 90, threshold: 100 }]);
  });
});
