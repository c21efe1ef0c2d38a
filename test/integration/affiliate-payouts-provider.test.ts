/**
 * The PayPal Payouts client against the local twin (decision 044): its failure shapes — 401
 * refreshes the token, 429 is waited out, 422 names the bad items, a repeated sender batch id reads
 * the batch the first send made — and items going UNCLAIMED, then RETURNED after 30 days.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPayPalPayouts, itemIndexOf } from '../../integrations/payouts/paypal.js';
import {
  PayoutProviderError,
  PayoutValidationError,
  type PayoutItemRequest,
} from '../../integrations/payouts/provider.js';
import { startPayPalPayoutsTwin, unclaimedReturnMs, type PayPalPayoutsTwin } from '../../sim/paypal-payouts-server.js';

let twin: PayPalPayoutsTwin;
const waits: number[] = [];
const client = () =>
  createPayPalPayouts(
    { clientId: twin.clientId, clientSecret: twin.clientSecret, apiBase: twin.url },
    { sleep: async (ms) => void waits.push(ms) },
  );

const item = (id: string, email: string, cents = 5000): PayoutItemRequest => ({
  senderItemId: id,
  receiverEmail: email,
  amountCents: cents,
  currency: 'USD',
  note: 'Affiliate payout',
});

beforeAll(async () => {
  twin = await startPayPalPayoutsTwin();
});
afterAll(() => twin?.close());

describe('PayPal payouts client against the twin', () => {
  it('sends a batch in dollars and cents and reads every item back', async () => {
    const batch = await client().createBatch({
      senderBatchId: 'b-ok',
      emailSubject: 'Your payout',
      items: [item('p1', 'a@example.com', 5001), item('p2', 'b@example.com', 123456)],
    });
    expect(batch.senderBatchId).toBe('b-ok');
    expect(batch.items.map((i) => [i.senderItemId, i.status])).toEqual([
      ['p1', 'SUCCESS'],
      ['p2', 'SUCCESS'],
    ]);
    const sent = JSON.parse(
      twin.requests.find((r) => r.method === 'POST' && r.path === '/v1/payments/payouts')!.body,
    ) as { items: Array<{ amount: { value: string } }> };
    expect(sent.items.map((i) => i.amount.value)).toEqual(['50.01', '1234.56']);
  });

  it('a repeated sender batch id pays nothing twice and answers the first batch', async () => {
    const c = client();
    const first = await c.createBatch({
      senderBatchId: 'b-dup',
      emailSubject: 's',
      items: [item('p3', 'c@example.com')],
    });
    const again = await c.createBatch({
      senderBatchId: 'b-dup',
      emailSubject: 's',
      items: [item('p3', 'c@example.com')],
    });
    expect(twin.counts.duplicate).toBe(1);
    expect(again.providerBatchId).toBe(first.providerBatchId);
    expect(again.items.map((i) => i.providerItemId)).toEqual(first.items.map((i) => i.providerItemId));
    expect(twin.itemsBySenderItemId().get('p3')).toBe(1);
  });

  it('a lost answer (500 after the batch was made) is safe to send again under the same id', async () => {
    const c = client();
    twin.loseNextCreateAnswer();
    await expect(
      c.createBatch({ senderBatchId: 'b-lost', emailSubject: 's', items: [item('p4', 'd@example.com')] }),
    ).rejects.toBeInstanceOf(PayoutProviderError);
    const retried = await c.createBatch({
      senderBatchId: 'b-lost',
      emailSubject: 's',
      items: [item('p4', 'd@example.com')],
    });
    expect(retried.items).toHaveLength(1);
    expect(twin.itemsBySenderItemId().get('p4')).toBe(1);
  });

  it('401 invalid_token fetches a new token once and carries on', async () => {
    const c = client();
    await c.createBatch({ senderBatchId: 'b-t1', emailSubject: 's', items: [item('p5', 'e@example.com')] });
    const tokensBefore = twin.counts.token;
    twin.expireTokens();
    const batch = await c.createBatch({
      senderBatchId: 'b-t2',
      emailSubject: 's',
      items: [item('p6', 'f@example.com')],
    });
    expect(batch.items[0]!.status).toBe('SUCCESS');
    expect(twin.counts.token).toBe(tokensBefore + 1);
  });

  it('wrong client credentials are refused with the reason, never retried forever', async () => {
    const bad = createPayPalPayouts({ clientId: 'nope', clientSecret: 'nope', apiBase: twin.url });
    await expect(bad.getBatch('X')).rejects.toThrow(
      /refused the client credentials \(401: Client Authentication failed\)/,
    );
  });

  it('429 is waited out (Retry-After) and then answered', async () => {
    waits.length = 0;
    twin.throttle(2);
    const batch = await client().createBatch({
      senderBatchId: 'b-429',
      emailSubject: 's',
      items: [item('p7', 'g@example.com')],
    });
    expect(batch.items).toHaveLength(1);
    expect(waits).toEqual([1000, 1000]);
  });

  it('a server that takes the request and never answers is unreachable after the request timeout, not a hung cycle', async () => {
    const silent = createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
      const hung = createPayPalPayouts(
        { clientId: twin.clientId, clientSecret: twin.clientSecret, apiBase: url },
        { requestTimeoutMs: 300 },
      );
      await expect(hung.getBatch('X')).rejects.toMatchObject({
        name: 'PayoutProviderError',
        status: null,
        message: expect.stringMatching(/PayPal could not be reached/),
      });
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
  });

  it('429 past the attempts is a provider error a later retry can fix', async () => {
    twin.throttle(10);
    await expect(client().getBatch('X')).rejects.toMatchObject({ name: 'PayoutProviderError', status: 429 });
    twin.throttle(0);
  });

  it('422 names the items it refused, and creates nothing', async () => {
    const before = twin.batches.size;
    const error = await client()
      .createBatch({
        senderBatchId: 'b-422',
        emailSubject: 's',
        items: [item('p8', 'h@example.com'), item('p9', 'not-an-email'), item('p10', 'i@example.com', 0)],
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PayoutValidationError);
    const issues = (error as PayoutValidationError).itemIssues;
    expect([...issues.keys()].sort()).toEqual([1, 2]);
    expect(issues.get(1)).toMatch(/items\[1\]\.receiver: Receiver is invalid/);
    expect(twin.batches.size).toBe(before);
  });

  it('items come back UNCLAIMED, then RETURNED 30 days later; FAILED carries its error name', async () => {
    const c = client();
    const batch = await c.createBatch({
      senderBatchId: 'b-unclaimed',
      emailSubject: 's',
      items: [
        item('p11', 'j+unclaimed@example.com'),
        item('p12', 'k+fail@example.com'),
        item('p13', 'l+onhold@example.com'),
      ],
    });
    expect(batch.items.map((i) => i.status)).toEqual(['UNCLAIMED', 'FAILED', 'ONHOLD']);
    expect(batch.items[1]!.errorName).toBe('RECEIVER_ACCOUNT_LOCKED');
    twin.advance(unclaimedReturnMs - 60_000);
    expect((await c.getBatch(batch.providerBatchId)).items[0]!.status).toBe('UNCLAIMED');
    twin.advance(60_000);
    expect((await c.getBatch(batch.providerBatchId)).items[0]!.status).toBe('RETURNED');
  });

  it('items stay PENDING while the twin processes them', async () => {
    twin.setProcessingMs(3_600_000);
    const c = client();
    const batch = await c.createBatch({
      senderBatchId: 'b-pending',
      emailSubject: 's',
      items: [item('p14', 'm@example.com')],
    });
    expect(batch.batchStatus).toBe('PROCESSING');
    expect(batch.items[0]!.status).toBe('PENDING');
    twin.advance(3_600_000);
    expect((await c.getBatch(batch.providerBatchId)).items[0]!.status).toBe('SUCCESS');
    twin.setProcessingMs(0);
  });

  it('reads the item index from every field spelling PayPal uses', () => {
    expect(itemIndexOf('items[12].receiver')).toBe(12);
    expect(itemIndexOf('/items/3/amount/value')).toBe(3);
    expect(itemIndexOf('sender_batch_header.sender_batch_id')).toBeNull();
  });
});
