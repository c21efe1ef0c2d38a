/** A sender account driven as the browser extension drives it, for the pnet tests. */
import { randomUUID } from 'node:crypto';
import { withKey, withToken, type TestStack, type TestWorkspace } from './test-stack.js';

export const allWeek = { start: '00:00', end: '00:00', days: [1, 2, 3, 4, 5, 6, 7] };

/** A connected automatic account open all week, with one browser checked in and holding the lease. */
export async function connectedAccount(stack: TestStack, ws: TestWorkspace, settings: object = {}) {
  const headers = withKey(ws.apiKey);
  const profile = (await stack.app.inject({ method: 'POST', url: '/sender-profiles/', headers, payload: { name: `S ${randomUUID()}` } })).json();
  await stack.app.inject({
    method: 'PATCH',
    url: `/sender-profiles/${profile.id}/pnet/settings/`,
    headers,
    payload: { run_mode: 'automatic', working_hours: allWeek, ...settings },
  });
  const token = (await stack.app.inject({ method: 'GET', url: `/sender-profiles/${profile.id}/pnet/`, headers })).json().connection_token as string;
  const [account] = await stack.sql<{ id: string }[]>`select id from pnet_accounts where sender_profile_id = ${profile.id}`;
  const browserId = randomUUID();
  const agent = (path: string, payload: object) => stack.app.inject({ method: 'POST', url: path, headers: withToken(token), payload });
  const heartbeat = (body: object = {}) =>
    agent('/pnet/agent/heartbeat/', { browser_id: browserId, browser_label: 'Chrome', extension_version: '2.0.0', ...body });
  await heartbeat({ identity: { member_urn: `urn:li:member:${randomUUID()}` }, lease_nonce: 'lease-nonce-1' });
  const queue = async (params: object, extra: object = {}) =>
    (await stack.app.inject({ method: 'POST', url: '/pnet/steps/', headers, payload: { account_id: account!.id, params, ...extra } })).json();
  const claim = async (body: object = {}) => agent('/pnet/agent/claim/', { browser_id: browserId, ...body });
  const report = (stepId: string, body: object) => agent(`/pnet/agent/actions/${stepId}/result/`, body);
  return { accountId: account!.id, profileId: profile.id as string, token, browserId, agent, heartbeat, queue, claim, report };
}
