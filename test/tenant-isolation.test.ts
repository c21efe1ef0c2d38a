import { afterAll, beforeAll, expect, it } from 'vitest';
import { expectTenantIsolation } from './support/tenant-isolation.js';
import { startTestStack, withKey, type TestStack } from './support/test-stack.js';

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack();
});
afterAll(() => stack?.close());

it('answers 404 to every id-bearing route called with another workspace ids, and changes nothing', async () => {
  const owner = await stack.createWorkspace('paid');
  const intruder = await stack.createWorkspace('paid');
  const key = (await stack.app.inject({ method: 'POST', url: '/api-keys/', headers: withKey(owner.apiKey), payload: { name: 'owned' } })).json();
  const [member] = (await stack.app.inject({ method: 'GET', url: '/workspace/members/', headers: withKey(owner.apiKey) })).json().members;
  const profile = (
    await stack.app.inject({ method: 'POST', url: '/sender-profiles/', headers: withKey(owner.apiKey), payload: { name: 'Owned sender' } })
  ).json();

  const [account] = await stack.sql<{ id: string }[]>`select id from pnet_accounts where sender_profile_id = ${profile.id}`;
  const queueStep = (payload: object) =>
    stack.app.inject({ method: 'POST', url: '/pnet/steps/', headers: withKey(owner.apiKey), payload: { account_id: account!.id, ...payload } });
  const task = (await queueStep({ params: { kind: 'check_inbox' } })).json();
  const step = (await queueStep({ params: { kind: 'check_inbox' }, test: true })).json();
  const hold = (await stack.app.inject({ method: 'POST', url: '/pnet/holds/', headers: withKey(owner.apiKey), payload: { contact_key: 'c-1' } })).json();

  const ownerTables = (url: string, payload: object) =>
    stack.app.inject({ method: 'POST', url, headers: withKey(owner.apiKey), payload }).then((r) => r.json());
  const table = await ownerTables('/tables/', { name: 'Owned table' });
  const folder = await ownerTables('/table-folders/', { name: 'Owned folder' });
  const column = await ownerTables(`/tables/${table.id}/columns/`, { kind: 'input', name: 'Email' });
  const row = await ownerTables(`/tables/${table.id}/rows/`, { cells: { [column.id]: 'owned@example.com' } });
  const view = await ownerTables(`/tables/${table.id}/views/`, { name: 'Owned view' });
  const template = await ownerTables(`/tables/${table.id}/columns/${column.id}/template/`, { name: 'Owned template' });
  const enrichment = await ownerTables(`/tables/${table.id}/columns/`, {
    kind: 'enrichment', name: 'Shout', provider: 'formula', input_mappings: { email: column.id }, options: { formula: 'upper({email})' },
  });
  const run = await ownerTables(`/tables/${table.id}/columns/${enrichment.id}/runs/`, {});

  const intruderProfile = (
    await stack.app.inject({ method: 'POST', url: '/sender-profiles/', headers: withKey(intruder.apiKey), payload: { name: 'Intruder' } })
  ).json();
  const intruderToken = (
    await stack.app.inject({ method: 'GET', url: `/sender-profiles/${intruderProfile.id}/pnet/`, headers: withKey(intruder.apiKey) })
  ).json().connection_token;

  const checked = await expectTenantIsolation({
    app: stack.app,
    intruderHeaders: withKey(intruder.apiKey),
    intruderExtensionHeaders: { authorization: `Bearer ${intruderToken}` },
    ids: { key_id: key.id, member_id: member.id, profile_id: profile.id, step_id: step.id, task_id: task.id, action_id: step.id, hold_id: hold.id,
      table_id: table.id, folder_id: folder.id, column_id: column.id, row_id: row.id, view_id: view.id, template_id: template.id,
      run_id: run.id },
    bodies: { updateApiKey: { name: 'stolen' }, updatePnetSettings: { run_mode: 'automatic' }, reportStepResult: { status: 'succeeded' },
      releaseStepClaim: { claimed_at: new Date().toISOString(), reason: 'verified_absent' },
      grantStepCommit: { claimed_at: new Date().toISOString() },
      reportStepAttempt: { claimed_at: new Date().toISOString(), reason: 'cut_off' },
      reportRunningWait: { site: 'page', awake_seconds: 1 },
      createTableColumn: { kind: 'input', name: 'Stolen' },
      createTableColumnFromTemplate: { template_id: template.id },
      createTableRowsBulk: { rows: [{ cells: {} }] },
      updateTableRowsBulk: { rows: [{ id: row.id, cells: {} }] },
      deleteTableRowsBulk: { row_ids: [row.id] },
      createTableView: { name: 'Stolen' },
      saveColumnTemplate: { name: 'Stolen' },
      startColumnRun: {},
    },
  });
  expect(checked.map((o) => o.operationId).sort()).toEqual([
    'approveTask',
    'cancelColumnRun',
    'cancelStep',
    'createTableColumn',
    'createTableColumnFromTemplate',
    'createTableRow',
    'createTableRowsBulk',
    'createTableView',
    'deleteApiKey',
    'deleteColumnTemplate',
    'deleteTable',
    'deleteTableColumn',
    'deleteTableFolder',
    'deleteTableRow',
    'deleteTableRowsBulk',
    'deleteTableView',
    'disconnectSenderPnetAccount',
    'exportTableCsv',
    'grantStepCommit',
    'importTableCsv',
    'listColumnRuns',
    'listStepAttempts',
    'listTableColumns',
    'listTableRows',
    'listTableRuns',
    'listTableViews',
    'readApiKey',
    'readColumnRun',
    'readColumnTemplate',
    'readMember',
    'readPnetSettings',
    'readSenderPnetAccount',
    'readSenderProfile',
    'readStep',
    'readTable',
    'readTableColumn',
    'readTableFolder',
    'readTableRow',
    'readTableView',
    'recordTableView',
    'rejectTask',
    'releaseStepClaim',
    'releaseStepHold',
    'reportRunningWait',
    'reportStepAttempt',
    'reportStepResult',
    'restoreTable',
    'retryStep',
    'saveColumnTemplate',
    'startColumnRun',
    'streamTableEvents',
    'updateApiKey',
    'updateColumnTemplate',
    'updatePnetSettings',
    'updateTable',
    'updateTableColumn',
    'updateTableFolder',
    'updateTableRow',
    'updateTableRowsBulk',
    'updateTableView',
  ]);

  const after = await stack.app.inject({ method: 'GET', url: `/api-keys/${key.id}/`, headers: withKey(owner.apiKey) });
  expect(after.statusCode).toBe(200);
  expect(after.json().name).toBe('owned');
  expect((await stack.app.inject({ method: 'GET', url: '/workspace/', headers: withKey(key.key) })).statusCode).toBe(200);
  const settings = (await stack.app.inject({ method: 'GET', url: `/sender-profiles/${profile.id}/pnet/settings/`, headers: withKey(owner.apiKey) })).json();
  expect(settings.run_mode).toBe('manual');
  const tasks = (await stack.app.inject({ method: 'GET', url: '/pnet/tasks/', headers: withKey(owner.apiKey) })).json().tasks;
  expect(tasks.map((t: { id: string }) => t.id)).toEqual([task.id]);
  expect((await stack.app.inject({ method: 'GET', url: `/pnet/steps/${step.id}/`, headers: withKey(owner.apiKey) })).json().status).toBe('queued');
  expect((await stack.app.inject({ method: 'GET', url: '/pnet/holds/', headers: withKey(owner.apiKey) })).json().holds).toHaveLength(1);
  const ownerGet = (url: string) => stack.app.inject({ method: 'GET', url, headers: withKey(owner.apiKey) }).then((r) => r.json());
  expect(await ownerGet(`/tables/${table.id}/`)).toMatchObject({ name: 'Owned table', deleted_at: null, row_count: 1 });
  expect((await ownerGet(`/tables/${table.id}/columns/`)).columns.map((c: { name: string }) => c.name)).toEqual(['Email', 'Shout', 'Shout · result']);
  expect(await ownerGet(`/tables/${table.id}/runs/${run.id}/`)).toMatchObject({ id: run.id, cancel_requested_at: null });
  expect((await ownerGet(`/tables/${table.id}/rows/${row.id}/`)).cells).toEqual({ [column.id]: 'owned@example.com' });
  expect((await ownerGet(`/tables/${table.id}/views/`)).views.map((v: { name: string }) => v.name)).toEqual(['Owned view']);
  expect((await ownerGet('/column-templates/')).templates.map((t: { name: string }) => t.name)).toEqual(['Owned template']);
  expect(await ownerGet(`/table-folders/${folder.id}/`)).toMatchObject({ name: 'Owned folder' });
});
