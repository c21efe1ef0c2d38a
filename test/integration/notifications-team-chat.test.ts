/**
 * The team-chat connection (decision 039) against the local Slack-shaped twin: install with state
 * and PKCE, the bot token sealed at rest, channels listed, events posted with blocks, its errors
 * handled (ratelimited with Retry-After, channel_not_found, not_in_channel, token_revoked), and a
 * disconnect that answers {detail, count} and keeps every rule's channel, deliveries meanwhile
 * recorded skipped, a reconnect routing again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTeamChatClient } from '../../integrations/team-chat/client.js';
import { startTeamChatSim, type TeamChatSim } from '../../sim/team-chat-server.js';
import type { EventDispatcher } from '../../services/notifications/dispatcher.js';
import { recordWorkspaceEvent } from '../../store/notifications/outbox.js';
import { startTestDispatcher, waitFor } from '../support/notifications.js';
import { useTestStack, withToken } from '../support/test-stack.js';

const { stack, paid, free } = useTestStack();
let sim: TeamChatSim;
let dispatcher: EventDispatcher;

beforeAll(async () => {
  sim = await startTeamChatSim();
  stack.integrations.notifications.teamChat = createTeamChatClient({
    clientId: sim.clientId,
    clientSecret: sim.clientSecret,
    authUrl: sim.authUrl,
    apiUrl: sim.apiUrl,
    redirectUrl: 'http://localhost/notifications/chatapp/callback/',
    scopes: ['chat:write', 'channels:read'],
  });
  dispatcher = startTestDispatcher(stack);
});
afterAll(async () => {
  await dispatcher?.stop();
  await sim?.close();
});

async function connect(token: string) {
  const started = await stack.app.inject({
    method: 'POST',
    url: '/notifications/chatapp/connect/',
    headers: withToken(token),
  });
  expect(started.statusCode, started.body).toBe(200);
  const back = await sim.consent(started.json().authorize_url);
  const callback = await stack.app.inject({ method: 'GET', url: `/notifications/chatapp/callback/${back.search}` });
  expect(callback.statusCode, callback.body).toBe(200);
  return { callback: callback.json(), back };
}

const creditsLow = () =>
  stack.sql.begin((tx) =>
    recordWorkspaceEvent(tx, {
      workspaceId: paid.workspaceId,
      type: 'credits.low',
      payload: { balance: 3, threshold: 50 },
    }),
  );
const deliveryOf = (eventId: string) =>
  waitFor(async () => {
    const [d] = await stack.sql<{ status: string; last_error: string | null; attempt_count: number }[]>`
      select status, last_error, attempt_count from notification_deliveries where event_id = ${eventId} and channel = 'team_chat' and status <> 'pending'`;
    return d;
  }, 'the delivery to settle');

describe('the team-chat connection', () => {
  it('installs with state and PKCE, keeps the token sealed, lists channels and posts an event with blocks', async () => {
    const { callback, back } = await connect(paid.accessToken);
    expect(callback).toMatchObject({ connected: true, team_name: 'Local Team', rules: 0 });
    // The state is used once.
    const replayed = await stack.app.inject({ method: 'GET', url: `/notifications/chatapp/callback/${back.search}` });
    expect(replayed.statusCode).toBe(422);
    const [row] = await stack.sql<
      { bot_token_sealed: string }[]
    >`select bot_token_sealed from team_chat_connections where workspace_id = ${paid.workspaceId}`;
    for (const token of sim.issued) expect(row!.bot_token_sealed).not.toContain(token);
    const state = await stack.app.inject({
      method: 'GET',
      url: '/notifications/chatapp/',
      headers: withToken(paid.accessToken),
    });
    expect(state.json()).toMatchObject({ connected: true, status: 'connected' });
    for (const token of sim.issued) expect(state.body).not.toContain(token);

    const channels = await stack.app.inject({
      method: 'GET',
      url: '/notifications/chatapp/channels/',
      headers: withToken(paid.accessToken),
    });
    expect(channels.json().channels.map((c: { id: string }) => c.id)).toEqual([
      'C0GENERAL',
      'C0ALERTS',
      'C0QUIET',
      'G0PRIVATE',
    ]);

    const rule = await stack.app.inject({
      method: 'POST',
      url: '/notifications/rules/',
      headers: withToken(paid.accessToken),
      payload: {
        event_type: 'credits.low',
        channel: 'team_chat',
        chat_channel_id: 'C0ALERTS',
        chat_channel_name: 'alerts',
      },
    });
    expect(rule.statusCode, rule.body).toBe(201);
    const eventId = await creditsLow();
    expect(await deliveryOf(eventId)).toMatchObject({ status: 'succeeded', attempt_count: 1 });
    const post = sim.posts.find((p) => p.text.includes('Credits are running low'))!;
    expect(post.channel).toBe('C0ALERTS');
    expect(post.blocks).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ type: 'header' }),
        expect.objectContaining({ type: 'section' }),
      ]),
    );
  });

  it('waits out ratelimited with its Retry-After, and gives up on not_in_channel and channel_not_found with the reason', async () => {
    sim.rateLimitNext(1, 1);
    const limited = await creditsLow();
    expect(await deliveryOf(limited)).toMatchObject({ status: 'succeeded', attempt_count: 2 });
    const [first] = await stack.sql<{ outcome: string; response_excerpt: string; status_code: number }[]>`
      select a.outcome, a.response_excerpt, a.status_code from notification_delivery_attempts a join notification_deliveries d on d.id = a.delivery_id
      where d.event_id = ${limited} and a.attempt = 1`;
    expect(first).toEqual({ outcome: 'failed', response_excerpt: 'ratelimited', status_code: 429 });

    await stack.sql`update notification_rules set chat_channel_id = 'C0QUIET' where workspace_id = ${paid.workspaceId} and channel = 'team_chat'`;
    const quiet = await deliveryOf(await creditsLow());
    expect(quiet).toMatchObject({ status: 'failed', attempt_count: 1 });
    expect(quiet.last_error).toMatch(/not_in_channel.*Invite the app/);
    await stack.sql`update notification_rules set chat_channel_id = 'C0GONE' where workspace_id = ${paid.workspaceId} and channel = 'team_chat'`;
    expect((await deliveryOf(await creditsLow())).last_error).toMatch(/channel_not_found/);
    await stack.sql`update notification_rules set chat_channel_id = 'C0ALERTS' where workspace_id = ${paid.workspaceId} and channel = 'team_chat'`;
  });

  it('marks a revoked token for reconnecting and records deliveries skipped, never failed', async () => {
    sim.revokeTokens();
    const revoked = await deliveryOf(await creditsLow());
    expect(revoked.status).toBe('skipped');
    expect(revoked.last_error).toMatch(/reconnecting.*token_revoked/);
    const state = (
      await stack.app.inject({ method: 'GET', url: '/notifications/chatapp/', headers: withToken(paid.accessToken) })
    ).json();
    expect(state).toMatchObject({ connected: true, status: 'reconnect_required' });
    expect(
      (
        await stack.app.inject({
          method: 'GET',
          url: '/notifications/chatapp/channels/',
          headers: withToken(paid.accessToken),
        })
      ).statusCode,
    ).toBe(409);
  });

  it('disconnects with {detail, count}, keeps the rule and its channel, records deliveries skipped meanwhile, and routes again after a reconnect', async () => {
    const disconnected = await stack.app.inject({
      method: 'DELETE',
      url: '/notifications/chatapp/',
      headers: withToken(paid.accessToken),
    });
    expect(disconnected.statusCode).toBe(200);
    expect(disconnected.json()).toEqual({
      detail: 'The team chat is disconnected; 1 rule keeps its channel for a reconnect.',
      count: 1,
    });
    const rules = (
      await stack.app.inject({ method: 'GET', url: '/notifications/rules/', headers: withToken(paid.accessToken) })
    ).json().rules;
    expect(rules).toEqual([
      expect.objectContaining({ channel: 'team_chat', chat_channel_id: 'C0ALERTS', chat_channel_name: 'alerts' }),
    ]);
    const meanwhile = await deliveryOf(await creditsLow());
    expect(meanwhile).toMatchObject({ status: 'skipped', attempt_count: 1 });
    expect(meanwhile.last_error).toMatch(/disconnected/);

    const { callback } = await connect(paid.accessToken);
    expect(callback.rules).toBe(1);
    const posted = sim.posts.length;
    expect(await deliveryOf(await creditsLow())).toMatchObject({ status: 'succeeded' });
    expect(sim.posts.length).toBe(posted + 1);
    expect(sim.posts[sim.posts.length - 1]!.channel).toBe('C0ALERTS');

    // Nothing connected: the same shape, count 0 for a workspace without team-chat rules; only an admin may disconnect.
    const none = await stack.app.inject({
      method: 'DELETE',
      url: '/notifications/chatapp/',
      headers: withToken(free.accessToken),
    });
    expect(none.json()).toEqual({
      detail: 'No team chat was connected; 0 rules keep their channels for a reconnect.',
      count: 0,
    });
    const member = await stack.addMember(paid.workspaceId, 'member');
    expect(
      (
        await stack.app.inject({
          method: 'DELETE',
          url: '/notifications/chatapp/',
          headers: withToken(member.accessToken),
        })
      ).statusCode,
    ).toBe(403);
  });
});
