/**
 * Outbound webhooks (decision 038): an event committed reaches a subscribed endpoint through the
 * dispatcher and the delivery workflow, signed so the Standard Webhooks reference library verifies
 * it; the secret is shown once; a rotation's overlap signs with both secrets; attempts are listed;
 * a replay sends the same webhook-id again; a dispatcher that died between starting a batch and its
 * commit hands nothing on twice and loses nothing; private addresses are refused unless allowed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { serveHttp, type LocalHttp } from '../../sim/local-http.js';
import { webhookSender } from '../../integrations/webhooks/sender.js';
import type { EventDispatcher } from '../../services/notifications/dispatcher.js';
import { recordWorkspaceEvent } from '../../store/notifications/outbox.js';
import { recordAttempts, reopenDelivery } from '../../store/notifications/deliveries.js';
import { lockEndpoints } from '../../store/notifications/webhooks.js';
import { notificationBatchWorkflowId } from '../../workflows/notifications/notification-event.contract.js';
import { startTestDispatcher, waitFor } from '../support/notifications.js';
import { useTestStack, withKey, withToken } from '../support/test-stack.js';

const { stack, paid, free } = useTestStack();
let receiver: LocalHttp;
let status = 200;
let dispatcher: EventDispatcher;

beforeAll(async () => {
  receiver = await serveHttp((_req, res) => {
    res.writeHead(status, { 'content-type': 'text/plain' }).end(status === 200 ? 'thanks' : 'not now');
  });
  // Local receivers are on loopback: the development setting allows them here.
  stack.integrations.notifications.webhooks = webhookSender({ allowPrivateNetworks: true });
  dispatcher = startTestDispatcher(stack);
});
afterAll(async () => {
  await dispatcher?.stop();
  await receiver?.close();
});

const creditsLow = (workspaceId: string, balance: number) =>
  stack.sql.begin((tx) =>
    recordWorkspaceEvent(tx, { workspaceId, type: 'credits.low', payload: { balance, threshold: 100 } }),
  );

const requestsFor = (eventId: string) =>
  receiver.requests.filter((r) => r.path.startsWith('/hooks') && JSON.parse(r.body).id === eventId);

async function createEndpoint(key: string, body: Record<string, unknown>) {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/webhooks/endpoints/',
    headers: withKey(key),
    payload: body,
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<{ id: string; secret: string; url: string }>();
}

describe('webhook endpoints', () => {
  it('deliver a committed event signed so the reference library verifies it, show the secret once and list the attempt', async () => {
    const endpoint = await createEndpoint(paid.apiKey, {
      url: `${receiver.url}/hooks/a`,
      event_types: ['credits.low'],
      description: 'ops',
    });
    expect(endpoint.secret).toMatch(/^whsec_/);
    const read = await stack.app.inject({
      method: 'GET',
      url: `/webhooks/endpoints/${endpoint.id}/`,
      headers: withKey(paid.apiKey),
    });
    expect(read.statusCode).toBe(200);
    expect(read.json()).not.toHaveProperty('secret');
    expect(read.body).not.toContain(endpoint.secret.slice(6));

    const eventId = await creditsLow(paid.workspaceId, 40);
    const [request] = await waitFor(
      () => (requestsFor(eventId).length ? requestsFor(eventId) : undefined),
      'the webhook',
    );
    const verified = new Webhook(endpoint.secret).verify(request!.body, request!.headers as Record<string, string>) as {
      id: string;
      type: string;
      payload: unknown;
    };
    expect(verified).toMatchObject({
      id: eventId,
      type: 'credits.low',
      workspace_id: paid.workspaceId,
      payload: { balance: 40, threshold: 100 },
    });
    expect(request!.headers['webhook-id']).toMatch(/^msg_[0-9a-f]{32}$/);
    expect(() =>
      new Webhook('whsec_' + Buffer.alloc(24, 1).toString('base64')).verify(
        request!.body,
        request!.headers as Record<string, string>,
      ),
    ).toThrow();

    const attempts = await waitFor(async () => {
      const res = await stack.app.inject({
        method: 'GET',
        url: `/webhooks/endpoints/${endpoint.id}/attempts/`,
        headers: withKey(paid.apiKey),
      });
      const list = res.json().attempts as {
        outcome: string;
        status_code: number;
        response_excerpt: string;
        webhook_id: string;
        event_id: string;
      }[];
      return list.length ? list : undefined;
    }, 'the attempt');
    expect(attempts).toEqual([
      expect.objectContaining({
        outcome: 'succeeded',
        status_code: 200,
        response_excerpt: 'thanks',
        event_id: eventId,
        webhook_id: request!.headers['webhook-id'],
      }),
    ]);

    // Another workspace's endpoint, and an endpoint not taking the type, receive nothing.
    expect(receiver.requests.filter((r) => r.path === '/hooks/a' && JSON.parse(r.body).id !== eventId)).toEqual([]);
  });

  it('sign with both secrets during a rotation overlap, and with the new one only after an overlap of 0', async () => {
    const endpoint = await createEndpoint(paid.apiKey, {
      url: `${receiver.url}/hooks/rotate`,
      event_types: ['credits.low'],
    });
    const rotated = await stack.app.inject({
      method: 'POST',
      url: `/webhooks/endpoints/${endpoint.id}/rotate-secret/`,
      headers: withKey(paid.apiKey),
      payload: { overlap_seconds: 3600 },
    });
    expect(rotated.statusCode).toBe(200);
    const { secret: newSecret, previous_secret_expires_at } = rotated.json<{
      secret: string;
      previous_secret_expires_at: string;
    }>();
    expect(newSecret).not.toBe(endpoint.secret);
    expect(previous_secret_expires_at).not.toBeNull();

    const first = await creditsLow(paid.workspaceId, 30);
    const during = await waitFor(
      () => receiver.requests.find((r) => r.path === '/hooks/rotate' && JSON.parse(r.body).id === first),
      'the overlap message',
    );
    expect(String(during.headers['webhook-signature']).split(' ')).toHaveLength(2);
    for (const secret of [endpoint.secret, newSecret])
      expect(() => new Webhook(secret).verify(during.body, during.headers as Record<string, string>)).not.toThrow();

    const again = await stack.app.inject({
      method: 'POST',
      url: `/webhooks/endpoints/${endpoint.id}/rotate-secret/`,
      headers: withKey(paid.apiKey),
      payload: { overlap_seconds: 0 },
    });
    const latest = again.json<{ secret: string }>().secret;
    const second = await creditsLow(paid.workspaceId, 20);
    const after = await waitFor(
      () => receiver.requests.find((r) => r.path === '/hooks/rotate' && JSON.parse(r.body).id === second),
      'the message after',
    );
    expect(() => new Webhook(latest).verify(after.body, after.headers as Record<string, string>)).not.toThrow();
    expect(() => new Webhook(newSecret).verify(after.body, after.headers as Record<string, string>)).toThrow();
  });

  it('lists an attempt that finished after a replay superseded its run, without settling the replay', async () => {
    const endpoint = await createEndpoint(paid.apiKey, {
      url: `${receiver.url}/hooks/superseded`,
      event_types: ['credits.low'],
    });
    const listAttempts = async () =>
      (
        await stack.app.inject({
          method: 'GET',
          url: `/webhooks/endpoints/${endpoint.id}/attempts/`,
          headers: withKey(paid.apiKey),
        })
      ).json<{ attempts: { delivery_id: string; trigger: string; attempt: number }[] }>().attempts;
    await creditsLow(paid.workspaceId, 15);
    const [scheduled] = await waitFor(async () => {
      const list = await listAttempts();
      return list.length >= 1 ? list : undefined;
    }, 'the first attempt');
    // A replay reopens the delivery (run 2) while an attempt of run 1 is still on its way back.
    const run = await reopenDelivery(stack.sql, scheduled!.delivery_id);
    const recorded = await recordAttempts(stack.sql, [
      {
        deliveryId: scheduled!.delivery_id,
        run: run - 1,
        attempt: 2,
        trigger: 'scheduled',
        outcome: 'succeeded',
        statusCode: 200,
        excerpt: 'ok',
        error: null,
        durationMs: 5,
        settle: 'succeeded',
      },
    ]);
    expect([...recorded]).toEqual([scheduled!.delivery_id]);
    expect((await listAttempts()).map((a) => a.attempt)).toEqual([2, 1]);
    const [delivery] = await stack.sql<{ run: number; status: string }[]>`
      select run, status from notification_deliveries where id = ${scheduled!.delivery_id}`;
    expect(delivery).toEqual({ run, status: 'pending' });
  });

  it('replay one message with the same webhook-id, listed as a replay', async () => {
    const endpoint = await createEndpoint(paid.apiKey, {
      url: `${receiver.url}/hooks/replay`,
      event_types: ['credits.low'],
    });
    const eventId = await creditsLow(paid.workspaceId, 10);
    const first = await waitFor(
      () => receiver.requests.find((r) => r.path === '/hooks/replay' && JSON.parse(r.body).id === eventId),
      'the first message',
    );
    const res = await stack.app.inject({
      method: 'POST',
      url: `/webhooks/endpoints/${endpoint.id}/replay/`,
      headers: withKey(paid.apiKey),
      payload: { event_id: eventId },
    });
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json()).toEqual({ replayed: 1 });
    const both = await waitFor(() => {
      const seen = receiver.requests.filter((r) => r.path === '/hooks/replay');
      return seen.length >= 2 ? seen : undefined;
    }, 'the replay');
    expect(both.map((r) => r.headers['webhook-id'])).toEqual([
      first.headers['webhook-id'],
      first.headers['webhook-id'],
    ]);
    const attempts = await waitFor(async () => {
      const list = (
        await stack.app.inject({
          method: 'GET',
          url: `/webhooks/endpoints/${endpoint.id}/attempts/`,
          headers: withKey(paid.apiKey),
        })
      ).json().attempts as { trigger: string }[];
      return list.length >= 2 ? list : undefined;
    }, 'both attempts');
    expect(attempts.map((a) => a.trigger)).toEqual(['replay', 'scheduled']);

    // Everything since a time: both events of the endpoint's type since before the first.
    const since = await stack.app.inject({
      method: 'POST',
      url: `/webhooks/endpoints/${endpoint.id}/replay/`,
      headers: withKey(paid.apiKey),
      payload: { since: new Date(Date.now() - 60_000).toISOString() },
    });
    expect(since.statusCode).toBe(202);
    expect(since.json().replayed).toBeGreaterThanOrEqual(1);

    const both2 = await stack.app.inject({
      method: 'POST',
      url: `/webhooks/endpoints/${endpoint.id}/replay/`,
      headers: withKey(paid.apiKey),
      payload: { event_id: eventId, since: new Date().toISOString() },
    });
    expect(both2.statusCode).toBe(422);
    const otherEvent = await creditsLow(free.workspaceId, 1);
    const foreign = await stack.app.inject({
      method: 'POST',
      url: `/webhooks/endpoints/${endpoint.id}/replay/`,
      headers: withKey(paid.apiKey),
      payload: { event_id: otherEvent },
    });
    expect(foreign.statusCode).toBe(404);
  });

  it('record a failing receiver with its status and excerpt, and refuse bad input with the issues shape', async () => {
    status = 503;
    try {
      const endpoint = await createEndpoint(paid.apiKey, {
        url: `${receiver.url}/hooks/failing`,
        event_types: ['credits.low'],
      });
      const eventId = await creditsLow(paid.workspaceId, 5);
      const attempts = await waitFor(async () => {
        const list = (
          await stack.app.inject({
            method: 'GET',
            url: `/webhooks/endpoints/${endpoint.id}/attempts/?event_id=${eventId}`,
            headers: withKey(paid.apiKey),
          })
        ).json().attempts as { outcome: string; status_code: number; response_excerpt: string }[];
        return list.length ? list : undefined;
      }, 'the failed attempt');
      expect(attempts[0]).toMatchObject({ outcome: 'failed', status_code: 503, response_excerpt: 'not now' });
      const read = (
        await stack.app.inject({
          method: 'GET',
          url: `/webhooks/endpoints/${endpoint.id}/`,
          headers: withKey(paid.apiKey),
        })
      ).json();
      expect(read.failing_since).not.toBeNull();
      await stack.app.inject({
        method: 'DELETE',
        url: `/webhooks/endpoints/${endpoint.id}/`,
        headers: withKey(paid.apiKey),
      });
    } finally {
      status = 200;
    }
    for (const payload of [
      { url: 'ftp://example.com/x' },
      { url: 'https://example.com', event_types: ['no.such'] },
      { url: 'https://example.com', extra: 1 },
      { url: 'x'.repeat(2049) },
      { url: 'https://example.com/a\u0000b' },
      { url: 'https://exa\u0001mple.com/' },
    ]) {
      const res = await stack.app.inject({
        method: 'POST',
        url: '/webhooks/endpoints/',
        headers: withKey(paid.apiKey),
        payload,
      });
      expect(res.statusCode, JSON.stringify(payload)).toBe(422);
      expect(res.json().issues.length).toBeGreaterThan(0);
    }
    // The same rule on a change: a URL with a NUL is refused by its schema, naming the field.
    const kept = await createEndpoint(paid.apiKey, { url: 'https://example.com/kept' });
    const nul = await stack.app.inject({
      method: 'PATCH',
      url: `/webhooks/endpoints/${kept.id}/`,
      headers: withKey(paid.apiKey),
      payload: { url: 'https://example.com/\u0000' },
    });
    expect(nul.statusCode).toBe(422);
    expect(nul.json().issues[0].loc).toEqual(['body', 'url']);
    expect(
      (
        await stack.app.inject({ method: 'GET', url: `/webhooks/endpoints/${kept.id}/`, headers: withKey(paid.apiKey) })
      ).json().url,
    ).toBe('https://example.com/kept');
    await stack.app.inject({ method: 'DELETE', url: `/webhooks/endpoints/${kept.id}/`, headers: withKey(paid.apiKey) });
    const longest = await stack.app.inject({
      method: 'POST',
      url: '/webhooks/endpoints/',
      headers: withKey(paid.apiKey),
      payload: { url: `https://example.com/${'a'.repeat(2048 - 20)}`, description: 'd'.repeat(500) },
    });
    expect(longest.statusCode).toBe(201);
    const tooLong = await stack.app.inject({
      method: 'POST',
      url: '/webhooks/endpoints/',
      headers: withKey(paid.apiKey),
      payload: { url: 'https://example.com', description: 'd'.repeat(501) },
    });
    expect(tooLong.statusCode).toBe(422);
  });

  it('hand every event on once when a dispatcher died between starting a batch and committing it', async () => {
    const endpoint = await createEndpoint(paid.apiKey, {
      url: `${receiver.url}/hooks/restart`,
      event_types: ['credits.low'],
    });
    await dispatcher.stop();
    const first = await creditsLow(paid.workspaceId, 1);
    const second = await creditsLow(paid.workspaceId, 2);
    // What the dead dispatcher left: the first event's batch started, neither event marked dispatched.
    const started = await stack.client.workflow.start('notificationBatchWorkflow', {
      workflowId: notificationBatchWorkflowId(first),
      taskQueue: stack.taskQueue,
      args: [{ eventIds: [first] }],
    });
    dispatcher = startTestDispatcher(stack);
    await waitFor(
      async () =>
        (
          await stack.sql`select 1 from workspace_events where id in (${first}, ${second}) and dispatched_at is not null`
        ).length === 2
          ? true
          : undefined,
      'both dispatched',
    );
    const forEvent = (id: string) =>
      receiver.requests.filter((r) => r.path === '/hooks/restart' && JSON.parse(r.body).id === id);
    await waitFor(
      () => (forEvent(first).length && forEvent(second).length ? true : undefined),
      'both events, the second in the next batch',
    );
    // Each was sent once and recorded once: by the batch the dead dispatcher started, or by the next.
    // An attempt is recorded after its answer arrives, so the second may be written a moment after the receiver saw it.
    const recorded = () => stack.sql<{ event_id: string; outcome: string }[]>`
      select d.event_id, a.outcome from notification_deliveries d join notification_delivery_attempts a on a.delivery_id = d.id
      where d.event_id in (${first}, ${second}) and d.webhook_endpoint_id = ${endpoint.id} order by d.event_id = ${second}`;
    await waitFor(async () => ((await recorded()).length >= 2 ? true : undefined), 'both attempts recorded');
    const attempts = await recorded();
    expect(attempts).toEqual([
      { event_id: first, outcome: 'succeeded' },
      { event_id: second, outcome: 'succeeded' },
    ]);
    expect(forEvent(first)).toHaveLength(1);
    expect(forEvent(second)).toHaveLength(1);
    expect((await started.describe()).status.name).not.toBe('FAILED');
    expect(forEvent(first)).toHaveLength(1);
    expect(forEvent(second)).toHaveLength(1);
  });

  it("keep another workspace's endpoint out of reach", async () => {
    const endpoint = await createEndpoint(paid.apiKey, { url: 'https://example.com/hook' });
    for (const [method, url] of [
      ['GET', ''],
      ['PATCH', ''],
      ['DELETE', ''],
      ['GET', 'attempts/'],
      ['POST', 'rotate-secret/'],
    ] as const) {
      const res = await stack.app.inject({
        method,
        url: `/webhooks/endpoints/${endpoint.id}/${url}`,
        headers: withToken(free.accessToken),
        ...(method === 'GET' || method === 'DELETE' ? {} : { payload: {} }),
      });
      expect(res.statusCode, `${method} ${url}`).toBe(404);
    }
  });
});

describe('registering an endpoint at a private address', () => {
  it('is refused with 422 naming url and nothing stored, at and past each range; a public address or name is accepted', async () => {
    // The default setting, as in production: the file's sender allows the loopback receivers.
    const allowing = stack.integrations.notifications.webhooks;
    stack.integrations.notifications.webhooks = webhookSender();
    try {
      const ws = await stack.createWorkspace('paid');
      const stored = async () =>
        (
          await stack.sql<{ url: string }[]>`select url from webhook_endpoints where workspace_id = ${ws.workspaceId}`
        ).map((r) => r.url);
      const register = (url: string) =>
        stack.app.inject({
          method: 'POST',
          url: '/webhooks/endpoints/',
          headers: withKey(ws.apiKey),
          payload: { url, event_types: ['credits.low'] },
        });
      for (const url of [
        'http://127.0.0.1/hook',
        'http://127.255.255.254:8080/hook',
        'http://169.254.169.254/latest/meta-data',
        'http://[::1]/hook',
        'http://[::ffff:127.0.0.1]/hook',
        'http://[fd00::1]/hook',
        'http://[fe80::1]/hook',
        'http://10.0.0.0/hook',
        'http://10.255.255.255/hook',
        'http://172.16.0.0/hook',
        'http://172.31.255.255/hook',
        'http://192.168.0.0/hook',
        'http://192.168.255.255/hook',
        'http://0.0.0.0/hook',
        'http://2130706433/hook',
        'http://0x7f.1/hook',
        'http://0177.0.0.1/hook',
        'http://127.1/hook',
        'http://0xa9fea9fe/latest/meta-data',
        'http://localhost:8080/hook',
      ]) {
        const res = await register(url);
        expect(res.statusCode, `${url}: ${res.body}`).toBe(422);
        const body = res.json<{ detail: string; issues: { loc: string[]; input: unknown }[] }>();
        expect(body.issues, url).toEqual([expect.objectContaining({ loc: ['body', 'url'], input: url })]);
        expect(body.detail).toMatch(/^Invalid body field "url": .*public addresses only/);
      }
      expect(await stored()).toEqual([]);

      // Just past each private range, and names that are not private, are accepted.
      const accepted = [
        'http://9.255.255.255/hook',
        'http://11.0.0.0/hook',
        'http://172.15.255.255/hook',
        'http://172.32.0.0/hook',
        'http://192.167.255.255/hook',
        'http://192.169.0.0/hook',
        'http://169.253.255.255/hook',
        'https://example.com/hook',
        'https://hooks.example.com/outreach',
      ];
      for (const url of accepted) expect((await register(url)).statusCode, url).toBe(201);
      expect((await stored()).sort()).toEqual([...accepted].sort());

      // Changing an endpoint's URL is checked the same way; a refused change changes nothing.
      const [endpoint] = await stack.sql<{ id: string }[]>`
        select id from webhook_endpoints where workspace_id = ${ws.workspaceId} and url = 'https://example.com/hook'`;
      const change = (url: string) =>
        stack.app.inject({
          method: 'PATCH',
          url: `/webhooks/endpoints/${endpoint!.id}/`,
          headers: withKey(ws.apiKey),
          payload: { url, description: 'moved' },
        });
      for (const url of ['http://2130706433/hook', 'http://[::1]/hook', 'http://172.16.0.1/hook']) {
        const res = await change(url);
        expect(res.statusCode, url).toBe(422);
        expect(res.json().issues[0].loc).toEqual(['body', 'url']);
      }
      const [unchanged] = await stack.sql<{ url: string; description: string }[]>`
        select url, description from webhook_endpoints where id = ${endpoint!.id}`;
      expect(unchanged).toEqual({ url: 'https://example.com/hook', description: '' });
      const moved = await change('https://example.org/hook');
      expect(moved.statusCode, moved.body).toBe(200);
      expect(moved.json()).toMatchObject({ url: 'https://example.org/hook', description: 'moved' });

      // The development setting that lets deliveries reach local twins lets them be registered.
      stack.integrations.notifications.webhooks = allowing;
      expect((await register(`${receiver.url}/hooks/local`)).statusCode).toBe(201);
    } finally {
      stack.integrations.notifications.webhooks = allowing;
    }
  });
});

describe('recording attempts for several endpoints at once', () => {
  it('takes the endpoints in one order, so two flushes writing them in opposite orders both commit', async () => {
    const endpoint = async () =>
      (
        await stack.app.inject({
          method: 'POST',
          url: '/webhooks/endpoints/',
          headers: withKey(paid.apiKey),
          payload: { url: `${receiver.url}/order`, event_types: ['credits.low'] },
        })
      ).json().id as string;
    const [a, b] = [await endpoint(), await endpoint()];
    // Each flush writes its first endpoint, waits until the other has written its own, then the
    // second: without one lock order first, that is a circle Postgres ends with 40P01.
    let written = 0;
    const bothWritten = async () => {
      written += 1;
      while (written < 2) await new Promise((r) => setTimeout(r, 20));
    };
    const flush = (first: string, second: string) =>
      stack.sql.begin(async (tx) => {
        await lockEndpoints(tx, [first, second]);
        await tx`update webhook_endpoints set failing_since = now() where id = ${first}`;
        await Promise.race([bothWritten(), new Promise((r) => setTimeout(r, 1500))]);
        await tx`update webhook_endpoints set failing_since = null where id = ${second}`;
      });
    await expect(Promise.all([flush(a, b), flush(b, a)])).resolves.toBeDefined();
  });
});

describe('the webhook sender', () => {
  it('refuses loopback, private, link-local and metadata addresses unless allowed, on every redirect', async () => {
    const strict = webhookSender();
    for (const url of [
      'http://127.0.0.1:9/x',
      'http://10.0.0.1/x',
      'http://169.254.169.254/latest/meta-data',
      'http://[::1]/x',
      'http://192.168.1.1/',
      'http://localhost:9/x',
    ]) {
      const result = await strict.post(url, '{}', {});
      expect(result.kind, url).toBe('refused');
    }
    const redirecting = await serveHttp(
      (_req, res) => void res.writeHead(307, { location: 'http://169.254.169.254/latest/meta-data' }).end(),
    );
    try {
      expect((await strict.post(`${redirecting.url}/r`, '{}', {})).kind).toBe('refused');
    } finally {
      await redirecting.close();
    }
  }, 30_000);
});
