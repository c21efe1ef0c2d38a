import { afterAll, beforeAll, expect, it } from 'vitest';
import { openAiChatModel } from '../../integrations/chat-model.js';
import { serveChatModel, type ChatModelServer } from '../../sim/chat-model-server.js';
import { insertConversation } from '../support/assistant.js';
import { multipartBody } from '../support/documents.js';
import { connectAppInProcess } from '../support/connected-apps.js';
import { expectTenantIsolation } from '../support/tenant-isolation.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack } = useTestStack({ workspaces: false });
// The assistant's answers come from a local chat model: two add_column calls, then words.
let assistantTableId = '';
let assistantModel: ChatModelServer;
beforeAll(async () => {
  assistantModel = await serveChatModel((request) =>
    request.messages.some((m) => m.role === 'tool')
      ? { content: 'Two cards.' }
      : {
          toolCalls: ['Owned A', 'Owned B'].map((name) => ({
            name: 'add_column',
            arguments: { table_id: assistantTableId, column: { kind: 'input', name } },
          })),
        },
  );
  stack.integrations.chatModel = openAiChatModel({
    apiKey: 'local',
    model: 'local-model',
    baseUrl: assistantModel.url,
  });
});
afterAll(() => assistantModel?.close());

it('answers 404 to every id-bearing route called with another workspace ids, and changes nothing', async () => {
  const owner = await stack.createWorkspace('paid');
  const intruder = await stack.createWorkspace('paid');
  const key = (
    await stack.app.inject({
      method: 'POST',
      url: '/api-keys/',
      headers: withKey(owner.apiKey),
      payload: { name: 'owned' },
    })
  ).json();
  const [member] = (
    await stack.app.inject({ method: 'GET', url: '/workspace/members/', headers: withKey(owner.apiKey) })
  ).json().members;
  const profile = (
    await stack.app.inject({
      method: 'POST',
      url: '/sender-profiles/',
      headers: withKey(owner.apiKey),
      payload: { name: 'Owned sender' },
    })
  ).json();

  const [account] = await stack.sql<
    { id: string }[]
  >`select id from pnet_accounts where sender_profile_id = ${profile.id}`;
  const queueStep = (payload: object) =>
    stack.app.inject({
      method: 'POST',
      url: '/pnet/steps/',
      headers: withKey(owner.apiKey),
      payload: { account_id: account!.id, ...payload },
    });
  const task = (await queueStep({ params: { kind: 'check_inbox' } })).json();
  const step = (await queueStep({ params: { kind: 'check_inbox' }, test: true })).json();
  const hold = (
    await stack.app.inject({
      method: 'POST',
      url: '/pnet/holds/',
      headers: withKey(owner.apiKey),
      payload: { contact_key: 'c-1' },
    })
  ).json();

  const ownerTables = (url: string, payload: object) =>
    stack.app.inject({ method: 'POST', url, headers: withKey(owner.apiKey), payload }).then((r) => r.json());
  const table = await ownerTables('/tables/', { name: 'Owned table' });
  const folder = await ownerTables('/table-folders/', { name: 'Owned folder' });
  const column = await ownerTables(`/tables/${table.id}/columns/`, { kind: 'input', name: 'Email' });
  const row = await ownerTables(`/tables/${table.id}/rows/`, { cells: { [column.id]: 'owned@example.com' } });
  const view = await ownerTables(`/tables/${table.id}/views/`, { name: 'Owned view' });
  const template = await ownerTables(`/tables/${table.id}/columns/${column.id}/template/`, { name: 'Owned template' });
  const enrichment = await ownerTables(`/tables/${table.id}/columns/`, {
    kind: 'enrichment',
    name: 'Shout',
    provider: 'formula',
    input_mappings: { email: column.id },
    options: { formula: 'upper({email})' },
  });
  const run = await ownerTables(`/tables/${table.id}/columns/${enrichment.id}/runs/`, {});
  const agentInput = crypto.randomUUID();
  const agent = await ownerTables('/saved-agents/', {
    name: 'Owned agent',
    inputs: [{ id: agentInput, name: 'Email' }],
    output_fields: [{ key: 'answer', name: 'Answer' }],
  });
  const example = await ownerTables(`/saved-agents/${agent.id}/examples/`, {
    inputs: { [agentInput]: 'a@example.com' },
    expected: { answer: 'yes' },
  });
  // Training and research runs need a chat model, which this stack has none of: their records are written as the API would.
  const [training] = await stack.sql<{ id: string }[]>`
    insert into agent_training_runs (workspace_id, agent_id, agent_version) values (${owner.workspaceId}, ${agent.id}, 1) returning id`;
  const [agentRun] = await stack.sql<{ id: string }[]>`
    insert into agent_runs (workspace_id, agent_id, agent_version, agent, target, training_run_id, example_id, workflow_id)
    values (${owner.workspaceId}, ${agent.id}, 1, ${stack.sql.json({})}, 'example', ${training!.id}, ${example.id}, 'agent-run/owned') returning id`;

  // A pending invitation of the owner's (written as inviteMember would, without its email).
  const [invitation] = await stack.sql<{ id: string }[]>`
    insert into member_invitations (workspace_id, email, role, token_hash, invited_by, expires_at)
    values (${owner.workspaceId}, 'invitee@owned.test', 'member', ${Buffer.alloc(32, 7)}, ${member.id}, now() + interval '7 days')
    returning id`;

  // Sequences: a draft with one contact, a message of it waiting for approval, and a saved email template.
  const emailTemplate = await ownerTables('/sequences/templates/', { name: 'Owned email template' });
  const sequence = await ownerTables('/sequences/', {
    name: 'Owned sequence',
    audience_table_id: table.id,
    audience_mapping: { email_column_id: column.id },
  });
  const seqContact = (await ownerTables(`/sequences/${sequence.id}/contacts/`, { row_ids: [row.id] })).results[0]
    .contact;
  const [approval] = await stack.sql<{ id: string }[]>`
    insert into sequence_sends (workspace_id, sequence_id, contact_id, step_id, version, channel, kind, status, message_id, body)
    values (${owner.workspaceId}, ${sequence.id}, ${seqContact.id}, 'hello', 1, 'email', 'email', 'awaiting_approval', '<owned@test>', 'Hi') returning id`;

  // The outbound agent on the owned sequence, and a training session of it (the local writer writes its samples).
  const outboundAgent = await ownerTables('/outbound-agents/', {
    name: 'Owned outbound agent',
    slots: [{ slot_key: 'opener', prompt: 'Say hello.' }],
  });
  await stack.app.inject({
    method: 'PUT',
    url: `/sequences/${sequence.id}/agent/`,
    headers: withKey(owner.apiKey),
    payload: { agent_id: outboundAgent.id },
  });
  const trainingSession = await ownerTables(`/sequences/${sequence.id}/agent/training/`, {
    sample_size: 1,
    ready_after: 1,
  });

  // The inbox (another person than the sequence contact's, whose reply would stop it): a thread with a reply, a label, a suggested reply (the local template writer), a do-not-contact entry.
  const [inboxThread] = await stack.sql<{ id: string }[]>`
    insert into inbox_threads (workspace_id, channel, contact_email, subject) values (${owner.workspaceId}, 'email', 'owned-thread@example.com', 'Owned') returning id`;
  await stack.sql`
    insert into inbox_messages (workspace_id, thread_id, direction, kind, from_email, body, external_id, occurred_at)
    values (${owner.workspaceId}, ${inboxThread!.id}, 'inbound', 'reply', 'owned-thread@example.com', 'Hello', '<owned-reply@test>', now())`;
  const inboxLabel = await ownerTables('/inbox/labels/', { name: 'Owned label' });
  const inboxSuggestion = await ownerTables(`/inbox/threads/${inboxThread!.id}/suggestions/`, {});
  const dncEntry = await ownerTables('/do-not-contact/', { kind: 'email', value: 'owned-dnc@example.com' });
  // Port 1 on this machine: its workflow's polls fail quietly, which is all the check needs.
  const mailbox = await ownerTables('/inbox/mailboxes/', {
    address: 'owned@example.com',
    host: '127.0.0.1',
    port: 1,
    secure: false,
    username: 'owned',
    password: 'x',
    poll_seconds: 3600,
  });
  // Chat attachments: a CSV uploaded to a conversation of the owner's (inserted with SQL).
  const attachmentConversation = await insertConversation(stack.sql, owner.workspaceId);
  const attachmentForm = multipartBody({
    filename: 'owned.csv',
    contentType: 'text/csv',
    data: Buffer.from('owned,1\n'),
  });
  const attachment = (
    await stack.app.inject({
      method: 'POST',
      url: `/assistant/conversations/${attachmentConversation}/attachments/`,
      headers: { ...withKey(owner.apiKey), ...attachmentForm.headers },
      payload: attachmentForm.payload,
    })
  ).json();
  expect(attachment.status).toBe('ready');
  // A business-context document of the owner's (plain text, uploaded).
  const documentForm = multipartBody({
    filename: 'owned.txt',
    contentType: 'text/plain',
    data: Buffer.from('Owned business context.\n'),
  });
  const businessDocument = (
    await stack.app.inject({
      method: 'POST',
      url: '/business-context/documents/',
      headers: { ...withKey(owner.apiKey), ...documentForm.headers },
      payload: documentForm.payload,
    })
  ).json();
  expect(businessDocument.status).toBe('pending');

  // The assistant: a conversation, an answer with two cards (one approved for the thread, which grants its verb; one pending).
  assistantTableId = (await ownerTables('/tables/', { name: 'Owned assistant table' })).id;
  const conversation = await ownerTables('/assistant/conversations/', { title: 'Owned conversation' });
  const asked = await stack.app.inject({
    method: 'POST',
    url: `/assistant/conversations/${conversation.id}/messages/`,
    headers: withKey(owner.apiKey),
    payload: { content: 'Add two columns' },
  });
  const cards = asked.body
    .split('\n\n')
    .flatMap((e) =>
      e.startsWith('id: ') && e.includes('"data-proposal"')
        ? [JSON.parse(e.split('data: ')[1]!).data as { id: string; message_id: string }]
        : [],
    );
  expect(cards).toHaveLength(2);
  const approvedCard = (
    await stack.app.inject({
      method: 'POST',
      url: `/assistant/actions/${cards[0]!.id}/approve/`,
      headers: withKey(owner.apiKey),
      payload: { scope: 'thread' },
    })
  ).json();
  expect(approvedCard.status).toBe('applied');
  const [assistantGrant] = (
    await stack.app.inject({ method: 'GET', url: '/assistant/grants/', headers: withKey(owner.apiKey) })
  ).json().grants;
  const [answer] = await stack.sql<
    { id: string }[]
  >`select id from assistant_messages where conversation_id = ${conversation.id} and role = 'assistant'`;

  const intruderProfile = (
    await stack.app.inject({
      method: 'POST',
      url: '/sender-profiles/',
      headers: withKey(intruder.apiKey),
      payload: { name: 'Intruder' },
    })
  ).json();
  const intruderToken = (
    await stack.app.inject({
      method: 'GET',
      url: `/sender-profiles/${intruderProfile.id}/pnet/`,
      headers: withKey(intruder.apiKey),
    })
  ).json().connection_token;

  // A connected AI app of the owner, from a consent request the owner decided (decision 040).
  const consentRequestId = await connectAppInProcess(stack.app, {
    token: owner.accessToken,
    workspaceId: owner.workspaceId,
    name: 'Owned app',
  });
  const [connectedApp] = (
    await stack.app.inject({ method: 'GET', url: '/connected-apps/', headers: withKey(owner.apiKey) })
  ).json().data;

  // Data sourcing (decisions 041, 042): a lead search, a CRM connection, an import with a schedule,
  // a write-back (records as the API writes them).
  const [leadSearch] = await stack.sql<{ id: string }[]>`
    insert into lead_searches (workspace_id, table_id, provider, kind, query, max_results, price_per_row, status)
    values (${owner.workspaceId}, ${table.id}, 'apollo', 'people', ${stack.sql.json({})}, 10, 1, 'running') returning id`;
  const [crmConnection] = await stack.sql<{ id: string }[]>`
    insert into crm_connections (workspace_id, name, auth_kind, token_sealed) values (${owner.workspaceId}, 'Owned CRM', 'private_app', 's1.x.y.z.w') returning id`;
  const sourcingImport = await ownerTables(`/tables/${table.id}/imports/`, {
    source: 'crm',
    name: 'Owned import',
    connection_id: crmConnection!.id,
    object_type: 'contacts',
    run_now: false,
    mapping: [{ source: 'email', column_name: 'Email' }],
  });
  const importSchedule = await ownerTables('/import-schedules/', {
    import_id: sourcingImport.id,
    interval_seconds: 86400,
    paused: true,
  });
  const [writeBack] = await stack.sql<{ id: string }[]>`
    insert into write_backs (workspace_id, table_id, connection_id, object_type, id_property, mapping, status)
    values (${owner.workspaceId}, ${table.id}, ${crmConnection!.id}, 'contacts', 'email', ${stack.sql.json([])}, 'succeeded') returning id`;
  const [discovery] = await stack.sql<{ id: string }[]>`
    insert into subdomain_discoveries (workspace_id, table_id, domain, status) values (${owner.workspaceId}, ${table.id}, 'owned.example', 'succeeded') returning id`;

  // Notifications (decision 038): a rule and a webhook endpoint of the owner's.
  const notificationRule = await ownerTables('/notifications/rules/', { event_type: 'credits.low', channel: 'email' });
  const webhookEndpoint = await ownerTables('/webhooks/endpoints/', { url: 'https://example.com/owned-hook' });

  const checked = await expectTenantIsolation({
    app: stack.app,
    intruderHeaders: withKey(intruder.apiKey),
    intruderExtensionHeaders: { authorization: `Bearer ${intruderToken}` },
    ids: {
      key_id: key.id,
      member_id: member.id,
      invitation_id: invitation!.id,
      profile_id: profile.id,
      step_id: step.id,
      task_id: task.id,
      action_id: step.id,
      hold_id: hold.id,
      table_id: table.id,
      folder_id: folder.id,
      column_id: column.id,
      row_id: row.id,
      view_id: view.id,
      template_id: template.id,
      run_id: run.id,
      saved_agent_id: agent.id,
      agent_id: outboundAgent.id,
      example_id: example.id,
      training_run_id: training!.id,
      agent_run_id: agentRun!.id,
      sequence_id: sequence.id,
      contact_id: seqContact.id,
      approval_id: approval!.id,
      email_template_id: emailTemplate.id,
      session_id: trainingSession.id,
      thread_id: inboxThread!.id,
      label_id: inboxLabel.id,
      suggestion_id: inboxSuggestion.id,
      entry_id: dncEntry.id,
      mailbox_id: mailbox.id,
      conversation_id: conversation.id,
      message_id: answer!.id,
      proposal_id: cards[1]!.id,
      grant_id: assistantGrant.id,
      attachment_id: attachment.id,
      document_id: businessDocument.id,
      app_id: connectedApp.id,
      request_id: consentRequestId,
      search_id: leadSearch!.id,
      connection_id: crmConnection!.id,
      import_id: sourcingImport.id,
      schedule_id: importSchedule.id,
      write_back_id: writeBack!.id,
      discovery_id: discovery!.id,
      rule_id: notificationRule.id,
      endpoint_id: webhookEndpoint.id,
    },
    bodies: {
      updateSequence: { expected_revision: 1 },
      launchSequence: { expected_revision: 1 },
      pauseSequence: { expected_revision: 1 },
      resumeSequence: { expected_revision: 1 },
      archiveSequence: { expected_revision: 1 },
      enrolSequenceContacts: { row_ids: [row.id] },
      migrateSequenceContacts: { contact_ids: [seqContact.id], to_version: 1 },
      updateApiKey: { name: 'stolen' },
      updateMemberRole: { role: 'member' },
      updatePnetSettings: { run_mode: 'automatic' },
      reportStepResult: { status: 'succeeded' },
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
      updateSavedAgent: { name: 'Stolen' },
      createSavedAgentExample: { expected: {} },
      deploySavedAgent: { saved_agent_id: agent.id },
      runAgentColumnRows: { row_ids: [row.id] },
      setSequenceAgent: { agent_id: null },
      giveTrainingVerdict: { record_id: row.id, verdict: 'looks_good' },
      discardTrainingChanges: { expected_revision: 1 },
      applyTrainingProposal: { expected_revision: 1 },
      abandonTrainingProposal: { expected_revision: 1 },
      addInboxThreadLabel: { label_id: inboxLabel.id },
      replyInboxThread: { body: 'Stolen' },
      updateAssistantConversation: { title: 'Stolen' },
      sendAssistantMessage: { content: 'Stolen' },
      approveConsentRequest: { workspace_id: intruder.workspaceId, access: 'write' },
      updateNotificationRule: { enabled: false },
      updateWebhookEndpoint: { enabled: false },
      rotateWebhookSecret: {},
      replayWebhookMessages: { since: '2020-01-01T00:00:00Z' },
      createImport: {
        source: 'crm',
        name: 'Stolen',
        connection_id: crmConnection!.id,
        object_type: 'contacts',
        run_now: false,
        mapping: [{ source: 'email', column_name: 'Email' }],
      },
      createWriteBack: {
        connection_id: crmConnection!.id,
        object_type: 'contacts',
        id_property: 'email',
        mapping: [{ column_id: column.id, property: 'email' }],
      },
    },
  });
  expect(checked.map((o) => o.operationId).sort()).toEqual([
    'abandonTrainingProposal',
    'addInboxThreadLabel',
    'applyTrainingProposal',
    'approveAssistantAction',
    'approveConsentRequest',
    'approveInboxSuggestion',
    'approveSequenceMessage',
    'approveTask',
    'archiveSequence',
    'cancelAgentColumnRuns',
    'cancelAgentRun',
    'cancelColumnRun',
    'cancelLeadSearch',
    'cancelStep',
    'closeTrainingSession',
    'createImport',
    'createSavedAgentExample',
    'createTableColumn',
    'createTableColumnFromTemplate',
    'createTableRow',
    'createTableRowsBulk',
    'createTableView',
    'createWriteBack',
    'deleteApiKey',
    'deleteBusinessDocument',
    'deleteColumnTemplate',
    'deleteCrmConnection',
    'deleteDoNotContact',
    'deleteEmailTemplate',
    'deleteImport',
    'deleteImportSchedule',
    'deleteInboxLabel',
    'deleteInboxMailbox',
    'deleteNotificationRule',
    'deleteSavedAgent',
    'deleteSavedAgentExample',
    'deleteTable',
    'deleteTableColumn',
    'deleteTableFolder',
    'deleteTableRow',
    'deleteTableRowsBulk',
    'deleteTableView',
    'deleteWebhookEndpoint',
    'denyConsentRequest',
    'deploySavedAgent',
    'discardTrainingChanges',
    'disconnectSenderPnetAccount',
    'dismissAssistantAction',
    'dismissInboxSuggestion',
    'enrolSequenceContacts',
    'exportTableCsv',
    'getCrmConnection',
    'getImport',
    'getImportSchedule',
    'getLeadSearch',
    'getSubdomainDiscovery',
    'getWriteBack',
    'giveTrainingVerdict',
    'grantStepCommit',
    'importTableCsv',
    'launchSequence',
    'listAgentColumnRuns',
    'listChatAttachments',
    'listColumnRuns',
    'listImports',
    'listOutboundAgentVersions',
    'listSavedAgentExamples',
    'listSavedAgentTrainingRuns',
    'listSequenceContacts',
    'listSequenceVersions',
    'listStepAttempts',
    'listTableColumns',
    'listTableRows',
    'listTableRuns',
    'listTableViews',
    'listTrainingSessions',
    'listWebhookAttempts',
    'listWriteBackRows',
    'migrateSequenceContacts',
    'pauseImportSchedule',
    'pauseSequence',
    'pauseSequenceContact',
    'pollInboxMailbox',
    'readAgentRun',
    'readApiKey',
    'readAssistantAction',
    'readAssistantConversation',
    'readBusinessDocument',
    'readChatAttachmentPages',
    'readColumnRun',
    'readColumnTemplate',
    'readConsentRequest',
    'readDoNotContact',
    'readEmailTemplate',
    'readInboxMailbox',
    'readInboxSuggestion',
    'readInboxThread',
    'readMember',
    'readNotificationRule',
    'readOutboundAgent',
    'readOutboundConversation',
    'readPnetSettings',
    'readSavedAgent',
    'readSavedAgentTrainingRun',
    'readSenderPnetAccount',
    'readSenderProfile',
    'readSequence',
    'readSequenceAgent',
    'readSequenceApproval',
    'readSequenceContact',
    'readStep',
    'readTable',
    'readTableColumn',
    'readTableFolder',
    'readTableRow',
    'readTableView',
    'readTrainingSession',
    'readWebhookEndpoint',
    'recordTableView',
    'rejectSequenceMessage',
    'rejectTask',
    'releaseStepClaim',
    'releaseStepHold',
    'removeInboxThreadLabel',
    'removeMember',
    'replayWebhookMessages',
    'replyInboxThread',
    'reportRunningWait',
    'reportStepAttempt',
    'reportStepResult',
    'rereadBusinessDocument',
    'restoreTable',
    'resumeImportSchedule',
    'resumeSequence',
    'resumeSequenceContact',
    'retrySequenceContact',
    'retryStep',
    'revokeAssistantGrant',
    'revokeConnectedApp',
    'revokeInvitation',
    'rotateWebhookSecret',
    'runAgentColumnRows',
    'runImport',
    'saveColumnTemplate',
    'sendAssistantMessage',
    'setSequenceAgent',
    'startColumnRun',
    'startSavedAgentTraining',
    'startTrainingSession',
    'stopSequenceContact',
    'streamAssistantAnswer',
    'streamTableEvents',
    'suggestInboxReply',
    'updateApiKey',
    'updateAssistantConversation',
    'updateBusinessDocument',
    'updateColumnTemplate',
    'updateEmailTemplate',
    'updateInboxLabel',
    'updateInboxMailbox',
    'updateInboxThread',
    'updateMemberRole',
    'updateNotificationRule',
    'updateOutboundAgent',
    'updatePnetSettings',
    'updateSavedAgent',
    'updateSequence',
    'updateTable',
    'updateTableColumn',
    'updateTableFolder',
    'updateTableRow',
    'updateTableRowsBulk',
    'updateTableView',
    'updateWebhookEndpoint',
    'uploadChatAttachment',
  ]);

  expect(
    (await stack.app.inject({ method: 'GET', url: '/connected-apps/', headers: withKey(owner.apiKey) })).json().data,
  ).toEqual([connectedApp]);
  // The intruder's role change and removal left the owner's admin as it was.
  expect(
    (
      await stack.app.inject({ method: 'GET', url: `/workspace/members/${member.id}/`, headers: withKey(owner.apiKey) })
    ).json(),
  ).toMatchObject({ id: member.id, role: 'admin' });
  const after = await stack.app.inject({ method: 'GET', url: `/api-keys/${key.id}/`, headers: withKey(owner.apiKey) });
  expect(after.statusCode).toBe(200);
  expect(after.json().name).toBe('owned');
  expect((await stack.app.inject({ method: 'GET', url: '/workspace/', headers: withKey(key.key) })).statusCode).toBe(
    200,
  );
  const settings = (
    await stack.app.inject({
      method: 'GET',
      url: `/sender-profiles/${profile.id}/pnet/settings/`,
      headers: withKey(owner.apiKey),
    })
  ).json();
  expect(settings.run_mode).toBe('manual');
  const tasks = (await stack.app.inject({ method: 'GET', url: '/pnet/tasks/', headers: withKey(owner.apiKey) })).json()
    .tasks;
  expect(tasks.map((t: { id: string }) => t.id)).toEqual([task.id]);
  expect(
    (await stack.app.inject({ method: 'GET', url: `/pnet/steps/${step.id}/`, headers: withKey(owner.apiKey) })).json()
      .status,
  ).toBe('queued');
  expect(
    (await stack.app.inject({ method: 'GET', url: '/pnet/holds/', headers: withKey(owner.apiKey) })).json().holds,
  ).toHaveLength(1);
  const ownerGet = (url: string) =>
    stack.app.inject({ method: 'GET', url, headers: withKey(owner.apiKey) }).then((r) => r.json());
  expect(await ownerGet(`/tables/${table.id}/`)).toMatchObject({ name: 'Owned table', deleted_at: null, row_count: 1 });
  expect((await ownerGet(`/tables/${table.id}/columns/`)).columns.map((c: { name: string }) => c.name)).toEqual([
    'Email',
    'Shout',
    'Shout · result',
  ]);
  expect(await ownerGet(`/tables/${table.id}/runs/${run.id}/`)).toMatchObject({
    id: run.id,
    cancel_requested_at: null,
  });
  expect((await ownerGet(`/tables/${table.id}/rows/${row.id}/`)).cells).toEqual({ [column.id]: 'owned@example.com' });
  expect((await ownerGet(`/tables/${table.id}/views/`)).views.map((v: { name: string }) => v.name)).toEqual([
    'Owned view',
  ]);
  expect((await ownerGet('/column-templates/')).templates.map((t: { name: string }) => t.name)).toEqual([
    'Owned template',
  ]);
  expect(await ownerGet(`/table-folders/${folder.id}/`)).toMatchObject({ name: 'Owned folder' });

  // The outbound agent's routes once more by hand, the conversation read with its contact key.
  const asIntruder = (method: 'GET' | 'PATCH', url: string, payload?: object) =>
    stack.app.inject({ method, url, headers: withKey(intruder.apiKey), ...(payload ? { payload } : {}) });
  for (const res of [
    await asIntruder('GET', `/outbound-agents/${outboundAgent.id}/`),
    await asIntruder('PATCH', `/outbound-agents/${outboundAgent.id}/`, { name: 'Stolen' }),
    await asIntruder('GET', `/outbound-agents/${outboundAgent.id}/versions/`),
    await asIntruder('GET', `/outbound-agents/${outboundAgent.id}/conversations/?contact_key=${sequence.id}:${row.id}`),
  ]) {
    expect(res.statusCode).toBe(404);
    expect(Object.keys(res.json())).toEqual(['detail']);
  }
  expect(await ownerGet(`/outbound-agents/${outboundAgent.id}/`)).toMatchObject({
    name: 'Owned outbound agent',
    version: 1,
  });
  expect(await ownerGet(`/sequences/${sequence.id}/agent/`)).toEqual({
    sequence_id: sequence.id,
    agent_id: outboundAgent.id,
  });
  expect((await ownerGet(`/sequences/${sequence.id}/agent/training/${trainingSession.id}/`)).id).toBe(
    trainingSession.id,
  );
  expect(await ownerGet(`/saved-agents/${agent.id}/`)).toMatchObject({ name: 'Owned agent', version: 1 });
  expect((await ownerGet(`/saved-agents/${agent.id}/examples/`)).examples.map((e: { id: string }) => e.id)).toEqual([
    example.id,
  ]);
  expect(await ownerGet(`/agent-runs/${agentRun!.id}/`)).toMatchObject({ id: agentRun!.id, status: 'queued' });
  expect(await ownerGet(`/sequences/${sequence.id}/`)).toMatchObject({
    name: 'Owned sequence',
    status: 'draft',
    revision: 1,
  });
  expect((await ownerGet(`/sequences/${sequence.id}/contacts/${seqContact.id}/`)).status).toBe('active');
  expect((await ownerGet(`/sequences/approvals/${approval!.id}/`)).status).toBe('awaiting_approval');
  expect((await ownerGet(`/sequences/templates/${emailTemplate.id}/`)).name).toBe('Owned email template');
  expect(await ownerGet(`/inbox/threads/${inboxThread!.id}/`)).toMatchObject({
    labels: [],
    unread: false,
    archived: false,
  });
  expect(await ownerGet(`/inbox/suggestions/${inboxSuggestion.id}/`)).toMatchObject({ status: 'pending' });
  expect((await ownerGet('/inbox/labels/')).labels.map((l: { name: string }) => l.name)).toEqual(['Owned label']);
  expect((await ownerGet(`/do-not-contact/${dncEntry.id}/`)).value).toBe('owned-dnc@example.com');
  expect(await ownerGet(`/inbox/mailboxes/${mailbox.id}/`)).toMatchObject({ username: 'owned', enabled: true });
  const ownedConversation = await ownerGet(`/assistant/conversations/${conversation.id}/`);
  expect(ownedConversation).toMatchObject({ title: 'Owned conversation', archived: false });
  expect(ownedConversation.messages.map((m: { id: string }) => m.id)).toHaveLength(2);
  expect(await ownerGet(`/assistant/actions/${cards[1]!.id}/`)).toMatchObject({ status: 'pending', decided_at: null });
  expect((await ownerGet('/assistant/grants/')).grants.map((g: { id: string }) => g.id)).toEqual([assistantGrant.id]);
  expect((await ownerGet(`/chat-attachments/${attachment.id}/pages/`)).pages).toEqual(['owned   1']);
  expect(
    (await ownerGet(`/assistant/conversations/${attachmentConversation}/attachments/`)).attachments.map(
      (a: { id: string }) => a.id,
    ),
  ).toEqual([attachment.id]);
});
