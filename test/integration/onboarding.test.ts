/** The onboarding checklist moving as a workspace sets itself up, and its dismissal per member. */
import { describe, expect, it } from 'vitest';
import { useTestStack, withKey, withToken } from '../support/test-stack.js';

const { stack } = useTestStack({ workspaces: false });

const doneKeys = (body: { steps: { key: string; done: boolean }[] }) =>
  body.steps.filter((s) => s.done).map((s) => s.key);

describe('onboarding checklist', () => {
  it('moves as the workspace sets itself up', async () => {
    const ws = await stack.createWorkspace('paid');
    const api = {
      get: () => stack.app.inject({ method: 'GET', url: '/onboarding/', headers: withKey(ws.apiKey) }),
      post: (url: string, payload: object) =>
        stack.app.inject({ method: 'POST', url, headers: withKey(ws.apiKey), payload }),
    };
    const fresh = await api.get();
    expect(fresh.statusCode).toBe(200);
    expect(fresh.json()).toMatchObject({ completed: 0, total: 7, complete: false, dismissed: false });

    const table = await api.post('/tables/', { name: 'Leads' });
    expect(table.statusCode).toBe(201);
    const afterTable = (await api.get()).json();
    expect(doneKeys(afterTable)).toEqual(['first_table']);
    expect(afterTable.steps.find((s: { key: string }) => s.key === 'first_table').done_at).toMatch(/^\d{4}-\d\d-\d\dT/);

    const column = await api.post(`/tables/${table.json().id}/columns/`, { name: 'Email', kind: 'input' });
    expect(column.statusCode, column.body).toBe(201);
    const sequence = await api.post('/sequences/', {
      name: 'First',
      audience_table_id: table.json().id,
      audience_mapping: { email_column_id: column.json().id },
    });
    expect(sequence.statusCode, sequence.body).toBe(201);
    expect(doneKeys((await api.get()).json())).toEqual(['first_table', 'first_sequence']);

    const key = await api.post('/api-keys/', { name: 'Zapier' });
    expect(key.statusCode).toBe(201);
    await stack.addMember(ws.workspaceId, 'member');
    expect(doneKeys((await api.get()).json())).toEqual([
      'first_table',
      'first_sequence',
      'api_key',
      'teammate_invited',
    ]);

    // A mailbox is a sender too; business context is a document row.
    await stack.sql`
      insert into inbox_mailboxes (workspace_id, address, host, port, secure, username, password_sealed, poll_seconds)
      values (${ws.workspaceId}, 'sales@acme.test', '127.0.0.1', 993, true, 'sales', 'not-a-real-sealed-value', 60)`;
    await stack.sql`
      insert into business_documents (workspace_id, title, filename, content_type, size_bytes)
      values (${ws.workspaceId}, 'Deck', 'deck.pdf', 'application/pdf', 10)`;
    const all = (await api.get()).json();
    expect(all).toMatchObject({ completed: 7, complete: true });
  });

  it('a pnet account connected counts as a sender', async () => {
    const ws = await stack.createWorkspace('paid');
    const profile = await stack.app.inject({
      method: 'POST',
      url: '/sender-profiles/',
      headers: withKey(ws.apiKey),
      payload: { name: 'Sam' },
    });
    expect(profile.statusCode, profile.body).toBe(201);
    const get = async () =>
      (await stack.app.inject({ method: 'GET', url: '/onboarding/', headers: withKey(ws.apiKey) })).json();
    expect(doneKeys(await get())).toEqual([]);
    await stack.sql`update pnet_accounts set status = 'connected', connected_at = now() where workspace_id = ${ws.workspaceId}`;
    expect(doneKeys(await get())).toEqual(['sender_connected']);

    // Derived, not stored: deleting the only table takes its step back.
    const table = (
      await stack.app.inject({
        method: 'POST',
        url: '/tables/',
        headers: withKey(ws.apiKey),
        payload: { name: 'Scratch' },
      })
    ).json();
    expect(doneKeys(await get())).toEqual(['sender_connected', 'first_table']);
    const removed = await stack.app.inject({
      method: 'DELETE',
      url: `/tables/${table.id}/`,
      headers: withKey(ws.apiKey),
    });
    expect(removed.statusCode).toBe(204);
    expect(doneKeys(await get())).toEqual(['sender_connected']);
  });

  it('is dismissed and restored per member', async () => {
    const ws = await stack.createWorkspace('paid');
    const teammate = await stack.addMember(ws.workspaceId, 'member');
    const as = (token: string, method: 'GET' | 'POST', url: string) =>
      stack.app.inject({ method, url, headers: withToken(token) });

    const dismissed = await as(ws.accessToken, 'POST', '/onboarding/dismiss/');
    expect(dismissed.statusCode).toBe(200);
    expect(dismissed.json()).toMatchObject({ dismissed: true, dismissed_at: expect.any(String) });
    expect((await as(ws.accessToken, 'GET', '/onboarding/')).json().dismissed).toBe(true);
    // The teammate still sees it; the steps are the same for both.
    const theirs = (await as(teammate.accessToken, 'GET', '/onboarding/')).json();
    expect(theirs.dismissed).toBe(false);
    expect(theirs.steps).toEqual(dismissed.json().steps);

    // Dismissing twice keeps the first moment.
    const again = await as(ws.accessToken, 'POST', '/onboarding/dismiss/');
    expect(again.json().dismissed_at).toBe(dismissed.json().dismissed_at);

    const restored = await as(ws.accessToken, 'POST', '/onboarding/restore/');
    expect(restored.statusCode).toBe(200);
    expect(restored.json()).toMatchObject({ dismissed: false, dismissed_at: null });
    expect((await as(ws.accessToken, 'GET', '/onboarding/')).json().dismissed).toBe(false);
    // Restoring what was never dismissed is fine too.
    expect((await as(teammate.accessToken, 'POST', '/onboarding/restore/')).statusCode).toBe(200);

    // Another workspace's member sees only their own workspace's checklist and dismissal.
    const other = await stack.createWorkspace('paid');
    expect((await as(other.accessToken, 'GET', '/onboarding/')).json()).toMatchObject({
      dismissed: false,
      completed: 0,
    });
  });

  it("documents its operations and the cloud drive's as the OpenAPI checks expect", async () => {
    const doc = (await stack.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const ops = [
      ['/onboarding/', 'get', 'readOnboarding'],
      ['/onboarding/dismiss/', 'post', 'dismissOnboarding'],
      ['/onboarding/restore/', 'post', 'restoreOnboarding'],
      ['/cloud-drive/', 'get', 'readCloudDrive'],
      ['/cloud-drive/', 'delete', 'disconnectCloudDrive'],
      ['/cloud-drive/connect/', 'post', 'connectCloudDrive'],
      ['/cloud-drive/callback/', 'get', 'completeCloudDriveConnect'],
    ] as const;
    for (const [path, method, operationId] of ops) {
      const op = doc.paths[path]?.[method];
      expect(op?.operationId, `${method} ${path}`).toBe(operationId);
      expect(op.responses['500']).toBeDefined();
      expect(op.responses['503']).toBeDefined();
      const authenticated = op.security.every((s: object) => Object.keys(s).length > 0);
      expect(authenticated, `${method} ${path}`).toBe(path !== '/cloud-drive/callback/');
      if (authenticated) expect(JSON.stringify(op.responses['422']), `${method} ${path}`).toContain('ValidationBody');
    }
    // No response schema of the drive has a token field.
    expect(JSON.stringify(doc.paths['/cloud-drive/'])).not.toMatch(/access_token|refresh_token/);
  });
});
