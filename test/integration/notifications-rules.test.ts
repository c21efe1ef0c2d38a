/**
 * Rules and preferences (decision 038): a reply received through the inbound-email webhook is an
 * event committed with the message; an email rule tells each member by their preference (one muted,
 * one in the daily digest, one at once); critical types cannot be muted; filters narrow a rule;
 * rules are the workspace's own.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNotificationActivities } from '../../activities/notifications/notifications.js';
import { smtpMailer, type Mailer } from '../../integrations/mailer.js';
import { startSmtpSink, type SmtpSink } from '../../sim/smtp-sink.js';
import type { EventDispatcher } from '../../services/notifications/dispatcher.js';
import { recordWorkspaceEvent } from '../../store/notifications/outbox.js';
import { postInboundEmail, startTestDispatcher, waitFor } from '../support/notifications.js';
import { useTestStack, withKey, withToken } from '../support/test-stack.js';

const { stack, paid, free } = useTestStack();
let sink: SmtpSink;
let mailer: Mailer;
let dispatcher: EventDispatcher;
let inboundSecret: string;

beforeAll(async () => {
  sink = await startSmtpSink();
  mailer = smtpMailer(sink.url, { from: 'notifications@outreach.example' });
  stack.integrations.mailer = mailer;
  dispatcher = startTestDispatcher(stack);
  const rotated = await stack.app.inject({
    method: 'POST',
    url: '/inbox/settings/webhook-secret/',
    headers: withKey(paid.apiKey),
  });
  inboundSecret = rotated.json().secret;
});
afterAll(async () => {
  await dispatcher?.stop();
  await sink?.close();
});

function inboundReply(from: string) {
  const raw = [
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    `Date: ${new Date().toUTCString()}`,
    `From: Pat <${from}>`,
    'To: sales@outreach.example',
    `Subject: Re: our call`,
    `Message-ID: <${Math.random().toString(36).slice(2)}@example.org>`,
    '',
    'Sounds good, tell me more.',
    '',
  ].join('\r\n');
  return postInboundEmail(stack.app, paid.workspaceId, inboundSecret, raw);
}

describe('notification rules and preferences', () => {
  it('tell each member of an email rule by their preference: at once, in the daily digest, or not at all', async () => {
    const muted = await stack.addMember(paid.workspaceId, 'member');
    const digested = await stack.addMember(paid.workspaceId, 'member');
    const mute = await stack.app.inject({
      method: 'PUT',
      url: '/notifications/preferences/',
      headers: withToken(muted.accessToken),
      payload: { preferences: [{ event_type: 'reply.received', mode: 'mute' }] },
    });
    expect(mute.statusCode, mute.body).toBe(200);
    expect(mute.json().preferences).toContainEqual({ event_type: 'reply.received', mode: 'mute', critical: false });
    await stack.app.inject({
      method: 'PUT',
      url: '/notifications/preferences/',
      headers: withToken(digested.accessToken),
      payload: { preferences: [{ event_type: 'reply.received', mode: 'digest' }] },
    });
    const rule = await stack.app.inject({
      method: 'POST',
      url: '/notifications/rules/',
      headers: withToken(paid.accessToken),
      payload: { event_type: 'reply.received', channel: 'email' },
    });
    expect(rule.statusCode, rule.body).toBe(201);

    const received = await inboundReply('pat@example.org');
    expect(received.statusCode, received.body).toBeLessThan(300);
    const events = await waitFor(async () => {
      const list = (
        await stack.app.inject({
          method: 'GET',
          url: '/notifications/events/?type=reply.received',
          headers: withKey(paid.apiKey),
        })
      ).json().events as { id: string; payload: { from_email: string; channel: string } }[];
      return list.length ? list : undefined;
    }, 'the event');
    expect(events[0]!.payload).toMatchObject({ from_email: 'pat@example.org', channel: 'email' });

    const emails = await waitFor(() => (sink.messages.length ? sink.messages : undefined), 'the email');
    const members = await stack.sql<
      { id: string; email: string; idp_user_id: string }[]
    >`select id, email, idp_user_id from members where workspace_id = ${paid.workspaceId}`;
    const admin = members.find((m) => m.idp_user_id !== muted.userId && m.idp_user_id !== digested.userId);
    await waitFor(async () => {
      const [d] = await stack.sql<
        { n: number }[]
      >`select count(*)::int as n from notification_deliveries where event_id = ${events[0]!.id} and status in ('succeeded', 'digest_pending')`;
      return d!.n === members.length - 1 ? true : undefined;
    }, 'the deliveries');
    expect(emails.map((m) => m.to[0])).toEqual([admin!.email.toLowerCase()]);
    expect(emails[0]!.subject).toBe('A reply was received');

    // The digest sends the waiting one in one email, once.
    const activities = createNotificationActivities({
      sql: stack.sql,
      integrations: stack.integrations,
      mailer: () => mailer,
    });
    expect(await activities.sendNotificationDigests({})).toBe(1);
    expect(await activities.sendNotificationDigests({})).toBe(0);
    const digest = sink.messages[sink.messages.length - 1]!;
    expect(digest.subject).toBe('Your daily digest: 1 event');
    expect(digest.to).toEqual([members.find((m) => m.idp_user_id === digested.userId)!.email.toLowerCase()]);
  });

  it('refuse muting or digesting a critical type, and tell a member who muted everything else of a checkpoint', async () => {
    const member = await stack.addMember(paid.workspaceId, 'member');
    const refused = await stack.app.inject({
      method: 'PUT',
      url: '/notifications/preferences/',
      headers: withToken(member.accessToken),
      payload: {
        preferences: [
          { event_type: 'reply.received', mode: 'mute' },
          { event_type: 'account.checkpoint', mode: 'mute' },
        ],
      },
    });
    expect(refused.statusCode).toBe(422);
    expect(refused.json().issues[0].loc).toEqual(['body', 'preferences.1.mode']);
    const read = await stack.app.inject({
      method: 'GET',
      url: '/notifications/preferences/',
      headers: withToken(member.accessToken),
    });
    expect(read.json().preferences).toContainEqual({ event_type: 'reply.received', mode: 'each', critical: false });
    expect(read.json().preferences).toContainEqual({ event_type: 'account.checkpoint', mode: 'each', critical: true });
  });

  it('narrow a rule by its filters', async () => {
    const sequenceA = '00000000-0000-4000-8000-00000000000a';
    const rule = await stack.app.inject({
      method: 'POST',
      url: '/notifications/rules/',
      headers: withToken(paid.accessToken),
      payload: { event_type: 'sequence_contact.finished', channel: 'email', filters: { sequence_id: sequenceA } },
    });
    expect(rule.statusCode, rule.body).toBe(201);
    const record = (sequenceId: string) =>
      stack.sql.begin((tx) =>
        recordWorkspaceEvent(tx, {
          workspaceId: paid.workspaceId,
          type: 'sequence_contact.finished',
          payload: { sequence_id: sequenceId, sequence_contact_id: '00000000-0000-4000-8000-000000000001' },
        }),
      );
    const matching = await record(sequenceA);
    const other = await record('00000000-0000-4000-8000-00000000000b');
    const deliveriesOf = async (eventId: string) =>
      (
        await stack.sql<
          { n: number }[]
        >`select count(*)::int as n from notification_deliveries where event_id = ${eventId}`
      )[0]!.n;
    await waitFor(async () => ((await deliveriesOf(matching)) > 0 ? true : undefined), 'the matching delivery');
    await waitFor(
      async () =>
        (await stack.sql`select 1 from workspace_events where id = ${other} and dispatched_at is not null`).length
          ? true
          : undefined,
      'the other event dispatched',
    );
    expect(await deliveriesOf(other)).toBe(0);
  });

  it('refuse a rule without its channel, naming another workspace, and keep rules out of reach of other workspaces', async () => {
    for (const payload of [
      { event_type: 'reply.received', channel: 'team_chat' },
      { event_type: 'reply.received', channel: 'webhook' },
      { event_type: 'reply.received', channel: 'email', chat_channel_id: 'C1' },
      { event_type: 'no.such', channel: 'email' },
    ]) {
      const res = await stack.app.inject({
        method: 'POST',
        url: '/notifications/rules/',
        headers: withToken(paid.accessToken),
        payload,
      });
      expect(res.statusCode, JSON.stringify(payload) + res.body).toBe(422);
    }
    const foreign = await stack.app.inject({
      method: 'POST',
      url: '/webhooks/endpoints/',
      headers: withToken(free.accessToken),
      payload: { url: 'https://example.com/h' },
    });
    const named = await stack.app.inject({
      method: 'POST',
      url: '/notifications/rules/',
      headers: withToken(paid.accessToken),
      payload: { event_type: 'reply.received', channel: 'webhook', webhook_endpoint_id: foreign.json().id },
    });
    expect(named.statusCode).toBe(422);

    const rule = (
      await stack.app.inject({
        method: 'POST',
        url: '/notifications/rules/',
        headers: withToken(paid.accessToken),
        payload: { event_type: 'credits.low', channel: 'team_chat', chat_channel_id: 'C0ALERTS' },
      })
    ).json();
    for (const method of ['GET', 'PATCH', 'DELETE'] as const) {
      const res = await stack.app.inject({
        method,
        url: `/notifications/rules/${rule.id}/`,
        headers: withToken(free.accessToken),
        ...(method === 'PATCH' ? { payload: { enabled: false } } : {}),
      });
      expect(res.statusCode, method).toBe(404);
    }
  });
});
