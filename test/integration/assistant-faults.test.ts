/**
 * The assistant under faults (decision 034's guarantees): a worker killed mid-answer, a worker
 * killed while a priced card is applied, and the answer's stream read by a real HTTP client that
 * loses its connection and reconnects with Last-Event-ID. The answers run on workers of this file's
 * own (test/support/fault-workers.ts), killed and replaced at chosen points; the model is the local
 * OpenAI-protocol server and the enrichment provider reads a local site.
 */
import type { AddressInfo } from 'node:net';
import { Agent, fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openAiChatModel } from '../../integrations/chat-model.js';
import { createEnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import { grantWorkspaceCredits } from '../../worker/provisioning.js';
import {
  serveChatModel,
  type ChatModelScript,
  type ChatModelServer,
  type ChatModelServerRequest,
} from '../../sim/chat-model-server.js';
import { useFaultWorkers } from '../support/fault-workers.js';
import { serveHttp, type LocalHttp } from '../../sim/local-http.js';
import { SseStream } from '../support/sse.js';
import { tablesClient } from '../support/tables.js';
import { addSiteTitleColumn, callsThenWords, readStream, type Part } from '../support/assistant.js';
import { useTestStack, withKey, type TestWorkspace } from '../support/test-stack.js';

/** A promise the test opens when it chooses. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

let site: LocalHttp;
/** While set, the site answers nothing until it opens. */
let siteHeld: Promise<void> | null = null;
let model: ChatModelServer;
/** What the model answers next; each test scripts it. */
let script: (request: ChatModelServerRequest) => ChatModelScript = () => ({ content: 'Hello.' });

beforeAll(async () => {
  site = await serveHttp(async (req, res) => {
    if (siteHeld) await siteHeld;
    res.writeHead(200, { 'content-type': 'text/html' }).end(`<title>Site ${req.url}</title><p>About</p>`);
  });
  model = await serveChatModel((request) => script(request));
});
afterAll(async () => {
  await site?.close();
  await model?.close();
});

const providers = () => createEnrichmentProviders({ env: { WEB_READER_ALLOW_PRIVATE_NETWORKS: 'true' } });
const { stack, paid } = useTestStack({ enrichmentProviders: providers });
const faults = useFaultWorkers(stack);
beforeAll(() => {
  stack.integrations.chatModel = openAiChatModel({ apiKey: 'local', model: 'local-model', baseUrl: model.url });
});

function client(ws: TestWorkspace) {
  const headers = withKey(ws.apiKey);
  const api = {
    headers,
    get: (url: string, extra: Record<string, string> = {}) =>
      faults.app.inject({ method: 'GET', url, headers: { ...headers, ...extra } }),
    post: (url: string, payload?: object) =>
      faults.app.inject({ method: 'POST', url, headers, ...(payload ? { payload } : {}) }),
    async conversation(): Promise<string> {
      const res = await api.post('/assistant/conversations/', {});
      expect(res.statusCode).toBe(201);
      return res.json<{ id: string }>().id;
    },
  };
  return api;
}

/** Waits for a state the service reaches on its own (as long as the test's 60 s timeout), reading every `ms`. */
const eventually = <T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 50): Promise<T> =>
  vi.waitFor(
    async () => {
      const value = await read();
      if (!done(value)) throw new Error(`never reached: ${JSON.stringify(value)}`);
      return value;
    },
    { timeout: 60_000, interval: ms },
  );

const answerOf = async (conversationId: string) => {
  const [row] = await stack.sql<
    { id: string }[]
  >`select id from assistant_messages where conversation_id = ${conversationId} and role = 'assistant'`;
  return row?.id;
};
const partsOf = (messageId: string) =>
  stack.sql<
    { seq: number; part: Part }[]
  >`select seq, part from assistant_message_parts where message_id = ${messageId} order by seq`;
const textOf = (parts: Part[], id: string) =>
  parts
    .filter((p) => p.type === 'text-delta' && p.id === id)
    .map((p) => p.delta)
    .join('');

describe('a worker killed mid-answer', () => {
  it('resumes on the next worker: recorded steps are not asked again, a tool call raises one card, and the answer is whole', async () => {
    const api = client(paid);
    const tableId = (await tablesClient(stack, api.headers).table({ name: 'Answer faults' })).id;
    const opening = 'Let me add that column. ';
    const words = 'I proposed a Notes column on the table: approve it and it is added at once, and it costs nothing.';
    script = (request) =>
      request.messages.some((m) => m.role === 'tool')
        ? { content: words, chunkDelayMs: 50 }
        : {
            content: opening,
            toolCalls: [
              { name: 'add_column', arguments: { table_id: tableId, column: { kind: 'input', name: 'Notes' } } },
            ],
          };
    const callsBefore = model.calls;
    const conversationId = await api.conversation();

    // Worker 1 asks the model for step 0 (text and a tool call), records it, and dies before Temporal hears of it.
    const stepRecorded = faults.crashAfter('answerStep', (input) => (input as { step: number }).step === 0);
    const posted = api.post(`/assistant/conversations/${conversationId}/messages/`, { content: 'Add a Notes column' });
    await stepRecorded;
    const messageId = (await answerOf(conversationId))!;
    expect(model.calls - callsBefore).toBe(1);

    // Worker 2 finds step 0 recorded (no model call), raises the card, and dies before Temporal hears of the card.
    const cardRaised = faults.crashAfter('proposeCard');
    const worker2 = await faults.replace();
    await cardRaised;
    expect(worker2.started).toEqual(['answerStep', 'proposeCard']);
    expect(model.calls - callsBefore).toBe(1);

    // Worker 3 finds the card raised, asks for step 1, and dies while its words stream in.
    await faults.replace();
    await eventually(
      () => partsOf(messageId),
      (rows) => rows.filter((r) => r.part.type === 'text-delta' && r.part.id === 'text-1-1').length >= 3,
      10,
    );
    expect(model.calls - callsBefore).toBe(2);

    // Worker 4 asks again for step 1 only and finishes the answer.
    await faults.replace();
    const res = await posted;
    expect(res.statusCode, res.body).toBe(200);
    const { ids, parts, done } = readStream(res.body);

    // The model was asked for step 0 once and for step 1 twice (the attempt in flight when worker 3 died), with the same transcript.
    expect(model.calls - callsBefore).toBe(3);
    const [first, second, third] = model.requests.slice(callsBefore);
    expect(first!.messages.some((m) => m.role === 'tool')).toBe(false);
    const toolMessages = (r: ChatModelServerRequest) => r.messages.filter((m) => m.role === 'tool' || m.tool_calls);
    expect(toolMessages(third!)).toEqual(toolMessages(second!));
    const callId = toolMessages(second!)[0]!.tool_calls![0]!.id;

    // The stream: whole, in order, ending with finish then [DONE]; one card for the one tool call.
    expect(done).toBe(true);
    expect(ids).toEqual(parts.map((_, n) => n + 1));
    expect(parts.at(-1)).toMatchObject({
      type: 'finish',
      messageMetadata: { message_id: messageId, conversation_id: conversationId },
    });
    const count = (type: string) => parts.filter((p) => p.type === type).length;
    expect({
      start: count('start'),
      inputs: count('tool-input-available'),
      outputs: count('tool-output-available'),
      cards: count('data-proposal'),
      steps: count('finish-step'),
    }).toEqual({
      start: 1,
      inputs: 1,
      outputs: 1,
      cards: 1,
      steps: 2,
    });
    expect(parts.find((p) => p.type === 'tool-input-available')).toMatchObject({
      toolCallId: callId,
      toolName: 'add_column',
    });
    expect(parts.filter((p) => p.type === 'data-notice').map((p) => (p.data as { code: string }).code)).toEqual([
      'step_restarted',
    ]);
    // The text: step 0's, and step 1's from its second attempt, whole; the first attempt's words are a beginning of them.
    expect(textOf(parts, 'text-0-1')).toBe(opening);
    expect(textOf(parts, 'text-1-2')).toBe(words);
    const cut = textOf(parts, 'text-1-1');
    expect(cut.length).toBeGreaterThan(0);
    expect(words.startsWith(cut) && cut.length < words.length).toBe(true);

    // The card: one, for the recorded call.
    const cards = (await api.get(`/assistant/actions/?conversation_id=${conversationId}`)).json<{
      total_count: number;
      actions: { id: string; status: string }[];
    }>();
    expect(cards.total_count).toBe(1);
    expect(cards.actions[0]).toMatchObject({ status: 'pending' });
    expect(await stack.sql`select tool_call_id from assistant_proposals where message_id = ${messageId}`).toEqual([
      { tool_call_id: callId },
    ]);
    expect(parts.find((p) => p.type === 'data-proposal')).toMatchObject({ id: cards.actions[0]!.id });
    expect(
      (await stack.sql`select step from assistant_model_steps where message_id = ${messageId} order by step`).map(
        (r) => r.step,
      ),
    ).toEqual([0, 1]);

    // The message keeps the whole text; read again afterwards, the stream is the same and ends the same way.
    const read = (await api.get(`/assistant/conversations/${conversationId}/`)).json<{
      messages: { id: string; content: string; status: string }[];
    }>();
    expect(read.messages[1]).toMatchObject({ id: messageId, content: opening + words, status: 'complete' });
    const again = readStream(
      (await api.get(`/assistant/conversations/${conversationId}/messages/${messageId}/stream/`)).body,
    );
    expect(again).toEqual({ ids, parts, done: true });
    expect(model.calls - callsBefore).toBe(3);
  });
});

describe('a worker drained mid-answer', () => {
  it('resumes an answer whose worker is shut down while the model is answering (a deploy: SIGTERM, then the grace time passes)', async () => {
    const api = client(paid);
    const words = 'Here is the whole answer, asked again after the deploy.';
    const held = gate();
    let calls = 0;
    script = () => {
      calls += 1;
      return calls === 1 ? { content: words, hold: held.opened } : { content: words };
    };
    // A drained worker's model call is cancelled once the grace time passes: like a killed
    // worker's, that attempt must be asked again on the next worker, not end the answer.
    // A worker with a grace time, as the service's worker has one (20 s there, worker/worker.ts).
    await faults.current!.drain();
    await faults.start({ shutdownGraceMs: 300 });
    const callsBefore = model.calls;
    const conversationId = await api.conversation();
    const posted = api.post(`/assistant/conversations/${conversationId}/messages/`, { content: 'Say something' });
    await eventually(
      async () => model.calls - callsBefore,
      (n) => n === 1,
    );
    await faults.current!.drain();
    await faults.start();
    held.open();
    const { parts, done } = readStream((await posted).body);
    expect(done).toBe(true);
    expect(parts.at(-1)!.type, JSON.stringify(parts.at(-1))).toBe('finish');
    expect(textOf(parts, 'text-0-2')).toBe(words);
    expect(model.calls - callsBefore).toBe(2);
  });
});

describe('a worker killed during an apply', () => {
  it('applies a priced card once and charges it once through two kills', async () => {
    const ws = await stack.createWorkspace('paid');
    await grantWorkspaceCredits(stack.sql, { workspaceId: ws.workspaceId, amount: 1_000, causeKey: 'fault-test' });
    const api = client(ws);
    const tables = tablesClient(stack, api.headers);
    const tableId = (await tables.table({ name: 'Companies' })).id;
    const urlColumn = (await tables.column(tableId, { kind: 'input', name: 'Website' })).id;
    for (const n of [1, 2, 3]) {
      expect(
        (await tables.post(`/tables/${tableId}/rows/`, { cells: { [urlColumn]: `${site.url}/apply-${n}` } }))
          .statusCode,
      ).toBe(201);
    }
    script = callsThenWords([addSiteTitleColumn(tableId, urlColumn)]);
    const conversationId = await api.conversation();
    const asked = await api.post(`/assistant/conversations/${conversationId}/messages/`, {
      content: 'Read each company site',
    });
    const proposal = readStream(asked.body).parts.find((p) => p.type === 'data-proposal')!.data as {
      id: string;
      price_credits: number;
    };
    expect(proposal).toMatchObject({ price_credits: 3, status: 'pending' });
    const before = (await api.get('/credits/')).json<{ available: number; spent: number; held: number }>();

    // The site holds its answers; the apply holds the quote, starts the run, and the worker dies
    // before Temporal hears of the apply, while the run's rows wait on the site.
    const site1 = gate();
    siteHeld = site1.opened;
    const siteBefore = site.requests.length;
    const applied = faults.crashAfter('decideCard');
    const approving = api.post(`/assistant/actions/${proposal.id}/approve/`, {});
    await applied;
    await eventually(
      async () => site.requests.length - siteBefore,
      (n) => n >= 1,
    );
    // The next worker applies the card again (the same decision) and runs the rows again; it dies
    // right after it ends the card (charged), before Temporal hears of that.
    const ended = faults.crashAfter('checkCardRun', (_, result) => (result as { done: boolean }).done);
    await faults.replace();
    site1.open();
    siteHeld = null;
    await ended;
    await faults.replace();

    const approved = await approving;
    expect(approved.statusCode, approved.body).toBe(200);
    expect(['applying', 'applied']).toContain(approved.json().status);
    const card = await eventually(
      async () =>
        (await api.get(`/assistant/actions/${proposal.id}/`)).json<{
          status: string;
          charged_credits: number;
          applied_result: { made: number; entity_id: string };
        }>(),
      (c) => c.status !== 'applying',
      200,
    );
    expect(card).toMatchObject({ status: 'applied', charged_credits: 3, applied_result: { opens: 'run', made: 3 } });

    // One hold and one charge for the card, nothing else moved.
    const [hold] = await stack.sql<
      { hold_id: string }[]
    >`select hold_id from assistant_proposals where id = ${proposal.id}`;
    const ledger = (await api.get('/credits/ledger/')).json<{
      movements: { kind: string; amount: number; cause_key: string; hold_id: string | null }[];
    }>();
    const movements = ledger.movements.filter((m) => m.kind !== 'grant');
    expect(movements.map((m) => [m.kind, m.amount, m.cause_key, m.hold_id])).toEqual([
      ['charge', 3, `charge:${hold!.hold_id}`, hold!.hold_id],
      ['hold', 3, `hold:assistant-card:${proposal.id}`, hold!.hold_id],
    ]);
    expect(
      await stack.sql`select id, cause_key, status, charged from credit_holds where workspace_id = ${ws.workspaceId}`,
    ).toEqual([{ id: hold!.hold_id, cause_key: `assistant-card:${proposal.id}`, status: 'charged', charged: 3 }]);
    const after = (await api.get('/credits/')).json<{ available: number; spent: number; held: number }>();
    expect({
      available: before.available - after.available,
      spent: after.spent - before.spent,
      held: after.held,
    }).toEqual({ available: 3, spent: 3, held: 0 });

    // The rows the dead worker was reading were read again by the next one.
    expect(site.requests.length - siteBefore).toBeGreaterThan(3);
    // One run, every row read once to a result, and the log: one decision and one outcome.
    const runs = await stack.sql<
      { id: string; status: string; credits_charged: number }[]
    >`select id, status, credits_charged from column_runs where funding_hold_id = ${hold!.hold_id}`;
    expect(runs).toEqual([{ id: card.applied_result.entity_id, status: 'completed', credits_charged: 3 }]);
    const activity = (await api.get(`/assistant/activity/?conversation_id=${conversationId}`)).json<{
      activity: { proposal_id: string; decision: string; outcome: string | null; actor_kind: string }[];
    }>();
    expect(
      activity.activity.filter((a) => a.proposal_id === proposal.id).map((a) => [a.decision, a.outcome, a.actor_kind]),
    ).toEqual([
      ['approved', 'done', 'system'],
      ['approved', null, 'api'],
    ]);
    expect((await api.get(`/assistant/actions/${proposal.id}/`)).json().status).toBe('applied');
  });
});

describe('the stream over real HTTP', () => {
  let base: string;
  beforeAll(async () => {
    // inject answers only once a response has ended: the stream is read over a socket.
    await faults.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(faults.app.server.address() as AddressInfo).port}`;
  });

  it('resumes after a dropped connection with Last-Event-ID: nothing repeated, nothing lost, one model call', async () => {
    const api = client(paid);
    const words = 'One, two, three, four, five, six, seven, eight, nine, ten, eleven, twelve.';
    script = () => ({ content: words, chunkDelayMs: 60 });
    const callsBefore = model.calls;
    const conversationId = await api.conversation();

    // The answer as a browser asks for it, read for a few events, then the connection drops.
    const agent = new Agent();
    const controller = new AbortController();
    const res = await fetch(`${base}/assistant/conversations/${conversationId}/messages/`, {
      method: 'POST',
      headers: { ...api.headers, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ content: 'Count to twelve' }),
      signal: controller.signal,
      dispatcher: agent,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(res.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    const firstRead: { id: number; part: Part }[] = [];
    const decoder = new TextDecoder();
    let buffer = '';
    const reader = res.body!.getReader();
    while (firstRead.length < 5) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      for (let end = buffer.indexOf('\n\n'); end !== -1 && firstRead.length < 5; end = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const id = /^id: (\d+)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (id && data) firstRead.push({ id: Number(id), part: JSON.parse(data) as Part });
      }
    }
    controller.abort();
    await agent.destroy().catch(() => undefined);
    expect(firstRead.map((e) => e.part.type)).toEqual([
      'start',
      'start-step',
      'text-start',
      'text-delta',
      'text-delta',
    ]);
    const messageId = firstRead[0]!.part.messageId as string;
    const lastId = firstRead.at(-1)!.id;
    // A few parts are written while nobody reads, so the reconnect reads some from Postgres and the rest live.
    await eventually(
      () => partsOf(messageId),
      (rows) => rows.length >= lastId + 2,
      10,
    );

    const resumed = await SseStream.open(
      `${base}/assistant/conversations/${conversationId}/messages/${messageId}/stream/`,
      {
        ...api.headers,
        accept: 'text/event-stream',
        'last-event-id': String(lastId),
      },
    );
    let rest;
    try {
      expect(resumed.response.status).toBe(200);
      rest = await resumed.rest();
    } finally {
      resumed.close();
    }
    expect(rest.at(-1)).toMatchObject({ data: '[DONE]', id: undefined });
    const restParts = rest.slice(0, -1).map((e) => ({ id: Number(e.id), part: JSON.parse(e.data) as Part }));
    expect(restParts.at(-1)!.part.type).toBe('finish');
    const all = [...firstRead, ...restParts];
    expect(all.map((e) => e.id)).toEqual(all.map((_, n) => n + 1));
    // What the two connections read together is the whole answer, as a read from the start gives it.
    const whole = readStream(
      (await api.get(`/assistant/conversations/${conversationId}/messages/${messageId}/stream/`)).body,
    );
    expect(whole.done).toBe(true);
    expect(all.map((e) => e.part)).toEqual(whole.parts);
    expect(textOf(whole.parts, 'text-0-1')).toBe(words);
    expect(whole.parts.filter((p) => p.type === 'text-delta').length).toBeGreaterThan(3);
    expect(model.calls - callsBefore).toBe(1);
  });
});
