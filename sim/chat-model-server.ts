/**
 * A local chat-completions server that speaks the OpenAI protocol the way OpenAI does, streaming
 * and tool calls included: POST /v1/chat/completions answers a `chat.completion`, or with
 * `stream: true` a series of server-sent `chat.completion.chunk` events ending in `data: [DONE]`.
 * Each answer is scripted by the test, which may also hold an answer back (to kill a worker while
 * a call is in flight), slow the chunks down, or drop the connection mid-stream.
 */
import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { serveHttp } from './local-http.js';

/** A message as it comes over the wire. */
export interface WireChatMessage {
  role: string;
  content: string | null;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

/** The request body, parsed. */
export interface ChatModelServerRequest {
  model: string;
  messages: WireChatMessage[];
  tools?: {
    type: 'function';
    function: { name: string; description?: string; parameters?: Record<string, unknown> };
  }[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  [key: string]: unknown;
}

export interface ChatModelScript {
  /** Anything but 200 answers OpenAI's error body; 429 adds `retry-after`. */
  status?: number;
  content?: string;
  /** Tool calls of the answer, in order; `arguments` is sent as JSON (a string is sent as it is). */
  toolCalls?: { name: string; arguments: unknown }[];
  /** A pause before each streamed chunk. */
  chunkDelayMs?: number;
  /** The answer waits for this promise. */
  hold?: Promise<void>;
  /** Streamed answers only: the connection is destroyed after this many chunks. */
  dropAfterChunks?: number;
  /** Defaults: a count of the request's and the answer's text, about four characters a token. */
  usage?: { promptTokens: number; completionTokens: number };
}

export interface ChatModelServer {
  /** The base URL, ending in /v1 (what OPENAI_BASE_URL takes). */
  url: string;
  /** Every request to the completions path, in arrival order. */
  requests: ChatModelServerRequest[];
  /** How many requests reached the completions path. */
  readonly calls: number;
  close: () => Promise<void>;
}

const errorTypes: Record<number, { type: string; code: string | null }> = {
  400: { type: 'invalid_request_error', code: null },
  401: { type: 'invalid_request_error', code: 'invalid_api_key' },
  404: { type: 'invalid_request_error', code: 'model_not_found' },
  429: { type: 'requests', code: 'rate_limit_exceeded' },
};

/** Text in pieces of at most `size` characters (whole code points), at least one piece. */
function pieces(text: string, size: number): string[] {
  const chars = Array.from(text);
  const out: string[] = [];
  for (let i = 0; i < chars.length; i += size) out.push(chars.slice(i, i + size).join(''));
  return out.length ? out : [''];
}

const tokens = (text: string) => Math.ceil(text.length / 4);

export async function serveChatModel(
  answer: (request: ChatModelServerRequest) => ChatModelScript | Promise<ChatModelScript>,
): Promise<ChatModelServer> {
  const requests: ChatModelServerRequest[] = [];
  const http = await serveHttp(async (req, res, body) => {
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.statusCode = 404;
      res.setHeader('content-type', 'application/json');
      return void res.end(
        JSON.stringify({
          error: {
            message: `Unknown path ${req.url}`,
            type: 'invalid_request_error',
            param: null,
            code: 'unknown_url',
          },
        }),
      );
    }
    const request = JSON.parse(body) as ChatModelServerRequest;
    requests.push(request);
    const n = requests.length;
    const script = await answer(request);
    if (script.hold) await script.hold;
    if (gone(res)) return;

    const status = script.status ?? 200;
    if (status !== 200) {
      const kind = errorTypes[status] ?? { type: status >= 500 ? 'server_error' : 'invalid_request_error', code: null };
      res.statusCode = status;
      res.setHeader('content-type', 'application/json');
      if (status === 429) res.setHeader('retry-after', '1');
      return void res.end(
        JSON.stringify({ error: { message: `local error ${status}`, type: kind.type, param: null, code: kind.code } }),
      );
    }

    const id = `chatcmpl-local-${n}`;
    const created = 1_700_000_000 + n;
    const content = script.content ?? '';
    const calls = (script.toolCalls ?? []).map((call, i) => ({
      id: `call_local_${n}_${i}`,
      name: call.name,
      arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {}),
    }));
    const finishReason = calls.length ? 'tool_calls' : 'stop';
    const promptTokens = script.usage?.promptTokens ?? tokens(JSON.stringify(request.messages));
    const completionTokens =
      script.usage?.completionTokens ?? tokens(content + calls.map((c) => c.name + c.arguments).join(''));
    const usage = {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    };

    if (!request.stream) {
      res.setHeader('content-type', 'application/json');
      return void res.end(
        JSON.stringify({
          id,
          object: 'chat.completion',
          created,
          model: request.model,
          choices: [
            {
              index: 0,
              message: {
                role: 'assistant',
                content: content || (calls.length ? null : ''),
                refusal: null,
                ...(calls.length
                  ? {
                      tool_calls: calls.map((c) => ({
                        id: c.id,
                        type: 'function',
                        function: { name: c.name, arguments: c.arguments },
                      })),
                    }
                  : {}),
              },
              logprobs: null,
              finish_reason: finishReason,
            },
          ],
          usage,
          system_fingerprint: 'fp_local',
        }),
      );
    }

    // The chunks, as OpenAI sends them: the role, the text in pieces, each tool call's id and name
    // then its arguments in pieces, the finish reason, and the usage when asked for.
    const withUsage = request.stream_options?.include_usage === true;
    const chunk = (
      delta: Record<string, unknown> | null,
      finish: string | null = null,
      extra: Record<string, unknown> = {},
    ) => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model: request.model,
      system_fingerprint: 'fp_local',
      choices: delta ? [{ index: 0, delta, logprobs: null, finish_reason: finish }] : [],
      ...(withUsage ? { usage: null } : {}),
      ...extra,
    });
    const chunks: unknown[] = [
      chunk({ role: 'assistant', content: calls.length && !content ? null : '', refusal: null }),
    ];
    if (content) for (const piece of pieces(content, 4)) chunks.push(chunk({ content: piece }));
    calls.forEach((call, index) => {
      chunks.push(
        chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] }),
      );
      for (const piece of pieces(call.arguments, 8))
        chunks.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
    });
    chunks.push(chunk({}, finishReason));
    if (withUsage) chunks.push(chunk(null, null, { usage }));

    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    await writeEvents(res, chunks, script);
  });
  return {
    url: `${http.url}/v1`,
    requests,
    get calls() {
      return requests.length;
    },
    close: http.close,
  };
}

/** The client went away (or the server is closing): nothing more to write. */
const gone = (res: ServerResponse) => res.destroyed || !res.socket || res.socket.destroyed;

async function writeEvents(res: ServerResponse, chunks: unknown[], script: ChatModelScript) {
  for (const [i, data] of chunks.entries()) {
    if (script.dropAfterChunks !== undefined && i >= script.dropAfterChunks) return void res.socket?.destroy();
    if (script.chunkDelayMs) await sleep(script.chunkDelayMs);
    if (gone(res)) return;
    // Each chunk leaves before the next is written (and before a drop), as a model's would.
    await new Promise<void>((resolve) => res.write(`data: ${JSON.stringify(data)}\n\n`, () => resolve()));
  }
  res.end('data: [DONE]\n\n');
}
