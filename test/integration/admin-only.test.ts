/**
 * The admin-only check every operation gets for free: every operation whose `x-admin-only` is set
 * in the OpenAPI document (api/plugins/openapi.ts) is called as a member, with the member's bearer
 * token and with a write API key the member created, and must answer 403 with the one detail of
 * domain/platform/roles.ts and change nothing. `true` operations are refused by auth.ts before
 * validation, so any well-formed path does; a conditional one (`x-admin-only: "<condition>"`, its
 * handler calling `requireAdmin`) needs a request that meets its condition, supplied below: an
 * operation without one fails the test, so a new admin-only route cannot slip past it.
 */
import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { adminOnlyDetail } from '../../domain/platform/roles.js';
import { createApiKey } from '../../store/platform/api-keys.js';
import { connectAppInProcess } from '../support/connected-apps.js';
import { useTestStack, withKey, withToken } from '../support/test-stack.js';

const { stack, paid } = useTestStack();

interface AdminOnlyOperation {
  method: string;
  path: string;
  operationId: string;
  adminOnly: true | string;
}

async function adminOnlyOperations(): Promise<AdminOnlyOperation[]> {
  const doc = (await stack.app.inject({ method: 'GET', url: '/openapi.json' })).json<{
    paths: Record<string, Record<string, { operationId: string; 'x-admin-only'?: true | string }>>;
  }>();
  return Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods).flatMap(([method, op]) =>
      op['x-admin-only'] === undefined
        ? []
        : [{ method: method.toUpperCase(), path, operationId: op.operationId, adminOnly: op['x-admin-only'] }],
    ),
  );
}

/** The admin-only operations docs/api.md lists (Authentication): one losing its marker fails here. */
const expectedAlways = [
  'applyDesignPartner',
  'cancelDowngrade',
  'connectCloudDrive',
  'connectTeamChat',
  'createApiKey',
  'createCrmConnection',
  'createWebhookEndpoint',
  'deleteApiKey',
  'deleteCrmConnection',
  'deleteWebhookEndpoint',
  'disconnectCloudDrive',
  'disconnectTeamChat',
  'enrollAffiliate',
  'listMemberAudit',
  'openBillingPortal',
  'removeMember',
  'replayWebhookMessages',
  'rotateInboxWebhookSecret',
  'rotateWebhookSecret',
  'scheduleDowngrade',
  'startCheckout',
  'updateAffiliatePayoutSettings',
  'updateApiKey',
  'updateInboxSettings',
  'updateMemberRole',
  'updateWebhookEndpoint',
];
const expectedConditional = {
  updateAgentSending: 'when unpausing',
  revokeConnectedApp: "when the app is another member's",
};
/** What every member needs, and stays open (reads of non-secret lists, their own settings). */
const openToMembers = [
  'listApiKeys',
  'listConnectedApps',
  'listWebhookAttempts',
  'listWebhookEndpoints',
  'readAgentSending',
  'readBilling',
  'readCreditBalance',
  'readWebhookEndpoint',
  'createNotificationRule',
  'updateNotificationPreferences',
];

/** An AI app connected by the holder of `token` (the consent flow of decision 040), and its id. */
async function connectApp(token: string, name: string): Promise<string> {
  await connectAppInProcess(stack.app, { token, workspaceId: paid.workspaceId, name });
  const apps = (
    await stack.app.inject({ method: 'GET', url: '/connected-apps/', headers: withKey(paid.apiKey) })
  ).json().data as { id: string; app_name: string }[];
  return apps.find((a) => a.app_name === name)!.id;
}

it('refuses a member every admin-only operation with 403 and the one detail, and changes nothing', async () => {
  const admin = withKey(paid.apiKey);
  const call = (method: string, url: string, headers: Record<string, string>, payload: object = {}) =>
    stack.app.inject({
      method: method as 'GET',
      url,
      headers,
      ...(['POST', 'PUT', 'PATCH'].includes(method) ? { payload } : {}),
    });
  const read = async (url: string) => {
    const res = await call('GET', url, admin);
    return { status: res.statusCode, body: res.json<unknown>() };
  };

  // The member, signed in and through a write key of their own. Creating keys is an admin's, so
  // the key is written as the route would have for them: it acts with its creator's role (findLiveKey).
  const member = await stack.addMember(paid.workspaceId, 'member');
  const [memberRow] = await stack.sql<{ id: string }[]>`
    select id from members where workspace_id = ${paid.workspaceId} and idp_user_id = ${member.userId}`;
  const memberKey = await createApiKey(stack.sql, {
    workspaceId: paid.workspaceId,
    createdBy: memberRow!.id,
    name: 'member write key',
    scope: 'write',
    expireAt: null,
  });
  const asMember = {
    'member bearer token': withToken(member.accessToken),
    "member's write API key": withKey(memberKey.key),
  };
  // Both credentials work for what a member may do (a pause is anyone's), so a 403 below is the role's.
  for (const headers of Object.values(asMember)) {
    const paused = await call('PATCH', '/pnet/agent-sending/', headers, { paused: true, reason: 'by a member' });
    expect(paused.statusCode, paused.body).toBe(200);
  }

  // The admin's resources the operations would change.
  const [adminMember] = await stack.sql<{ id: string }[]>`
    select id from members where workspace_id = ${paid.workspaceId} and idp_user_id = ${paid.userId}`;
  const adminKeys = ((await read('/api-keys/')).body as { api_keys: { id: string }[] }).api_keys;
  const ownKey = adminKeys.find((k) => k.id !== memberKey.id)!;
  // Disabled, so no event of this test is ever sent out to the address.
  const endpointCreated = await call('POST', '/webhooks/endpoints/', admin, {
    url: 'https://93.184.215.14/admin-only-hook',
    enabled: false,
  });
  expect(endpointCreated.statusCode, endpointCreated.body).toBe(201);
  const endpoint = endpointCreated.json<{ id: string }>();
  const [crmConnection] = await stack.sql<{ id: string }[]>`
    insert into crm_connections (workspace_id, name, auth_kind, token_sealed)
    values (${paid.workspaceId}, 'Admin CRM', 'private_app', 's1.x.y.z.w') returning id`;
  const adminApp = await connectApp(paid.accessToken, 'Admin app');
  const memberApp = await connectApp(member.accessToken, 'Member app');

  const ids: Record<string, string> = {
    key_id: ownKey.id,
    member_id: adminMember!.id,
    endpoint_id: endpoint.id,
    connection_id: crmConnection!.id,
    app_id: adminApp,
  };
  // Bodies valid enough to pass validation, for operations whose check is in the handler, and for
  // the rest so a refusal cannot be a 422 if a check ever moves past validation.
  const bodies: Record<string, object> = {
    createApiKey: { name: 'by a member' },
    updateApiKey: { name: 'renamed by a member' },
    updateMemberRole: { role: 'member' },
    startCheckout: { purchase: 'plan' },
    applyDesignPartner: { company_website: 'https://example.com', use_case: 'Outreach', team_size: 5 },
    enrollAffiliate: { display_name: 'Member affiliate' },
    updateAffiliatePayoutSettings: { payout_email: 'member@example.com' },
    createWebhookEndpoint: { url: 'https://93.184.215.14/member-hook', enabled: false },
    updateWebhookEndpoint: { url: 'https://93.184.215.14/stolen', enabled: false },
    rotateWebhookSecret: {},
    replayWebhookMessages: { since: '2020-01-01T00:00:00Z' },
    createCrmConnection: { name: 'Member CRM', access_token: 'pat-member-token' },
  };
  // The request that meets each conditional operation's condition, by operationId.
  const conditional: Record<string, { ids?: Record<string, string>; body?: object }> = {
    updateAgentSending: { body: { paused: false, reason: 'a member resuming' } },
    revokeConnectedApp: { ids: { app_id: adminApp } },
  };

  const snapshot = async () => ({
    apiKeys: (
      (await read('/api-keys/')).body as { api_keys: { id: string; name: string; expire_at: unknown }[] }
    ).api_keys.map(({ id, name, expire_at }) => ({ id, name, expire_at })),
    members: (await read('/workspace/members/')).body,
    audit: (await read('/workspace/audit/')).body,
    endpoints: (await read('/webhooks/endpoints/')).body,
    crm: (await read('/integrations/crm/connections/')).body,
    apps: ((await read('/connected-apps/')).body as { data: { id: string }[] }).data.map((a) => a.id).sort(),
    agentSending: (await read('/pnet/agent-sending/')).body,
    billing: (await read('/billing/')).body,
    designPartner: (await read('/design-partner/')).body,
    affiliate: await read('/affiliate/'),
    payoutSettings: await read('/affiliate/payout-settings/'),
    cloudDrive: await read('/cloud-drive/'),
    teamChat: await read('/notifications/chatapp/'),
    inboxSettings: (await read('/inbox/settings/')).body,
    // A rotation shows in no read but the stored secrets.
    webhookSecrets: await stack.sql`
      select id, secret_sealed, previous_secret_sealed from webhook_endpoints where workspace_id = ${paid.workspaceId}`,
    events: (
      await stack.sql<
        { n: number }[]
      >`select count(*)::int as n from workspace_events where workspace_id = ${paid.workspaceId}`
    )[0]!.n,
  });
  const before = await snapshot();

  const operations = await adminOnlyOperations();
  expect(operations.length).toBeGreaterThan(0);
  expect(operations.filter((o) => o.adminOnly === true).map((o) => o.operationId)).toEqual(
    expect.arrayContaining(expectedAlways),
  );
  expect(
    Object.fromEntries(operations.filter((o) => o.adminOnly !== true).map((o) => [o.operationId, o.adminOnly])),
  ).toMatchObject(expectedConditional);
  const marked = new Set(operations.map((o) => o.operationId));
  expect(openToMembers.filter((id) => marked.has(id))).toEqual([]);

  for (const op of operations) {
    const request = op.adminOnly === true ? { ids: {}, body: bodies[op.operationId] } : conditional[op.operationId];
    if (!request)
      throw new Error(
        `${op.operationId} is admin-only "${op.adminOnly}": add a request meeting that condition to the admin-only test.`,
      );
    const url = op.path.replace(/\{(\w+)\}/g, (_, name: string) => {
      const id = request.ids?.[name] ?? ids[name];
      if (id) return id;
      if (op.adminOnly !== true)
        throw new Error(`No id for path parameter "${name}" of ${op.operationId}: add one to the admin-only test.`);
      // auth.ts refuses before validation: any well-formed path is enough.
      return randomUUID();
    });
    for (const [who, headers] of Object.entries(asMember)) {
      const res = await call(op.method, url, headers, request.body);
      expect({ op: op.operationId, who, status: res.statusCode, body: res.json() }).toEqual({
        op: op.operationId,
        who,
        status: 403,
        body: { detail: adminOnlyDetail },
      });
    }
  }

  expect(await snapshot()).toEqual(before);

  // Open to members: reading endpoints (never a secret) and disconnecting their own app.
  const endpointRead = await call('GET', `/webhooks/endpoints/${endpoint.id}/`, asMember['member bearer token']);
  expect(endpointRead.statusCode).toBe(200);
  expect(endpointRead.json()).not.toHaveProperty('secret');
  expect(
    (await call('GET', `/webhooks/endpoints/${endpoint.id}/attempts/`, asMember["member's write API key"])).statusCode,
  ).toBe(200);
  expect((await call('DELETE', `/connected-apps/${memberApp}/`, asMember["member's write API key"])).statusCode).toBe(
    204,
  );

  // The same requests as the admin pass the check (so the 403s above are the role's, not the request's).
  const asAdmin = withToken(paid.accessToken);
  const unpaused = await call('PATCH', '/pnet/agent-sending/', asAdmin, conditional.updateAgentSending!.body);
  expect(unpaused.statusCode, unpaused.body).toBe(200);
  expect(unpaused.json()).toMatchObject({ paused: false });
  expect((await call('DELETE', `/connected-apps/${adminApp}/`, asAdmin)).statusCode).toBe(204);
  const created = await call('POST', '/webhooks/endpoints/', asAdmin, bodies.createWebhookEndpoint);
  expect(created.statusCode, created.body).toBe(201);
  expect(created.json().secret).toMatch(/^whsec_/);
  const rotated = await call('POST', `/webhooks/endpoints/${endpoint.id}/rotate-secret/`, admin, {});
  expect(rotated.statusCode, rotated.body).toBe(200);
  expect((await call('PATCH', `/api-keys/${ownKey.id}/`, admin, bodies.updateApiKey)).statusCode).toBe(200);
});
