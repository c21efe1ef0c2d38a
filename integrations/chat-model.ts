/**
 * The one door to a chat model: an OpenAI-compatible chat-completions API (the `openai` package;
 * OPENAI_API_KEY, OPENAI_MODEL and optionally OPENAI_BASE_URL). Everything that asks a model
 * (the AI column, saved agents, the outbound agent, training sessions, the assistant) takes a
 * `ChatModel`, so tests pass one pointed at a local server speaking the same protocol. The
 * client's own retries are off: the calling activity's retry policy is the one place that retries.
 * `complete` asks for one whole answer; `stream` yields the answer as it arrives, tool calls
 * included.
 */
import OpenAI, { APIConnectionError, APIError, APIUserAbortError } from 'openai';
import type { ChatCompletionCreateParamsBase, ChatCompletionMessageParam } from 'openai/resources/chat/completions';

export interface ChatModelConfig {
  apiKey: string;
  model: string;
  baseUrl?: string;
  timeoutSeconds?: number;
}

/** A tool call the model made; `arguments` is the model's raw JSON text, parsed by whoever runs the tool. */
export interface ChatToolCall {
  id: string;
  name: string;
  arguments: string;
}

/**
 * A message of the conversation. An assistant message may carry the tool calls the model made, and
 * each call's result goes back as a `tool` message naming the call.
 */
export type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls?: ChatToolCall[] }
  | { role: 'tool'; toolCallId: string; content: string };

/** A tool offered to the model; `parameters` is the JSON Schema (an object schema) of its arguments. */
export interface ChatTool {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export interface ChatRequest {
  messages: ChatMessage[];
  /** Ask for a JSON object (`response_format: json_object`); the answer is still text to parse. */
  json?: boolean;
  maxTokens?: number;
  temperature?: number;
  signal?: AbortSignal;
}

export interface ChatAnswer {
  /** The answer's text, trimmed; empty when the model said nothing. */
  content: string;
  promptTokens: number;
  completionTokens: number;
}

export type ChatFinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'function_call';

/**
 * What `stream` yields: text as it arrives, then each tool call once its arguments are whole (in
 * the order the model made them), then one `finish` with the token counts.
 */
export type ChatStreamEvent =
  | { type: 'text-delta'; delta: string }
  | { type: 'tool-call'; call: ChatToolCall }
  | { type: 'finish'; finishReason: ChatFinishReason; promptTokens: number; completionTokens: number };

export interface ChatModel {
  /** The model's name, recorded on everything it wrote (`model_key`). */
  readonly key: string;
  readonly timeoutSeconds: number;
  complete(request: ChatRequest): Promise<ChatAnswer>;
  /**
   * The answer as it arrives. `timeoutSeconds` bounds the whole stream, as it bounds `complete`.
   * Every failure, before or during the stream, is a `ChatModelError`; a stream that ends without
   * a finish reason (a dropped connection) is a retryable one, and an aborted `signal` ends it with
   * a `ChatModelError` that is not retryable.
   */
  stream(request: ChatRequest & { tools?: ChatTool[] }): AsyncIterable<ChatStreamEvent>;
}

/** A failed call; `retryable` says whether the same call may succeed later (timeouts, 429, 5xx). */
export class ChatModelError extends Error {
  override name = 'ChatModelError';
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

/** The configuration from the environment, or null when a key or a model is missing. */
export function chatModelConfigFrom(env: Record<string, string | undefined>): ChatModelConfig | null {
  const apiKey = env.OPENAI_API_KEY?.trim();
  const model = env.OPENAI_MODEL?.trim();
  if (!apiKey || !model) return null;
  return { apiKey, model, ...(env.OPENAI_BASE_URL?.trim() ? { baseUrl: env.OPENAI_BASE_URL.trim() } : {}) };
}

function failure(error: unknown, timeoutSeconds: number): ChatModelError {
  if (error instanceof ChatModelError) return error;
  if (error instanceof APIUserAbortError)
    return new ChatModelError(`The model did not answer within ${timeoutSeconds} seconds.`, true);
  if (error instanceof APIConnectionError)
    return new ChatModelError(`The model API could not be reached: ${error.message}`, true);
  if (error instanceof APIError) {
    // instanceof leaves the class's type parameters `any`.
    const status = error.status as number | undefined;
    // An error event inside a stream has no status: the answer broke off on the provider's side.
    if (status === undefined)
      return new ChatModelError(`The model API failed mid-answer: ${error.message}`.slice(0, 500), true);
    const retryable = status === 408 || status === 409 || status === 429 || status >= 500;
    return new ChatModelError(`The model API answered ${status}: ${error.message}`.slice(0, 500), retryable);
  }
  return new ChatModelError(`The model call failed: ${(error as Error).message}`, true);
}

/** A message in the wire shape: tool calls as `tool_calls` of type function, results as `tool_call_id`. */
function wireMessage(message: ChatMessage): ChatCompletionMessageParam {
  if (message.role === 'tool') return { role: 'tool', tool_call_id: message.toolCallId, content: message.content };
  if (message.role === 'assistant' && message.toolCalls?.length) {
    return {
      role: 'assistant',
      content: message.content || null,
      tool_calls: message.toolCalls.map((call) => ({
        id: call.id,
        type: 'function',
        function: { name: call.name, arguments: call.arguments },
      })),
    };
  }
  return { role: message.role, content: message.content };
}

/** The parameters `complete` and `stream` share. */
function requestBody(model: string, request: ChatRequest & { tools?: ChatTool[] }): ChatCompletionCreateParamsBase {
  return {
    model,
    messages: request.messages.map(wireMessage),
    ...(request.tools?.length
      ? {
          tools: request.tools.map((tool) => ({
            type: 'function' as const,
            function: { name: tool.name, description: tool.description, parameters: tool.parameters },
          })),
        }
      : {}),
    ...(request.json ? { response_format: { type: 'json_object' as const } } : {}),
    ...(request.maxTokens ? { max_tokens: request.maxTokens } : {}),
    ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
  };
}

export function openAiChatModel(config: ChatModelConfig): ChatModel {
  const timeoutSeconds = config.timeoutSeconds ?? 60;
  const client = new OpenAI({
    apiKey: config.apiKey,
    baseURL: config.baseUrl,
    maxRetries: 0,
    timeout: timeoutSeconds * 1000,
  });
  return {
    key: config.model,
    timeoutSeconds,
    async complete(request) {
      const timeout = AbortSignal.timeout(timeoutSeconds * 1000);
      try {
        const completion = await client.chat.completions.create(
          { ...requestBody(config.model, request), stream: false },
          { signal: request.signal ? AbortSignal.any([request.signal, timeout]) : timeout },
        );
        return {
          content: completion.choices[0]?.message?.content?.trim() ?? '',
          promptTokens: completion.usage?.prompt_tokens ?? 0,
          completionTokens: completion.usage?.completion_tokens ?? 0,
        };
      } catch (error) {
        throw failure(error, timeoutSeconds);
      }
    },

    async *stream(request) {
      const timeout = AbortSignal.timeout(timeoutSeconds * 1000);
      const signal = request.signal ? AbortSignal.any([request.signal, timeout]) : timeout;
      // An abort mid-stream ends the package's iteration quietly, so each abort is checked by hand.
      const aborted = () =>
        request.signal?.aborted
          ? new ChatModelError('The model call was cancelled.', false)
          : timeout.aborted
            ? new ChatModelError(`The model did not finish within ${timeoutSeconds} seconds.`, true)
            : null;
      // Tool calls arrive as pieces keyed by `index`: the id and name first, the arguments in parts.
      const calls = new Map<number, ChatToolCall>();
      let finishReason: ChatFinishReason | null = null;
      let promptTokens = 0;
      let completionTokens = 0;
      try {
        const chunks = await client.chat.completions.create(
          { ...requestBody(config.model, request), stream: true, stream_options: { include_usage: true } },
          { signal },
        );
        for await (const chunk of chunks) {
          // With include_usage the counts come in a last chunk of their own, with no choices.
          if (chunk.usage) ({ prompt_tokens: promptTokens, completion_tokens: completionTokens } = chunk.usage);
          const choice = chunk.choices[0];
          if (!choice) continue;
          if (choice.delta?.content) yield { type: 'text-delta', delta: choice.delta.content };
          for (const piece of choice.delta?.tool_calls ?? []) {
            const call = calls.get(piece.index) ?? { id: '', name: '', arguments: '' };
            if (piece.id) call.id = piece.id;
            if (piece.function?.name) call.name = piece.function.name;
            if (piece.function?.arguments) call.arguments += piece.function.arguments;
            calls.set(piece.index, call);
          }
          if (choice.finish_reason) finishReason = choice.finish_reason;
        }
      } catch (error) {
        throw aborted() ?? failure(error, timeoutSeconds);
      }
      const stopped = aborted();
      if (stopped) throw stopped;
      if (!finishReason) throw new ChatModelError('The model API closed the stream before the answer finished.', true);
      for (const [index, call] of [...calls].sort(([a], [b]) => a - b)) {
        yield {
          type: 'tool-call',
          call: { id: call.id || `call_${index}`, name: call.name, arguments: call.arguments || '{}' },
        };
      }
      yield { type: 'finish', finishReason, promptTokens, completionTokens };
    },
  };
}

/** The environment's chat model, or null when none is configured. */
export function chatModelFrom(env: Record<string, string | undefined>): ChatModel | null {
  const config = chatModelConfigFrom(env);
  return config ? openAiChatModel(config) : null;
}
