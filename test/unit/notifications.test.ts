/** The pure rules of notifications: the fan-out of one event, the retry decision and a batch's retry rounds, the 5-day disable. */
import { describe, expect, it } from 'vitest';
import { planDeliveries, type PlanInput } from '../../domain/notifications/rules.js';
import {
  decideNext,
  disableAfterFailingMs,
  retryGroups,
  retryScheduleSeconds,
  shouldDisable,
} from '../../domain/notifications/webhooks.js';

const base = (over: Partial<PlanInput> = {}): PlanInput => ({
  event: { type: 'reply.received', payload: { sequence_contact_id: null } },
  rules: [],
  endpoints: [],
  members: ['m1', 'm2', 'm3'],
  preferences: new Map(),
  ...over,
});
const rule = (over: Partial<PlanInput['rules'][number]>) => ({
  id: 'r',
  event_type: 'reply.received',
  filters: {},
  channel: 'email' as const,
  member_ids: [],
  chat_channel_id: null,
  webhook_endpoint_id: null,
  enabled: true,
  ...over,
});

describe('planDeliveries', () => {
  it('sends each member once by their preference, never muting a critical type', () => {
    const preferences = new Map([
      ['m2', 'mute' as const],
      ['m3', 'digest' as const],
    ]);
    const plan = planDeliveries(
      base({ rules: [rule({ id: 'a' }), rule({ id: 'b', member_ids: ['m1'] })], preferences }),
    );
    expect(plan.map((d) => [d.channelKey, d.status])).toEqual([
      ['email:m1', 'pending'],
      ['email:m3', 'digest_pending'],
    ]);
    const critical = planDeliveries(
      base({
        event: { type: 'account.checkpoint', payload: {} },
        rules: [rule({ event_type: 'account.checkpoint' })],
        preferences,
      }),
    );
    expect(critical.map((d) => [d.channelKey, d.status])).toEqual([
      ['email:m1', 'pending'],
      ['email:m2', 'pending'],
      ['email:m3', 'pending'],
    ]);
  });

  it('sends to an endpoint once whether it subscribed or a rule names it, and not when disabled', () => {
    const endpoints = [
      { id: 'e1', event_types: ['reply.received'], enabled: true },
      { id: 'e2', event_types: ['credits.low'], enabled: true },
      { id: 'e3', event_types: [], enabled: false },
    ];
    const plan = planDeliveries(
      base({
        endpoints,
        rules: [
          rule({ channel: 'webhook', webhook_endpoint_id: 'e1' }),
          rule({ channel: 'webhook', webhook_endpoint_id: 'e2' }),
          rule({ channel: 'webhook', webhook_endpoint_id: 'e3' }),
        ],
      }),
    );
    expect(plan.map((d) => d.channelKey)).toEqual(['webhook:e1', 'webhook:e2']);
  });

  it('matches filters against the payload, and an event without the key does not match', () => {
    const filtered = rule({ channel: 'team_chat', chat_channel_id: 'C1', filters: { sequence_id: 's1' } });
    expect(
      planDeliveries(base({ event: { type: 'reply.received', payload: { sequence_id: 's1' } }, rules: [filtered] })),
    ).toHaveLength(1);
    expect(
      planDeliveries(base({ event: { type: 'reply.received', payload: { sequence_id: 's2' } }, rules: [filtered] })),
    ).toHaveLength(0);
    expect(planDeliveries(base({ rules: [filtered] }))).toHaveLength(0);
  });
});

describe('the retry decision', () => {
  it('waits the schedule, a longer Retry-After, and gives up after the eighth attempt or a permanent failure', () => {
    expect(retryScheduleSeconds).toEqual([0, 5, 300, 1800, 7200, 18000, 36000, 36000]);
    expect(decideNext({ kind: 'failed', statusCode: 500 }, 1)).toEqual({ kind: 'retry', afterSeconds: 5 });
    expect(decideNext({ kind: 'failed', statusCode: 429, retryAfterSeconds: 60 }, 1)).toEqual({
      kind: 'retry',
      afterSeconds: 60,
    });
    expect(decideNext({ kind: 'failed', statusCode: 429, retryAfterSeconds: 60 }, 3)).toEqual({
      kind: 'retry',
      afterSeconds: 1800,
    });
    expect(decideNext({ kind: 'failed', statusCode: 500 }, 7)).toEqual({ kind: 'retry', afterSeconds: 36000 });
    expect(decideNext({ kind: 'failed', statusCode: 500 }, 8)).toEqual({ kind: 'give_up' });
    expect(decideNext({ kind: 'failed', statusCode: null, permanent: true }, 1)).toEqual({ kind: 'give_up' });
    expect(decideNext({ kind: 'succeeded', statusCode: 204 }, 1)).toEqual({ kind: 'done' });
    expect(decideNext({ kind: 'skipped', reason: 'disconnected' }, 1)).toEqual({ kind: 'done' });
  });

  it("groups a batch's retries by their wait, shortest first, leaving out the settled, the permanent and the exhausted", () => {
    const failed = (id: string, extra: object = {}) => ({
      id,
      run: 1,
      result: { kind: 'failed' as const, statusCode: 503, ...extra },
    });
    const attempted = [
      failed('a'),
      { id: 'b', run: 1, result: { kind: 'succeeded' as const, statusCode: 200 } },
      failed('c', { retryAfterSeconds: 600 }),
      failed('d'),
      failed('e', { permanent: true }),
      { id: 'f', run: 2, result: { kind: 'skipped' as const, reason: 'The endpoint is disabled.' } },
      failed('g', { retryAfterSeconds: 3 }),
    ];
    expect(retryGroups(attempted, 1)).toEqual([
      {
        afterSeconds: 5,
        deliveries: [
          { id: 'a', run: 1 },
          { id: 'd', run: 1 },
          { id: 'g', run: 1 },
        ],
      },
      { afterSeconds: 600, deliveries: [{ id: 'c', run: 1 }] },
    ]);
    // After the second attempt the schedule says 5 minutes; a Retry-After of 600 s still wins.
    expect(retryGroups(attempted, 2)).toEqual([
      {
        afterSeconds: 300,
        deliveries: [
          { id: 'a', run: 1 },
          { id: 'd', run: 1 },
          { id: 'g', run: 1 },
        ],
      },
      { afterSeconds: 600, deliveries: [{ id: 'c', run: 1 }] },
    ]);
    expect(retryGroups(attempted, retryScheduleSeconds.length)).toEqual([]);
  });

  it('disables at exactly 5 days of failing, not a millisecond before', () => {
    const since = new Date('2026-01-01T00:00:00Z');
    expect(shouldDisable(since, new Date(since.getTime() + disableAfterFailingMs - 1))).toBe(false);
    expect(shouldDisable(since, new Date(since.getTime() + disableAfterFailingMs))).toBe(true);
    expect(shouldDisable(null, new Date())).toBe(false);
  });
});
