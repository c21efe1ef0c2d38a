/**
 * The assistant end to end: settings and their bounds, a streamed answer read as a chat front-end
 * reads it, cards raised by the model's tool calls, approve / dismiss / approve-all with their
 * races, standing grants, the credits a card holds and charges, and the activity log. The model is
 * a local server speaking the OpenAI protocol; everything else is the real service.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openAiChatModel } from '../../integrations/chat-model.js';
import { createEnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import { endpointCaller } from '../../integrations/web/web-endpoint.js';
import {
  serveChatModel,
  type ChatModelScript,
  type ChatModelServer,
  type ChatModelServerRequest,
} from '../../sim/chat-model-server.js';
import { serveHttp, type LocalHttp } from '../../sim/local-http.js';
import { addSiteTitleColumn, callsThenWords, readStream } from '../support/assistant.js';
import { multipartBody } from '../support/documents.js';
import { useTestStack, withKey, withToken } from '../support/test-stack.js';
import { tablesClient } from '../support/tables.js';

let site: LocalHttp;
let model: ChatModelServer;
/** What the model answers next; each test scripts it. */
let script: (request: ChatModelServerRequest) => ChatModelScript = () => ({ content: 'Hello.' });

beforeAll(async () => {
  site = await serveHttp(
    (req, res) =>
      void res.writeHead(200, { 'content-type': 'text/html' }).end(`<title>Site ${req.url}</title><p>About</p>`),
  );
  model = await serveChatModel((request) => script(request));
});
afterAll(async () => {
  await site?.close();
  await model?.close();
});

const { stack, paid } = useTestStack({
  enrichmentProviders: () => createEnrichmentProviders({ env: { WEB_READER_ALLOW_PRIVATE_NETWORKS: 'true' } }),
});
beforeAll(() => {
  stack.integrations.chatModel = openAiChatModel({ apiKey: 'local', model: 'local-model', baseUrl: model.url });
});

const headers = () => withKey(paid.apiKey);
const get = (url: string) => stack.app.inject({ method: 'GET', url, headers: headers() });
const post = (url: string, payload?: object) =>
  stack.app.inject({ method: 'POST', url, headers: headers(), ...(payload ? { payload } : {}) });
const patch = (url: string, payload: object) => stack.app.inject({ method: 'PATCH', url, headers: headers(), payload });

async function conversation(): Promise<string> {
  const res = await post('/assistant/conversations/', {});
  expect(res.statusCode).toBe(201);
  return res.json<{ id: string }>().id;
}

async function ask(conversationId: string, content: string) {
  const res = await post(`/assistant/conversations/${conversationId}/messages/`, { content });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.headers['content-type']).toMatch(/text\/event-stream/);
  expect(res.headers['x-vercel-ai-ui-message-stream']).toBe('v1');
  return readStream(res.body);
}

describe('settings', () => {
  // Back to no grants for the tests below, whatever happens here.
  afterAll(() => patch('/assistant/settings/', { approval_threshold_credits: 25, default_granted_verbs: [] }));

  it('reads the defaults, keeps a field left out, and refuses a verb that always asks by name', async () => {
    expect((await get('/assistant/settings/')).json()).toEqual({
      approval_threshold_credits: 25,
      default_granted_verbs: [],
    });
    expect((await patch('/assistant/settings/', { default_granted_verbs: ['add_column'] })).json()).toEqual({
      approval_threshold_credits: 25,
      default_granted_verbs: ['add_column'],
    });
    expect((await patch('/assistant/settings/', { approval_threshold_credits: 0 })).json()).toEqual({
      approval_threshold_credits: 0,
      default_granted_verbs: ['add_column'],
    });
    expect((await patch('/assistant/settings/', { approval_threshold_credits: 100000 })).statusCode).toBe(200);
    const refused = await patch('/assistant/settings/', {
      default_granted_verbs: ['run_column', 'push_to_destination'],
    });
    expect(refused.statusCode).toBe(422);
    expect(refused.json().detail).toContain('push_to_destination');
    expect(refused.json().issues[0]).toMatchObject({
      loc: ['body', 'default_granted_verbs.1'],
      input: 'push_to_destination',
    });
    for (const bad of [
      { approval_threshold_credits: -1 },
      { approval_threshold_credits: 100001 },
      { default_granted_verbs: ['nope'] },
    ]) {
      expect((await patch('/assistant/settings/', bad)).statusCode, JSON.stringify(bad)).toBe(422);
    }
    const nine = [...Array(9)].map(() => 'add_column');
    expect((await patch('/assistant/settings/', { default_granted_verbs: nine })).statusCode).toBe(422);
    // A verb named twice counts once.
    expect(
      (await patch('/assistant/settings/', { default_granted_verbs: ['add_column', 'add_column'] })).json()
        .default_granted_verbs,
    ).toEqual(['add_column']);
    const seven = [
      'create_table_from_search',
      'add_column',
      'run_column',
      'enrich_rows',
      'add_contacts_to_sequence',
      'call_endpoint',
      'start_search',
    ];
    expect(
      (await patch('/assistant/settings/', { default_granted_verbs: seven })).json().default_granted_verbs,
    ).toEqual(seven);
    // Unchanged by the refusals, then back to no grants for the tests below.
    await patch('/assistant/settings/', { approval_threshold_credits: 25, default_granted_verbs: [] });
  });
});

describe('the stream', () => {
  it('streams the answer as UI message stream parts and keeps both messages', async () => {
    script = () => ({ content: 'Hello there, how can I help?' });
    const id = await conversation();
    const { ids, parts, done } = await ask(id, 'Hi!');
    expect(done).toBe(true);
    expect(ids).toEqual(parts.map((_, n) => n + 1));
    const types = parts.map((p) => p.type);
    expect(types[0]).toBe('start');
    expect(types.slice(1, 3)).toEqual(['start-step', 'text-start']);
    expect(types.slice(-3)).toEqual(['text-end', 'finish-step', 'finish']);
    expect(
      parts
        .filter((p) => p.type === 'text-delta')
        .map((p) => p.delta)
        .join(''),
    ).toBe('Hello there, how can I help?');
    const finish = parts.at(-1)!;
    const read = (await get(`/assistant/conversations/${id}/`)).json();
    expect(read.title).toBe('Hi!');
    expect(
      read.messages.map((m: { role: string; content: string; status: string }) => [m.role, m.content, m.status]),
    ).toEqual([
      ['user', 'Hi!', 'complete'],
      ['assistant', 'Hello there, how can I help?', 'complete'],
    ]);
    expect(finish.messageMetadata).toEqual({ message_id: read.messages[1].id, conversation_id: id });
    // Read again from any point: the same parts, from Postgres, without asking the model again.
    const calls = model.calls;
    const again = await stack.app.inject({
      method: 'GET',
      url: `/assistant/conversations/${id}/messages/${read.messages[1].id}/stream/`,
      headers: { ...headers(), 'last-event-id': '3' },
    });
    const resumed = readStream(again.body);
    expect(resumed.ids[0]).toBe(4);
    expect(resumed.parts).toEqual(parts.slice(3));
    expect(model.calls).toBe(calls);
  });

  it('says why when the model fails, with an error part rather than a dropped stream', async () => {
    script = () => ({ status: 400 });
    const id = await conversation();
    const { parts, done } = await ask(id, 'Break');
    expect(done).toBe(true);
    expect(parts.at(-1)).toMatchObject({ type: 'error' });
    expect(String(parts.at(-1)!.errorText)).toContain('400');
    const read = (await get(`/assistant/conversations/${id}/`)).json();
    expect(read.messages[1].status).toBe('failed');
  });

  it('answers 503 naming the variables when no chat model is configured', async () => {
    const configured = stack.integrations.chatModel;
    stack.integrations.chatModel = null;
    try {
      const id = await conversation();
      const res = await post(`/assistant/conversations/${id}/messages/`, { content: 'Hi' });
      expect(res.statusCode).toBe(503);
      expect(res.json().detail).toContain('OPENAI_API_KEY');
      expect(res.json().detail).toContain('OPENAI_MODEL');
      expect((await get(`/assistant/conversations/${id}/`)).json().messages).toEqual([]);
    } finally {
      stack.integrations.chatModel = configured;
    }
  });
});

describe('cards', () => {
  let tableId: string;
  let urlColumn: string;
  beforeAll(async () => {
    const tables = tablesClient(stack, headers());
    tableId = (await tables.table({ name: 'Companies' })).id;
    urlColumn = (await tables.column(tableId, { kind: 'input', name: 'Website' })).id;
    for (const n of [1, 2, 3]) {
      const res = await tables.post(`/tables/${tableId}/rows/`, { cells: { [urlColumn]: `${site.url}/company-${n}` } });
      expect(res.statusCode).toBe(201);
    }
  });

  it('raises a free card for a column; approving adds it once and a second approval is 409', async () => {
    script = callsThenWords([
      { name: 'add_column', arguments: { table_id: tableId, column: { kind: 'input', name: 'Notes' } } },
    ]);
    const id = await conversation();
    const { parts } = await ask(id, 'Add a Notes column');
    const proposal = parts.find((p) => p.type === 'data-proposal')!.data as {
      id: string;
      status: string;
      price_credits: null;
      grantable: boolean;
      prepared_column: { column_id: string };
    };
    expect(proposal).toMatchObject({
      status: 'pending',
      price_credits: null,
      grantable: true,
      verb_label: 'Add a column',
      price_label: 'Free',
    });
    expect(parts.some((p) => p.type === 'tool-input-available' && p.toolName === 'add_column')).toBe(true);
    // The column is prepared before the decision.
    expect((await get(`/tables/${tableId}/columns/${proposal.prepared_column.column_id}/`)).statusCode).toBe(200);
    const [first, second] = await Promise.all([
      post(`/assistant/actions/${proposal.id}/approve/`, {}),
      post(`/assistant/actions/${proposal.id}/approve/`, {}),
    ]);
    expect([first.statusCode, second.statusCode].sort()).toEqual([200, 409]);
    const applied = (first.statusCode === 200 ? first : second).json();
    expect(applied).toMatchObject({ status: 'applied', grantable: false, decided_by_display_name: expect.any(String) });
    expect(applied.applied_result).toMatchObject({
      entity_id: proposal.prepared_column.column_id,
      opens: 'column',
      made: 1,
    });
    expect((first.statusCode === 409 ? first : second).json()).toEqual({
      detail: expect.stringContaining('already decided'),
    });
    const again = await post(`/assistant/actions/${proposal.id}/dismiss/`);
    expect(again.statusCode).toBe(409);
    const activity = (await get(`/assistant/activity/?conversation_id=${id}`)).json();
    expect(
      activity.activity.map((a: { decision: string; outcome: string | null; actor_kind: string }) => [
        a.decision,
        a.outcome,
        a.actor_kind,
      ]),
    ).toEqual([
      ['approved', 'done', 'system'],
      ['approved', null, 'api'],
    ]);
  });

  it('dismissing removes the prepared column', async () => {
    script = callsThenWords([
      { name: 'add_column', arguments: { table_id: tableId, column: { kind: 'input', name: 'Discarded' } } },
    ]);
    const { parts } = await ask(await conversation(), 'Add a column I will not want');
    const proposal = parts.find((p) => p.type === 'data-proposal')!.data as {
      id: string;
      prepared_column: { column_id: string };
    };
    const dismissed = await post(`/assistant/actions/${proposal.id}/dismiss/`);
    expect(dismissed.json()).toMatchObject({ status: 'dismissed' });
    expect((await get(`/tables/${tableId}/columns/${proposal.prepared_column.column_id}/`)).statusCode).toBe(404);
  });

  it('a priced run holds its quote, charges what the run cost and returns the rest', async () => {
    const before = (await get('/credits/')).json<{ available: number; spent: number }>();
    script = callsThenWords([addSiteTitleColumn(tableId, urlColumn)]);
    const { parts } = await ask(await conversation(), 'Read each company site');
    const proposal = parts.find((p) => p.type === 'data-proposal')!.data as {
      id: string;
      price_credits: number;
      price_label: string;
    };
    expect(proposal).toMatchObject({
      price_credits: 3,
      expected_credits: 3,
      price_per: 'call',
      price_label: 'Up to 3 credits',
    });
    const approved = (await post(`/assistant/actions/${proposal.id}/approve/`, {})).json();
    expect(['applying', 'applied']).toContain(approved.status);
    let card = approved;
    for (let i = 0; i < 100 && card.status === 'applying'; i += 1) {
      await new Promise((r) => setTimeout(r, 200));
      card = (await get(`/assistant/actions/${proposal.id}/`)).json();
    }
    expect(card).toMatchObject({ status: 'applied', charged_credits: 3, applied_result: { opens: 'run', made: 3 } });
    const after = (await get('/credits/')).json<{ available: number; spent: number; held: number }>();
    expect(after.spent - before.spent).toBe(3);
    expect(before.available - after.available).toBe(3);
    expect(after.held).toBe(0);
  });

  it('refuses a verb this build cannot run with the reason, and raises no card', async () => {
    script = callsThenWords(
      [{ name: 'push_to_destination', arguments: { table_id: tableId } }],
      'Pushing is not available yet.',
    );
    const id = await conversation();
    const { parts } = await ask(id, 'Push this table to the CRM');
    const refused = parts.find((p) => p.type === 'tool-output-error')!;
    expect(String(refused.errorText)).toContain('Pushing rows to a destination is not available yet');
    expect(parts.some((p) => p.type === 'data-proposal')).toBe(false);
    expect((await get(`/assistant/actions/?conversation_id=${id}`)).json()).toEqual({ actions: [], total_count: 0 });
  });

  it('a thread grant runs the next card of that verb at once, and is listed and revocable', async () => {
    const id = await conversation();
    script = callsThenWords([
      { name: 'add_column', arguments: { table_id: tableId, column: { kind: 'input', name: 'Granted 1' } } },
    ]);
    const first = (await ask(id, 'Add Granted 1')).parts.find((p) => p.type === 'data-proposal')!.data as {
      id: string;
    };
    expect((await post(`/assistant/actions/${first.id}/approve/`, { scope: 'thread' })).json().status).toBe('applied');
    const grants = (await get('/assistant/grants/')).json().grants as {
      id: string;
      verb: string;
      scope: string;
      conversation_id: string;
    }[];
    const grant = grants.find((g) => g.conversation_id === id)!;
    expect(grant).toMatchObject({ verb: 'add_column', scope: 'thread' });

    script = callsThenWords([
      { name: 'add_column', arguments: { table_id: tableId, column: { kind: 'input', name: 'Granted 2' } } },
    ]);
    const second = (await ask(id, 'Add Granted 2')).parts.find((p) => p.type === 'data-proposal')!.data as {
      id: string;
    };
    let card = (await get(`/assistant/actions/${second.id}/`)).json();
    for (let i = 0; i < 50 && card.status !== 'applied'; i += 1) {
      await new Promise((r) => setTimeout(r, 100));
      card = (await get(`/assistant/actions/${second.id}/`)).json();
    }
    expect(card.status).toBe('applied');
    const log = (await get(`/assistant/activity/?conversation_id=${id}`)).json().activity as {
      decision: string;
      actor_kind: string;
      proposal_id: string;
    }[];
    expect(log.filter((a) => a.proposal_id === second.id).map((a) => a.decision)).toContain('automatic');

    expect(
      (await stack.app.inject({ method: 'DELETE', url: `/assistant/grants/${grant.id}/`, headers: headers() }))
        .statusCode,
    ).toBe(200);
    script = callsThenWords([
      { name: 'add_column', arguments: { table_id: tableId, column: { kind: 'input', name: 'Granted 3' } } },
    ]);
    const third = (await ask(id, 'Add Granted 3')).parts.find((p) => p.type === 'data-proposal')!.data as {
      id: string;
    };
    expect((await get(`/assistant/actions/${third.id}/`)).json().status).toBe('pending');
  });

  it('approve-all applies each card on its own and answers every card in the order asked', async () => {
    script = callsThenWords([
      { name: 'add_column', arguments: { table_id: tableId, column: { kind: 'input', name: 'Batch A' } } },
      { name: 'add_column', arguments: { table_id: tableId, column: { kind: 'input', name: 'Batch B' } } },
      { name: 'add_column', arguments: { table_id: tableId, column: { kind: 'input', name: 'Batch C' } } },
    ]);
    const id = await conversation();
    const cards = (await ask(id, 'Add three columns')).parts
      .filter((p) => p.type === 'data-proposal')
      .map((p) => p.data as { id: string; batch_id: string });
    expect(cards).toHaveLength(3);
    expect(new Set(cards.map((c) => c.batch_id)).size).toBe(1);
    expect(cards[0]!.batch_id).not.toBeNull();
    await post(`/assistant/actions/${cards[1]!.id}/dismiss/`);
    const order = [cards[2]!.id, cards[1]!.id, cards[0]!.id];
    const res = await post('/assistant/actions/approve-all/', { proposal_ids: order });
    expect(res.statusCode).toBe(200);
    expect(res.json().actions.map((a: { id: string; status: string }) => [a.id, a.status])).toEqual([
      [order[0], 'applied'],
      [order[1], 'dismissed'],
      [order[2], 'applied'],
    ]);
    const listed = (await get(`/assistant/actions/?conversation_id=${id}`)).json();
    expect(listed.total_count).toBe(3);
    expect(listed.actions.map((a: { id: string }) => a.id)).toEqual(cards.map((c) => c.id));
    expect((await get(`/assistant/actions/?conversation_id=${id}&status=dismissed`)).json().total_count).toBe(1);
  });

  it('approve-all racing a dismissal of the same card: exactly one decision holds, and its effect with it', async () => {
    for (let round = 0; round < 3; round += 1) {
      script = callsThenWords([
        { name: 'add_column', arguments: { table_id: tableId, column: { kind: 'input', name: `Raced ${round}` } } },
      ]);
      const id = await conversation();
      const card = (await ask(id, 'Add a raced column')).parts.find((p) => p.type === 'data-proposal')!.data as {
        id: string;
        prepared_column: { column_id: string };
      };
      const [all, dismissed] = await Promise.all([
        post('/assistant/actions/approve-all/', { proposal_ids: [card.id] }),
        post(`/assistant/actions/${card.id}/dismiss/`),
      ]);
      expect(all.statusCode).toBe(200);
      const final = (await get(`/assistant/actions/${card.id}/`)).json<{ status: string }>();
      expect(['applied', 'dismissed']).toContain(final.status);
      expect(all.json().actions[0].status).toBe(final.status);
      expect(dismissed.statusCode).toBe(final.status === 'dismissed' ? 200 : 409);
      const column = await get(`/tables/${tableId}/columns/${card.prepared_column.column_id}/`);
      expect(column.statusCode).toBe(final.status === 'applied' ? 200 : 404);
      const log = (await get(`/assistant/activity/?conversation_id=${id}`)).json().activity as {
        decision: string;
        outcome: string | null;
      }[];
      expect(log.filter((a) => a.outcome === null || a.decision === 'rejected')).toHaveLength(1);
    }
  });

  it('approve-all takes 1 to 50 ids', async () => {
    expect((await post('/assistant/actions/approve-all/', { proposal_ids: [] })).statusCode).toBe(422);
    const fiftyOne = [...Array(51)].map(() => crypto.randomUUID());
    expect((await post('/assistant/actions/approve-all/', { proposal_ids: fiftyOne })).statusCode).toBe(422);
    const fifty = fiftyOne.slice(1);
    expect((await post('/assistant/actions/approve-all/', { proposal_ids: fifty })).statusCode).toBe(404);
  });
});

describe("tool cards: the API called on the person's behalf", () => {
  it('finds operations, runs a read at once, and proposes a write as a tool card applied as the member', async () => {
    script = (request) => {
      const tools = request.messages.filter((m) => m.role === 'tool').length;
      if (tools === 0)
        return {
          toolCalls: [
            { name: 'find_operations', arguments: { query: 'create a table' } },
            { name: 'call_operation', arguments: { operation: 'listTables', input: {} } },
          ],
        };
      if (tools === 2)
        return {
          toolCalls: [
            {
              name: 'call_operation',
              arguments: { operation: 'createTable', input: { body: { name: 'Made by the assistant' } } },
            },
          ],
        };
      return { content: 'Proposed.' };
    };
    const id = await conversation();
    const { parts } = await ask(id, 'Make me a table');
    expect(model.requests.at(-1)!.tools!.map((t) => t.function.name)).toEqual(
      expect.arrayContaining(['add_column', 'find_operations', 'call_operation']),
    );
    const outputs = parts.filter((p) => p.type === 'tool-output-available');
    const found = (outputs[0]!.output as { operations: { name: string; access: string }[] }).operations;
    expect(found.find((o) => o.name === 'createTable')).toMatchObject({ access: 'write' });
    expect(outputs[1]!.output).toMatchObject({ status: 200, body: { tables: expect.any(Array) } });
    const cards = parts
      .filter((p) => p.type === 'data-proposal')
      .map((p) => p.data as { id: string; kind: string; verb: string; destructive: boolean; grantable: boolean });
    expect(cards).toHaveLength(1);
    expect(cards[0]).toMatchObject({
      kind: 'tool',
      verb: 'createTable',
      destructive: false,
      grantable: true,
      price_label: 'Free',
    });
    const applied = (await post(`/assistant/actions/${cards[0]!.id}/approve/`, {})).json();
    expect(applied).toMatchObject({ status: 'applied', applied_result: { made: 1, entity_id: expect.any(String) } });
    const table = (await get(`/tables/${applied.applied_result.entity_id}/`)).json();
    expect(table.name).toBe('Made by the assistant');
  });

  it('a destructive call is never granted, and the assistant cannot call its own approvals', async () => {
    const tables = tablesClient(stack, headers());
    const doomed = (await tables.table({ name: 'Doomed' })).id;
    script = callsThenWords([
      { name: 'call_operation', arguments: { operation: 'deleteTable', input: { table_id: doomed } } },
      { name: 'call_operation', arguments: { operation: 'approveAssistantAction', input: { proposal_id: doomed } } },
    ]);
    const { parts } = await ask(await conversation(), 'Delete Doomed');
    const card = parts.find((p) => p.type === 'data-proposal')!.data as { id: string };
    expect(card).toMatchObject({
      destructive: true,
      grantable: false,
      loss: expect.stringContaining('cannot be brought back'),
    });
    expect(String(parts.find((p) => p.type === 'tool-output-error')!.errorText)).toContain('approveAssistantAction');
    const granted = await post(`/assistant/actions/${card.id}/approve/`, { scope: 'project_all' });
    expect(granted.statusCode).toBe(422);
    expect((await get(`/tables/${doomed}/`)).statusCode).toBe(200);
    expect((await post(`/assistant/actions/${card.id}/approve/`, {})).json().status).toBe('applied');
    expect((await get(`/tables/${doomed}/`)).statusCode).toBe(404);
  });
});

describe('tool cards for a member', () => {
  it('offers a member no admin-only operation, and says why when one is asked for', async () => {
    const member = await stack.addMember(paid.workspaceId, 'member');
    const asMember = { headers: withToken(member.accessToken) };
    script = callsThenWords([
      { name: 'find_operations', arguments: { query: 'webhook endpoint' } },
      {
        name: 'call_operation',
        arguments: { operation: 'createWebhookEndpoint', input: { body: { url: 'https://example.com/hook' } } },
      },
    ]);
    const opened = await stack.app.inject({
      method: 'POST',
      url: '/assistant/conversations/',
      ...asMember,
      payload: {},
    });
    const res = await stack.app.inject({
      method: 'POST',
      url: `/assistant/conversations/${opened.json<{ id: string }>().id}/messages/`,
      ...asMember,
      payload: { content: 'Send our events to my server' },
    });
    const parts = readStream(res.body).parts;
    const found = (parts.find((p) => p.type === 'tool-output-available')!.output as { operations: { name: string }[] })
      .operations;
    expect(found.map((o) => o.name)).toContain('listWebhookEndpoints');
    expect(found.map((o) => o.name)).not.toContain('createWebhookEndpoint');
    expect(String(parts.find((p) => p.type === 'tool-output-error')!.errorText)).toContain(
      'createWebhookEndpoint is for workspace admins only',
    );
    expect(parts.some((p) => p.type === 'data-proposal')).toBe(false);

    // The same request from an admin's conversation finds it.
    script = callsThenWords([{ name: 'find_operations', arguments: { query: 'webhook endpoint' } }]);
    const asAdmin = (await ask(await conversation(), 'Send our events to my server')).parts;
    const offered = (
      asAdmin.find((p) => p.type === 'tool-output-available')!.output as { operations: { name: string }[] }
    ).operations;
    expect(offered.map((o) => o.name)).toContain('createWebhookEndpoint');
  });
});

describe('call_endpoint', () => {
  it('sends the JSON once on approval, and refuses a private address unless the reader may reach one', async () => {
    const hook = await serveHttp(
      (_req, res) => void res.writeHead(202, { 'content-type': 'application/json' }).end('{"ok":true}'),
    );
    try {
      script = callsThenWords([
        { name: 'call_endpoint', arguments: { url: `${hook.url}/hooks/lead`, body: { name: 'Ada' } } },
      ]);
      const refusedCard = (await ask(await conversation(), 'Tell my other tool')).parts.find(
        (p) => p.type === 'data-proposal',
      )!.data as { id: string; summary: string };
      expect(refusedCard.summary).toContain('Send a POST to 127.0.0.1');
      // The service's default: outside endpoints on the public internet only.
      const refused = (await post(`/assistant/actions/${refusedCard.id}/approve/`, {})).json();
      expect(refused).toMatchObject({ status: 'failed', error: expect.stringContaining('private network') });
      expect(hook.requests).toHaveLength(0);

      const allowed = stack.integrations.webEndpoint;
      stack.integrations.webEndpoint = endpointCaller({ allowPrivateNetworks: true });
      try {
        const card = (await ask(await conversation(), 'Tell my other tool')).parts.find(
          (p) => p.type === 'data-proposal',
        )!.data as { id: string };
        const applied = (await post(`/assistant/actions/${card.id}/approve/`, {})).json();
        expect(applied).toMatchObject({
          status: 'applied',
          applied_result: { content: expect.stringContaining('answered 202') },
        });
        expect(hook.requests.map((r) => [r.method, r.path, JSON.parse(r.body)])).toEqual([
          ['POST', '/hooks/lead', { name: 'Ada' }],
        ]);
        const log = (await get(`/assistant/activity/?limit=5`)).json().activity as {
          proposal_id: string;
          outcome: string | null;
        }[];
        expect(log.find((a) => a.proposal_id === card.id && a.outcome)!.outcome).toBe('sent');
      } finally {
        stack.integrations.webEndpoint = allowed;
      }
    } finally {
      await hook.close();
    }
  });
});

describe('chat attachments in the conversation', () => {
  it("names the conversation's files to the model and reads their pages on request, and no other conversation's", async () => {
    const id = await conversation();
    const body = multipartBody({
      filename: 'leads.csv',
      contentType: 'text/csv',
      data: Buffer.from('name,title\nAda,CEO\nGrace,CTO\n'),
    });
    const uploaded = await stack.app.inject({
      method: 'POST',
      url: `/assistant/conversations/${id}/attachments/`,
      headers: { ...headers(), ...body.headers },
      payload: body.payload,
    });
    expect(uploaded.statusCode, uploaded.body).toBe(201);
    const attachment = uploaded.json<{ id: string }>();
    const other = await conversation();
    script = (request) => {
      const calls = request.messages.filter((m) => m.role === 'tool').length;
      if (calls === 0) return { toolCalls: [{ name: 'read_attachment', arguments: { attachment_id: attachment.id } }] };
      return { content: 'Two leads.' };
    };
    const { parts } = await ask(id, 'Who is in my file?');
    const system = model.requests.at(-1)!.messages[0]!.content!;
    expect(system).toContain(`"leads.csv" (${attachment.id}), csv, 3 rows`);
    const output = parts.find((p) => p.type === 'tool-output-available')!.output as {
      pages: string[];
      next_offset: null;
      page_count: number;
    };
    expect(output).toMatchObject({
      pages: ['name   title', 'Ada   CEO', 'Grace   CTO'],
      next_offset: null,
      page_count: 3,
    });

    script = (request) =>
      request.messages.some((m) => m.role === 'tool')
        ? { content: 'No.' }
        : { toolCalls: [{ name: 'read_attachment', arguments: { attachment_id: attachment.id } }] };
    const elsewhere = await ask(other, 'Read that file');
    expect(String(elsewhere.parts.find((p) => p.type === 'tool-output-error')!.errorText)).toContain('No file');
  });
});

describe('bounds', () => {
  it('refuses eight default grants when one always asks, naming it, and takes a message of 1 to 20000 characters', async () => {
    const eight = [
      'create_table_from_search',
      'add_column',
      'run_column',
      'enrich_rows',
      'add_contacts_to_sequence',
      'push_to_destination',
      'call_endpoint',
      'start_search',
    ];
    const refused = await patch('/assistant/settings/', { default_granted_verbs: eight });
    expect(refused.statusCode).toBe(422);
    expect(refused.json().detail).toContain('push_to_destination');
    const id = await conversation();
    expect((await post(`/assistant/conversations/${id}/messages/`, { content: '' })).statusCode).toBe(422);
    expect((await post(`/assistant/conversations/${id}/messages/`, { content: 'x'.repeat(20001) })).statusCode).toBe(
      422,
    );
    script = () => ({ content: 'Long question, short answer.' });
    expect((await post(`/assistant/conversations/${id}/messages/`, { content: 'x'.repeat(20000) })).statusCode).toBe(
      200,
    );
  });

  it('renames within 1 to 255 characters, archives, and refuses a question to an archived conversation', async () => {
    const id = await conversation();
    expect((await patch(`/assistant/conversations/${id}/`, { title: '' })).statusCode).toBe(422);
    expect((await patch(`/assistant/conversations/${id}/`, { title: 't'.repeat(256) })).statusCode).toBe(422);
    expect((await patch(`/assistant/conversations/${id}/`, { title: 't'.repeat(255) })).json().title).toHaveLength(255);
    expect((await patch(`/assistant/conversations/${id}/`, { archived: true })).json()).toMatchObject({
      archived: true,
      title: 't'.repeat(255),
    });
    const open = (await get('/assistant/conversations/?limit=200')).json().conversations as { id: string }[];
    expect(open.some((c) => c.id === id)).toBe(false);
    expect(
      (await get('/assistant/conversations/?archived=true')).json().conversations.map((c: { id: string }) => c.id),
    ).toContain(id);
    expect((await post(`/assistant/conversations/${id}/messages/`, { content: 'Hi' })).statusCode).toBe(409);
    for (const q of ['limit=0', 'limit=201', 'offset=-1'])
      expect((await get(`/assistant/conversations/?${q}`)).statusCode, q).toBe(422);
  });

  it("shows a member only their own conversations and an admin everyone's", async () => {
    const member = await stack.addMember(paid.workspaceId, 'member');
    const asMember = { authorization: `Bearer ${member.accessToken}` };
    const mine = (
      await stack.app.inject({
        method: 'POST',
        url: '/assistant/conversations/',
        headers: asMember,
        payload: { title: 'Member only' },
      })
    ).json<{ id: string }>();
    const adminsOwn = await conversation();
    expect(
      (await stack.app.inject({ method: 'GET', url: `/assistant/conversations/${adminsOwn}/`, headers: asMember }))
        .statusCode,
    ).toBe(404);
    const listed = (
      await stack.app.inject({ method: 'GET', url: '/assistant/conversations/?limit=200', headers: asMember })
    ).json().conversations as { id: string }[];
    expect(listed.map((c) => c.id)).toEqual([mine.id]);
    // The admin (the API key's member) reads it, and lists everyone's when asking for all members.
    expect((await get(`/assistant/conversations/${mine.id}/`)).statusCode).toBe(200);
    expect(
      (await get('/assistant/conversations/?all_members=true&limit=200'))
        .json()
        .conversations.map((c: { id: string }) => c.id),
    ).toContain(mine.id);
  });
});
