import { describe, expect, it } from 'vitest';
import { setPausedEverywhere } from '../../store/pnet/agent-sending.js';
import { connectedAccount } from '../support/pnet.js';
import { useTestStack, withKey, withToken } from '../support/test-stack.js';

const { stack, paid } = useTestStack();

const patch = (headers: Record<string, string>, payload: object) =>
  stack.app.inject({ method: 'PATCH', url: '/pnet/agent-sending/', headers, payload });

describe('the agent sending switch', () => {
  it('lets a member pause, only an admin unpause, and keeps every change with its reason', async () => {
    const ws = await stack.createWorkspace('paid');
    const read = async () =>
      (await stack.app.inject({ method: 'GET', url: '/pnet/agent-sending/', headers: withKey(ws.apiKey) })).json();
    expect(await read()).toEqual({ paused: false, paused_everywhere: false, changed_by: null, changed_at: null });
    const member = await stack.addMember(ws.workspaceId, 'member');
    const paused = await patch(withToken(member.accessToken), {
      paused: true,
      reason: 'Checking replies by hand today',
    });
    expect(paused.statusCode).toBe(200);
    expect(paused.json()).toMatchObject({ paused: true, changed_by: member.userId });
    const refused = await patch(withToken(member.accessToken), { paused: false });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().detail).toMatch(/admin/);
    expect((await read()).paused).toBe(true);
    expect((await patch(withToken(ws.accessToken), { paused: false, reason: 'r'.repeat(500) })).json()).toMatchObject({
      paused: false,
      changed_by: ws.userId,
    });
    expect((await patch(withToken(ws.accessToken), { paused: true, reason: 'r'.repeat(501) })).statusCode).toBe(422);
    const history = (
      await stack.app.inject({ method: 'GET', url: '/pnet/agent-sending/history/', headers: withKey(ws.apiKey) })
    ).json().changes;
    expect(history.map((c: { paused: boolean; reason: string | null }) => [c.paused, c.reason?.slice(0, 8)])).toEqual([
      [false, 'rrrrrrrr'],
      [true, 'Checking'],
    ]);
  });

  it('stops metered steps from reaching a browser while paused here or everywhere; test steps still run', async () => {
    const a = await connectedAccount(stack, paid);
    const { agent, browserId } = a;
    const heartbeat = () => a.heartbeat();
    const queue = (extra: object) => a.queue({ kind: 'check_inbox' }, extra);
    await queue({});

    await patch(withToken(paid.accessToken), { paused: true, reason: 'hold on' });
    expect((await agent('/pnet/agent/claim/', { browser_id: browserId })).json()).toMatchObject({
      step: null,
      reason: 'paused',
    });
    expect((await heartbeat()).json()).toMatchObject({ run_mode: 'manual', wait: { reason: 'paused' } });
    const test = await queue({ test: true });
    expect((await agent('/pnet/agent/claim/', { browser_id: browserId })).json().step.id).toBe(test.id);
    await agent(`/pnet/agent/actions/${test.id}/result/`, { status: 'succeeded' });

    await patch(withToken(paid.accessToken), { paused: false });
    await setPausedEverywhere(stack.sql, true);
    try {
      const read = await stack.app.inject({
        method: 'GET',
        url: '/pnet/agent-sending/',
        headers: withKey(paid.apiKey),
      });
      expect(read.json()).toMatchObject({ paused: false, paused_everywhere: true });
      expect((await agent('/pnet/agent/claim/', { browser_id: browserId })).json()).toMatchObject({
        step: null,
        reason: 'paused',
      });
    } finally {
      await setPausedEverywhere(stack.sql, false);
    }
    expect((await agent('/pnet/agent/claim/', { browser_id: browserId })).json().step).toMatchObject({
      kind: 'check_inbox',
      status: 'claimed',
    });
  });
});
