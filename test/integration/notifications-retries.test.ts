/**
 * Delivery over days, under time skipping (decisions 038, 045): a failing receiver is tried on the
 * documented schedule (at once, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h) and the delivery ends
 * failed with every attempt recorded; an endpoint failing for 5 days is disabled and its owner told
 * by email; a receiver that recovers ends the retries; a batch's deliveries that fail alike wait on
 * one timer and are retried together.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNotificationActivities } from '../../activities/notifications/notifications.js';
import { smtpMailer, type Mailer } from '../../integrations/mailer.js';
import { webhookSender } from '../../integrations/webhooks/sender.js';
import { retryScheduleSeconds } from '../../domain/notifications/webhooks.js';
import { serveHttp, type LocalHttp } from '../../sim/local-http.js';
import { startSmtpSink, type SmtpSink } from '../../sim/smtp-sink.js';
import { recordWorkspaceEvent } from '../../store/notifications/outbox.js';
import { notificationBatchWorkflow } from '../../workflows/notifications/notification-event.js';
import { notificationBatchWorkflowId } from '../../workflows/notifications/notification-event.contract.js';
import { useTestStack, withToken } from '../support/test-stack.js';
import { useTimeSkippingWorker } from '../support/time-skipping.js';

const { stack, paid } = useTestStack();
const taskQueue = 'notification-retries-test';
let receiver: LocalHttp;
let sink: SmtpSink;
let mailer: Mailer;
/** Status answered per path; 500 when unset. */
const answers = new Map<string, number[]>();

const temporal = useTimeSkippingWorker(taskQueue, () =>
  createNotificationActivities({ sql: stack.sql, integrations: stack.integrations, mailer: () => mailer }),
);

beforeAll(async () => {
  receiver = await serveHttp((req, res) => {
    const queue = answers.get(req.url ?? '') ?? [];
    const status = queue.shift() ?? 500;
    res.writeHead(status, status === 429 ? { 'retry-after': '600' } : {}).end('down for maintenance');
  });
  sink = await startSmtpSink();
  mailer = smtpMailer(sink.url, { from: 'notifications@outreach.example' });
  stack.integrations.notifications.webhooks = webhookSender({ allowPrivateNetworks: true });
});
afterAll(async () => {
  await receiver?.close();
  await sink?.close();
});

async function endpointAt(path: string) {
  await stack.sql`delete from webhook_endpoints where workspace_id = ${paid.workspaceId}`;
  const res = await stack.app.inject({
    method: 'POST',
    url: '/webhooks/endpoints/',
    headers: withToken(paid.accessToken),
    payload: { url: `${receiver.url}${path}`, event_types: ['credits.low'] },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<{ id: string }>();
}

/** The endpoint as its settings route answers it. */
const readEndpoint = async (endpointId: string) =>
  (
    await stack.app.inject({
      method: 'GET',
      url: `/webhooks/endpoints/${endpointId}/`,
      headers: withToken(paid.accessToken),
    })
  ).json();

// A batch of one event, as the dispatcher starts it.
const deliverEvent = async (eventId: string) =>
  temporal.env.client.workflow.execute(notificationBatchWorkflow, {
    taskQueue,
    workflowId: notificationBatchWorkflowId(eventId),
    args: [{ eventIds: [eventId] }],
  });

const creditsLow = () =>
  stack.sql.begin((tx) =>
    recordWorkspaceEvent(tx, {
      workspaceId: paid.workspaceId,
      type: 'credits.low',
      payload: { balance: 1, threshold: 10 },
    }),
  );

async function timersOf(eventId: string): Promise<number[]> {
  const history = await temporal.env.client.workflow.getHandle(notificationBatchWorkflowId(eventId)).fetchHistory();
  return (history.events ?? [])
    .map((e) => e.timerStartedEventAttributes?.startToFireTimeout)
    .filter((t): t is NonNullable<typeof t> => Boolean(t))
    .map((t) => Number(t.seconds ?? 0));
}

describe('webhook retries', () => {
  it('follow the schedule to the eighth attempt, then the delivery is failed with every attempt listed', async () => {
    const endpoint = await endpointAt('/always-down');
    const eventId = await creditsLow();
    expect(await deliverEvent(eventId)).toEqual({ events: 1, deliveries: 1, succeeded: 0 });
    expect(await timersOf(eventId)).toEqual(retryScheduleSeconds.slice(1));
    const [delivery] = await stack.sql<
      { status: string; attempt_count: number }[]
    >`select status, attempt_count from notification_deliveries where event_id = ${eventId}`;
    expect(delivery).toEqual({ status: 'failed', attempt_count: 8 });
    const listed = await stack.app.inject({
      method: 'GET',
      url: `/webhooks/endpoints/${endpoint.id}/attempts/?event_id=${eventId}`,
      headers: withToken(paid.accessToken),
    });
    const attempts = listed.json().attempts as {
      attempt: number;
      outcome: string;
      status_code: number;
      response_excerpt: string;
    }[];
    expect(attempts.map((a) => a.attempt)).toEqual([8, 7, 6, 5, 4, 3, 2, 1]);
    expect(
      attempts.every(
        (a) => a.outcome === 'failed' && a.status_code === 500 && a.response_excerpt === 'down for maintenance',
      ),
    ).toBe(true);
    // 27.6 hours of failing is not 5 days: the endpoint stays enabled.
    const read = await readEndpoint(endpoint.id);
    expect(read).toMatchObject({ enabled: true });
    expect(read.failing_since).not.toBeNull();
  });

  it('stop at the first 2xx, and a longer Retry-After wins over the schedule', async () => {
    answers.set('/recovers', [429, 503, 204]);
    const endpoint = await endpointAt('/recovers');
    const eventId = await creditsLow();
    expect(await deliverEvent(eventId)).toEqual({ events: 1, deliveries: 1, succeeded: 1 });
    expect(await timersOf(eventId)).toEqual([600, 300]);
    const read = await readEndpoint(endpoint.id);
    expect(read.failing_since).toBeNull();
  });

  it('retry a batch whose deliveries failed alike on one timer and in one round', async () => {
    answers.set('/batch', [503, 503, 503, 204, 204, 204]);
    const endpoint = await endpointAt('/batch');
    const eventIds = [await creditsLow(), await creditsLow(), await creditsLow()];
    const outcome = await temporal.env.client.workflow.execute(notificationBatchWorkflow, {
      taskQueue,
      workflowId: notificationBatchWorkflowId(eventIds[0]!),
      args: [{ eventIds }],
    });
    expect(outcome).toEqual({ events: 3, deliveries: 3, succeeded: 3 });
    expect(await timersOf(eventIds[0]!)).toEqual([5]);
    const listed = await stack.app.inject({
      method: 'GET',
      url: `/webhooks/endpoints/${endpoint.id}/attempts/`,
      headers: withToken(paid.accessToken),
    });
    const attempts = listed.json().attempts as { event_id: string; attempt: number; status_code: number }[];
    for (const eventId of eventIds) {
      expect(attempts.filter((a) => a.event_id === eventId).map((a) => [a.attempt, a.status_code])).toEqual([
        [2, 204],
        [1, 503],
      ]);
    }
  });

  it('disable an endpoint failing for 5 days and tell its owner by email, once', async () => {
    const endpoint = await endpointAt('/dead');
    await stack.sql`update webhook_endpoints set failing_since = now() - interval '5 days 1 minute' where id = ${endpoint.id}`;
    const eventId = await creditsLow();
    expect(await deliverEvent(eventId)).toEqual({ events: 1, deliveries: 1, succeeded: 0 });
    const read = await readEndpoint(endpoint.id);
    expect(read).toMatchObject({ enabled: false, disabled_reason: expect.stringContaining('5 days') });
    // The attempt after it was disabled is not made: recorded as skipped.
    const [delivery] = await stack.sql<
      { status: string; attempt_count: number }[]
    >`select status, attempt_count from notification_deliveries where event_id = ${eventId}`;
    expect(delivery).toEqual({ status: 'skipped', attempt_count: 2 });

    const disabled = await stack.sql<
      { id: string; payload: { endpoint_id: string } }[]
    >`select id, payload from workspace_events where type = 'webhook.endpoint_disabled'`;
    expect(disabled.map((e) => e.payload.endpoint_id)).toEqual([endpoint.id]);
    expect(await deliverEvent(disabled[0]!.id)).toEqual({ events: 1, deliveries: 1, succeeded: 1 });
    const [owner] = await stack.sql<
      { email: string }[]
    >`select email from members where workspace_id = ${paid.workspaceId} and role = 'admin' order by created_at limit 1`;
    expect(sink.messages.map((m) => [m.to, m.subject])).toEqual([
      [[owner!.email.toLowerCase()], 'A webhook endpoint was disabled'],
    ]);

    // Enabling it again clears the failing time and the reason.
    const enabled = await stack.app.inject({
      method: 'PATCH',
      url: `/webhooks/endpoints/${endpoint.id}/`,
      headers: withToken(paid.accessToken),
      payload: { enabled: true },
    });
    expect(enabled.json()).toMatchObject({ enabled: true, disabled_reason: null, failing_since: null });
  });
});
