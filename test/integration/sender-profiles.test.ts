import { describe, expect, it } from 'vitest';
import { hashConnectionToken } from '../../store/pnet/accounts.js';
import { defaultLimits, limitMaximums } from '../../domain/pnet/limits.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid } = useTestStack();

async function createProfile(name: string, timezone?: string) {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/sender-profiles/',
    headers: withKey(paid.apiKey),
    payload: { name, timezone },
  });
  expect(res.statusCode).toBe(201);
  return res.json<{ id: string; name: string; timezone: string }>();
}

const settingsUrl = (id: string) => `/sender-profiles/${id}/pnet/settings/`;
const patchSettings = (id: string, payload: object) =>
  stack.app.inject({ method: 'PATCH', url: settingsUrl(id), headers: withKey(paid.apiKey), payload });

describe('sender profiles', () => {
  it('creates, lists and reads profiles; a duplicate name is 409', async () => {
    const profile = await createProfile('Ada Sales', 'Europe/Berlin');
    expect(profile).toMatchObject({ name: 'Ada Sales', timezone: 'Europe/Berlin' });
    const again = await stack.app.inject({
      method: 'POST',
      url: '/sender-profiles/',
      headers: withKey(paid.apiKey),
      payload: { name: 'Ada Sales' },
    });
    expect(again.statusCode).toBe(409);
    const list = (
      await stack.app.inject({ method: 'GET', url: '/sender-profiles/', headers: withKey(paid.apiKey) })
    ).json();
    expect(list.sender_profiles.map((p: { id: string }) => p.id)).toContain(profile.id);
    expect(
      (
        await stack.app.inject({ method: 'GET', url: `/sender-profiles/${profile.id}/`, headers: withKey(paid.apiKey) })
      ).json(),
    ).toEqual(profile);
    const badZone = await stack.app.inject({
      method: 'POST',
      url: '/sender-profiles/',
      headers: withKey(paid.apiKey),
      payload: { name: 'X', timezone: 'Mars/Base' },
    });
    expect(badZone.statusCode).toBe(422);
    expect(badZone.json().issues[0].loc).toEqual(['body', 'timezone']);
  });
});

describe('readSenderPnetAccount: the pnet account wrapper', () => {
  it('answers a not-connected account as a normal state: pending, waiting on a browser, with a stable connection token', async () => {
    const profile = await createProfile('Not yet connected');
    const read = async () =>
      (
        await stack.app.inject({
          method: 'GET',
          url: `/sender-profiles/${profile.id}/pnet/`,
          headers: withKey(paid.apiKey),
        })
      ).json();
    const first = await read();
    expect(first).toMatchObject({ connected: false, connection_token: expect.stringMatching(/^opc_[\w-]{43}$/) });
    expect(first.account).toMatchObject({
      sender_profile_id: profile.id,
      status: 'pending',
      presence: 'offline',
      online: false,
      last_seen_at: null,
      sessions: [],
      queued_count: 0,
      connection_token: first.connection_token,
      wait: null,
      daily_limit_connection_request: 20,
    });
    // Work queued before any browser connects shows, and says what it waits on.
    const queued = await stack.app.inject({
      method: 'POST',
      url: '/pnet/steps/',
      headers: withKey(paid.apiKey),
      payload: { account_id: first.account.id, params: { kind: 'check_inbox' }, test: true },
    });
    expect(queued.statusCode).toBe(201);
    expect((await read()).account).toMatchObject({
      status: 'pending',
      queued_count: 1,
      wait: { reason: 'not_connected', next_at: null },
    });
    // The same token on every read, so a second browser can use it; only its hash is stored.
    expect((await read()).connection_token).toBe(first.connection_token);
    const [row] =
      await stack.sql`select connection_token_hash from pnet_accounts where sender_profile_id = ${profile.id}`;
    expect(Buffer.compare(row!.connection_token_hash, hashConnectionToken(first.connection_token))).toBe(0);
  });

  it('answers the live account once a browser has connected, with usage against each ceiling', async () => {
    const profile = await createProfile('Connected', 'America/New_York');
    const [account] = await stack.sql<{ id: string }[]>`
      update pnet_accounts set status = 'connected', connected_at = now() - interval '30 days', display_name = 'Ada L.',
        last_seen_at = now()
      where sender_profile_id = ${profile.id} returning id`;
    await stack.sql`insert into pnet_sessions (account_id, browser_id, browser_label, extension_version) values (${account!.id}, gen_random_uuid(), 'Chrome on Mac', '1.4.0')`;
    await stack.sql`
      insert into pnet_usage (account_id, local_date, limit_kind, used)
      values (${account!.id}, (now() at time zone 'America/New_York')::date, 'connection_request', 3)`;
    const res = await stack.app.inject({
      method: 'GET',
      url: `/sender-profiles/${profile.id}/pnet/`,
      headers: withKey(paid.apiKey),
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.connected).toBe(true);
    expect(body.account).toMatchObject({
      id: account!.id,
      sender_profile_id: profile.id,
      display_name: 'Ada L.',
      status: 'connected',
      presence: 'active',
      online: true,
      run_mode: 'manual',
      connection_token: body.connection_token,
      daily_limit_connection_request: 20,
      weekly_connection_request_cap: 100,
      limit_maximums: limitMaximums,
      sessions: [{ browser_label: 'Chrome on Mac', extension_version: '1.4.0', presence: 'active' }],
    });
    expect(body.account.usage.find((u: { kind: string }) => u.kind === 'connection_request')).toEqual({
      kind: 'connection_request',
      used_today: 3,
      daily_limit: 20,
      used_this_week: 3,
      weekly_limit: 100,
    });
    expect(Date.parse(body.account.usage_resets_at)).toBeGreaterThan(Date.now());
    expect(body.account).toMatchObject({ queued_count: 0, approvals_waiting: 0, wait: null });

    // Queued work shows on the account: manual mode puts this step on the Tasks page.
    await stack.app.inject({
      method: 'POST',
      url: '/pnet/steps/',
      headers: withKey(paid.apiKey),
      payload: { account_id: account!.id, params: { kind: 'check_inbox' } },
    });
    await stack.app.inject({
      method: 'POST',
      url: '/pnet/steps/',
      headers: withKey(paid.apiKey),
      payload: { account_id: account!.id, params: { kind: 'check_inbox' }, test: true },
    });
    const live = (
      await stack.app.inject({
        method: 'GET',
        url: `/sender-profiles/${profile.id}/pnet/`,
        headers: withKey(paid.apiKey),
      })
    ).json();
    expect(live.account).toMatchObject({ queued_count: 1, approvals_waiting: 1, wait: { reason: 'ready' } });
  });

  it('ramps a newly connected account to a quarter of its ceilings', async () => {
    const profile = await createProfile('Fresh account');
    await stack.sql`update pnet_accounts set status = 'connected', connected_at = now() where sender_profile_id = ${profile.id}`;
    const body = (
      await stack.app.inject({
        method: 'GET',
        url: `/sender-profiles/${profile.id}/pnet/`,
        headers: withKey(paid.apiKey),
      })
    ).json();
    expect(body.account.usage.find((u: { kind: string }) => u.kind === 'connection_request')).toMatchObject({
      daily_limit: 5,
      weekly_limit: 25,
    });
    expect(body.account.presence).toBe('offline');
  });
});

describe('pnet settings and limits', () => {
  it('starts from the safe defaults and reports the maximums', async () => {
    const profile = await createProfile('Defaults');
    const settings = (
      await stack.app.inject({ method: 'GET', url: settingsUrl(profile.id), headers: withKey(paid.apiKey) })
    ).json();
    expect(settings).toEqual({
      timezone: 'UTC',
      working_hours: { start: '09:00', end: '18:00', days: [1, 2, 3, 4, 5] },
      min_action_interval_seconds: 90,
      run_mode: 'manual',
      resume_enabled: false,
      attempts_enabled: false,
      limits: defaultLimits,
      limit_maximums: limitMaximums,
    });
  });

  it('accepts a limit at its maximum, refuses one past it with 422 and keeps what was there', async () => {
    const profile = await createProfile('Limits');
    const patch = (payload: object) => patchSettings(profile.id, payload);
    const atMax = await patch({ limits: { daily_limit_connection_request: 40, weekly_connection_request_cap: 200 } });
    expect(atMax.statusCode).toBe(200);
    expect(atMax.json().limits).toMatchObject({
      daily_limit_connection_request: 40,
      weekly_connection_request_cap: 200,
      daily_limit_send_message: 20,
    });
    const past = await patch({ limits: { daily_limit_connection_request: 41 } });
    expect(past.statusCode).toBe(422);
    expect(past.json().issues[0]).toMatchObject({ loc: ['body', 'limits.daily_limit_connection_request'], input: 41 });
    expect((await patch({ limits: { weekly_connection_request_cap: 201 } })).statusCode).toBe(422);
    expect((await patch({ limits: { daily_limit_send_message: -1 } })).statusCode).toBe(422);
    expect((await patch({ min_action_interval_seconds: 29 })).statusCode).toBe(422);
    expect((await patch({ min_action_interval_seconds: 3601 })).statusCode).toBe(422);
    expect((await patch({ timezone: 'Mars/Base' })).json().issues[0].loc).toEqual(['body', 'timezone']);
    expect((await patch({ working_hours: { start: '09:00', end: '18:00', days: [8] } })).statusCode).toBe(422);
    const now = (
      await stack.app.inject({ method: 'GET', url: settingsUrl(profile.id), headers: withKey(paid.apiKey) })
    ).json();
    expect(now.limits.daily_limit_connection_request).toBe(40);
    expect(now.min_action_interval_seconds).toBe(90);
    expect(now.timezone).toBe('UTC');
  });

  it('accepts the low ends: a limit of 0 (that kind never runs), the longest gap, a day ending 23:59', async () => {
    const profile = await createProfile('Edges');
    const res = await patchSettings(profile.id, {
      limits: { daily_limit_like_post: 0 },
      min_action_interval_seconds: 3600,
      working_hours: { start: '00:00', end: '23:59', days: [7] },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      limits: { daily_limit_like_post: 0 },
      min_action_interval_seconds: 3600,
      working_hours: { end: '23:59', days: [7] },
    });
  });

  it('takes a time zone link such as Asia/Kolkata and resets usage at its midnight', async () => {
    const profile = await createProfile('Kolkata', 'Asia/Kolkata');
    expect(profile.timezone).toBe('Asia/Kolkata');
    await stack.sql`update pnet_accounts set status = 'connected', connected_at = now() where sender_profile_id = ${profile.id}`;
    const wrapper = (
      await stack.app.inject({
        method: 'GET',
        url: `/sender-profiles/${profile.id}/pnet/`,
        headers: withKey(paid.apiKey),
      })
    ).json();
    // 00:00 in Kolkata is 18:30 UTC.
    expect(wrapper.account.usage_resets_at).toMatch(/T18:30:00\.000Z$/);
  });

  it('changes time zone, working hours, pacing and run mode, each field left out keeping its value', async () => {
    const profile = await createProfile('Settings');
    const res = await patchSettings(profile.id, {
      timezone: 'Asia/Tokyo',
      working_hours: { start: '22:00', end: '06:00', days: [5, 1, 1] },
      min_action_interval_seconds: 30,
      run_mode: 'automatic',
    });
    expect(res.json()).toMatchObject({
      timezone: 'Asia/Tokyo',
      working_hours: { start: '22:00', end: '06:00', days: [1, 5] },
      min_action_interval_seconds: 30,
      run_mode: 'automatic',
      limits: defaultLimits,
    });
    const after = await patchSettings(profile.id, {});
    expect(after.json()).toMatchObject({
      timezone: 'Asia/Tokyo',
      run_mode: 'automatic',
      min_action_interval_seconds: 30,
    });
  });
});
