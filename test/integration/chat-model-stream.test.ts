/**
 * The chat model's stream, against a local server speaking OpenAI's protocol: text in deltas,
 * tool calls assembled from their pieces, usage, and every way a call fails, before or during the
 * stream. No database or Temporal; it lives here because unit tests open no sockets.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ChatModelError,
  openAiChatModel,
  type ChatModel,
  type ChatStreamEvent,
} from '../../integrations/chat-model.js';
import {
  serveChatModel,
  type ChatModelScript,
  type ChatModelServer,
  type ChatModelServerRequest,
} from '../../sim/chat-model-server.js';

let script: (request: ChatModelServerRequest) => ChatModelScript = () => ({ content: '' });
let server: ChatModelServer;
let model: ChatModel;

beforeAll(async () => {
  server = await serveChatModel((request) => script(request));
  model = openAiChatModel({ apiKey: 'local-key', model: 'local-model', baseUrl: server.url, timeoutSeconds: 10 });
});
afterAll(async () => {
  await server.close();
});

async function collect(events: AsyncIterable<ChatStreamEvent>): Promise<ChatStreamEvent[]> {
  const out: ChatStreamEvent[] = [];
  for await (const event of events) out.push(event);
  return out;
}

async function failureOf(run: Promise<unknown>): Promise<ChatModelError> {
  const error = await run.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ChatModelError);
  return error as ChatModelError;
}

const user = (content: string) => ({ role: 'user' as const, content });

describe('stream', () => {
  it('yields the text in several deltas, in order and whole, then the finish with the usage', async () => {
    const text = 'Hello there, this answer arrives in pieces — ünïcødé included.';
    script = () => ({ content: text, usage: { promptTokens: 21, completionTokens: 13 } });
    const events = await collect(model.stream({ messages: [{ role: 'system', content: 'Be brief.' }, user('Hi')] }));
    const deltas = events.filter((e) => e.type === 'text-delta').map((e) => e.delta);
    expect(deltas.length).toBeGreaterThan(3);
    expect(deltas.join('')).toBe(text);
    expect(events.at(-1)).toEqual({ type: 'finish', finishReason: 'stop', promptTokens: 21, completionTokens: 13 });
    expect(events.filter((e) => e.type === 'finish')).toHaveLength(1);
    const request = server.requests.at(-1)!;
    expect(request).toMatchObject({ model: 'local-model', stream: true, stream_options: { include_usage: true } });
    expect(request.messages).toEqual([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ]);
    expect(request.tools).toBeUndefined();
  });

  it('assembles two tool calls from their pieces, with their JSON arguments, after the text', async () => {
    const lookup = {
      table_id: 'tbl_1',
      filter: { city: 'Zürich', tags: ['a', 'b'] },
      note: 'quotes " and \\ backslashes',
    };
    script = () => ({
      content: 'Let me look.',
      toolCalls: [
        { name: 'getTable', arguments: lookup },
        { name: 'listTables', arguments: {} },
      ],
    });
    const tools = [
      {
        name: 'getTable',
        description: 'Read a table',
        parameters: { type: 'object', properties: { table_id: { type: 'string' } }, required: ['table_id'] },
      },
      { name: 'listTables', description: 'List tables', parameters: { type: 'object', properties: {} } },
    ];
    const events = await collect(model.stream({ messages: [user('Show me table 1')], tools }));
    expect(events.map((e) => e.type)).toEqual([
      ...events.filter((e) => e.type === 'text-delta').map(() => 'text-delta'),
      'tool-call',
      'tool-call',
      'finish',
    ]);
    const calls = events.flatMap((e) => (e.type === 'tool-call' ? [e.call] : []));
    expect(calls.map((c) => c.name)).toEqual(['getTable', 'listTables']);
    expect(JSON.parse(calls[0]!.arguments)).toEqual(lookup);
    expect(JSON.parse(calls[1]!.arguments)).toEqual({});
    expect(new Set(calls.map((c) => c.id)).size).toBe(2);
    expect(events.at(-1)).toMatchObject({ type: 'finish', finishReason: 'tool_calls' });
    const finish = events.at(-1) as Extract<ChatStreamEvent, { type: 'finish' }>;
    expect(finish.promptTokens).toBeGreaterThan(0);
    expect(finish.completionTokens).toBeGreaterThan(0);
    expect(server.requests.at(-1)!.tools).toEqual(tools.map((t) => ({ type: 'function', function: t })));

    // The calls and their results go back in the wire shape.
    script = () => ({ content: 'Table 1 has 3 rows.' });
    const followUp = await collect(
      model.stream({
        messages: [
          user('Show me table 1'),
          { role: 'assistant', content: 'Let me look.', toolCalls: calls },
          { role: 'tool', toolCallId: calls[0]!.id, content: '{"rows":3}' },
          { role: 'tool', toolCallId: calls[1]!.id, content: '[]' },
        ],
        tools,
      }),
    );
    expect(followUp.at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });
    expect(server.requests.at(-1)!.messages).toEqual([
      { role: 'user', content: 'Show me table 1' },
      {
        role: 'assistant',
        content: 'Let me look.',
        tool_calls: calls.map((c) => ({
          id: c.id,
          type: 'function',
          function: { name: c.name, arguments: c.arguments },
        })),
      },
      { role: 'tool', tool_call_id: calls[0]!.id, content: '{"rows":3}' },
      { role: 'tool', tool_call_id: calls[1]!.id, content: '[]' },
    ]);
  });

  it('sends an assistant message of tool calls alone with null content', async () => {
    script = () => ({ content: 'ok' });
    await collect(
      model.stream({
        messages: [
          user('x'),
          { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'listTables', arguments: '{}' }] },
          { role: 'tool', toolCallId: 'c1', content: '[]' },
        ],
      }),
    );
    expect(server.requests.at(-1)!.messages[1]).toEqual({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'listTables', arguments: '{}' } }],
    });
  });

  it('maps 429 and 5xx to a retryable ChatModelError and 400 to one that is not', async () => {
    for (const [status, retryable] of [
      [429, true],
      [500, true],
      [503, true],
      [400, false],
      [401, false],
    ] as const) {
      script = () => ({ status });
      const error = await failureOf(collect(model.stream({ messages: [user('Hi')] })));
      expect({ status, retryable: error.retryable, message: error.message }).toEqual({
        status,
        retryable,
        message: expect.stringContaining(`answered ${status}`),
      });
    }
  });

  it('fails retryably when the connection drops mid-stream, after the text so far', async () => {
    script = () => ({ content: 'This answer will never be finished by the server.', dropAfterChunks: 4 });
    const seen: ChatStreamEvent[] = [];
    const error = await failureOf(
      (async () => {
        for await (const event of model.stream({ messages: [user('Hi')] })) seen.push(event);
      })(),
    );
    expect(error.retryable).toBe(true);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((e) => e.type === 'text-delta')).toBe(true);
  });

  it('fails retryably when tool calls were cut off before the finish: no half-assembled call is yielded', async () => {
    script = () => ({
      toolCalls: [{ name: 'getTable', arguments: { table_id: 'tbl_123456789' } }],
      dropAfterChunks: 3,
    });
    const seen: ChatStreamEvent[] = [];
    const error = await failureOf(
      (async () => {
        for await (const event of model.stream({ messages: [user('Hi')] })) seen.push(event);
      })(),
    );
    expect(error.retryable).toBe(true);
    expect(seen.filter((e) => e.type === 'tool-call')).toEqual([]);
  });

  it('stops when the signal aborts mid-stream, with an error that is not retryable', async () => {
    const text = 'x'.repeat(400);
    script = () => ({ content: text, chunkDelayMs: 20 });
    const controller = new AbortController();
    const seen: string[] = [];
    const started = Date.now();
    const error = await failureOf(
      (async () => {
        for await (const event of model.stream({ messages: [user('Hi')], signal: controller.signal })) {
          if (event.type === 'text-delta') seen.push(event.delta);
          if (seen.length === 3) controller.abort();
        }
      })(),
    );
    expect(error.retryable).toBe(false);
    expect(error.message).toContain('cancelled');
    expect(seen.join('').length).toBeLessThan(text.length);
    expect(Date.now() - started).toBeLessThan(1500); // 100 chunks of 20 ms would take 2 s
  });

  it('stops when the signal aborts before the model answers', async () => {
    let release!: () => void;
    script = () => ({ content: 'late', hold: new Promise<void>((resolve) => (release = resolve)) });
    const controller = new AbortController();
    const run = failureOf(collect(model.stream({ messages: [user('Hi')], signal: controller.signal })));
    await expect.poll(() => server.requests.at(-1)?.messages[0]?.content === 'Hi' && release !== undefined).toBe(true);
    controller.abort();
    const error = await run;
    release();
    expect(error.retryable).toBe(false);
  });

  it('times out retryably when the stream outlasts the timeout', async () => {
    const slow = openAiChatModel({ apiKey: 'local-key', model: 'local-model', baseUrl: server.url, timeoutSeconds: 1 });
    script = () => ({ content: 'y'.repeat(200), chunkDelayMs: 40 });
    const error = await failureOf(collect(slow.stream({ messages: [user('Hi')] })));
    expect(error.retryable).toBe(true);
    expect(error.message).toContain('1 seconds');
  });

  it('lets a consumer stop early by breaking out of the loop', async () => {
    script = () => ({ content: 'z'.repeat(200), chunkDelayMs: 10 });
    let count = 0;
    for await (const event of model.stream({ messages: [user('Hi')] })) {
      if (event.type === 'text-delta') count += 1;
      if (count === 2) break;
    }
    expect(count).toBe(2);
  });
});

describe('complete', () => {
  it('still answers whole against the same server, unstreamed', async () => {
    script = () => ({ content: '  A whole answer.  ', usage: { promptTokens: 7, completionTokens: 4 } });
    const answer = await model.complete({ messages: [user('Hi')], json: true, maxTokens: 50, temperature: 0.2 });
    expect(answer).toEqual({ content: 'A whole answer.', promptTokens: 7, completionTokens: 4 });
    const request = server.requests.at(-1)!;
    expect(request.stream).toBeFalsy();
    expect(request).toMatchObject({ response_format: { type: 'json_object' }, max_tokens: 50, temperature: 0.2 });
  });

  it('still maps errors the same way', async () => {
    script = () => ({ status: 429 });
    expect((await failureOf(model.complete({ messages: [user('Hi')] }))).retryable).toBe(true);
    script = () => ({ status: 400 });
    expect((await failureOf(model.complete({ messages: [user('Hi')] }))).retryable).toBe(false);
  });

  it('counts the calls it served', () => {
    expect(server.calls).toBe(server.requests.length);
    expect(server.calls).toBeGreaterThan(10);
  });
});
