/**
 * The one door to a chat model: an OpenAI-compatible chat-completions API (the `openai` package;
 * OPENAI_API_KEY, OPENAI_MODEL and optionally OPENAI_BASE_URL). Everything that asks a model
 * (the AI column, saved agents, the outbound agent, training sessions) takes a `ChatModel`, so
 * tests pass one pointed at a local server speaking the same protocol. The client's own retries
 * are off: the calling activity's retry policy is the one place that retries.
 */
import OpenAI, { APIConnectionError, APIError, APIUserAbortError } from 'openai';

export interface ChatModelConfig {
  apiKey: string;
  model: string;
  baseUrl?: string;
  timeoutSeconds?: number;
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
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

export interface ChatModel {
  /** The model's name, recorded on everything it wrote (`model_key`). */
  readonly key: string;
  readonly timeoutSeconds: number;
  complete(request: ChatRequest): Promise<ChatAnswer>;
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
  if (error instanceof APIUserAbortError) return new ChatModelError(`The model did not answer within ${timeoutSeconds} seconds.`, true);
  if (error instanceof APIConnectionError) return new ChatModelError(`The model API could not be reached: ${error.message}`, true);
  if (error instanceof APIError) {
    const status = error.status ?? 0;
    const retryable = status === 408 || status === 409 || status === 429 || status >= 500;
    return new ChatModelError(`The model API answered ${status}: ${error.message}`.slice(0, 500), retryable);
  }
  return new ChatModelError(`The model call failed: ${(error as Error).message}`, true);
}

export function openAiChatModel(config: ChatModelConfig): ChatModel {
  const timeoutSeconds = config.timeoutSeconds ?? 60;
  const client = new OpenAI({ apiKey: config.apiKey, baseURL: config.baseUrl, maxRetries: 0, timeout: timeoutSeconds * 1000 });
  return {
    key: config.model,
    timeoutSeconds,
    async complete(request) {
      const timeout = AbortSignal.timeout(timeoutSeconds * 1000);
      try {
        const completion = await client.chat.completions.create(
          {
            model: config.model,
            messages: request.messages,
            ...(request.json ? { response_format: { type: 'json_object' as const } } : {}),
            ...(request.maxTokens ? { max_tokens: request.maxTokens } : {}),
            ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
          },
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
  };
}

/** The environment's chat model, or null when none is configured. */
export function chatModelFrom(env: Record<string, string | undefined>): ChatModel | null {
  const config = chatModelConfigFrom(env);
  return config ? openAiChatModel(config) : null;
}
