/**
 * The AI column: an instruction answered for each row by a chat model on an OpenAI-compatible
 * API (the `openai` package; OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL). Without a key and a
 * model it does not exist here, so endpoint 10 leaves it out rather than list it broken. The
 * client's own retries are off: the run's activity retry policy is the one place that retries.
 */
import OpenAI, { APIConnectionError, APIError, APIUserAbortError } from 'openai';
import { EnrichmentError, fillTemplate, optionTextMax, type EnrichmentProvider } from '../../domain/enrichments.js';
import { cellTextMax } from '../../domain/tables.js';

export interface AiColumnConfig {
  apiKey: string;
  model: string;
  baseUrl?: string;
  timeoutSeconds?: number;
}

/** The configuration from the environment, or null when a key or a model is missing. */
export function aiColumnConfigFrom(env: Record<string, string | undefined>): AiColumnConfig | null {
  const apiKey = env.OPENAI_API_KEY?.trim();
  const model = env.OPENAI_MODEL?.trim();
  if (!apiKey || !model) return null;
  return { apiKey, model, ...(env.OPENAI_BASE_URL?.trim() ? { baseUrl: env.OPENAI_BASE_URL.trim() } : {}) };
}

const instructions =
  'You fill one cell of a spreadsheet column. Follow the instruction for the row given. ' +
  'Answer with the cell value only: no preamble, no quotes, no explanation. ' +
  'If the row does not give enough to answer, answer with nothing at all.';

function failure(error: unknown, timeoutSeconds: number): EnrichmentError {
  if (error instanceof APIUserAbortError) return new EnrichmentError(`The model did not answer within ${timeoutSeconds} seconds.`, true);
  if (error instanceof APIConnectionError) return new EnrichmentError(`The model API could not be reached: ${error.message}`, true);
  if (error instanceof APIError) {
    const status = error.status ?? 0;
    const retryable = status === 408 || status === 409 || status === 429 || status >= 500;
    return new EnrichmentError(`The model API answered ${status}: ${error.message}`.slice(0, 500), retryable);
  }
  return new EnrichmentError(`The model call failed: ${(error as Error).message}`, true);
}

export function aiColumn(config: AiColumnConfig): EnrichmentProvider {
  const timeoutSeconds = config.timeoutSeconds ?? 60;
  const client = new OpenAI({ apiKey: config.apiKey, baseURL: config.baseUrl, maxRetries: 0, timeout: timeoutSeconds * 1000 });
  return {
    info: {
      key: 'ai_column',
      display_name: 'AI column',
      description: `Answers an instruction for each row with a chat model (${config.model}). Map columns as named inputs and write them into the prompt as {name}.`,
      credentials: 'platform',
      inputs: [],
      named_inputs: true,
      outputs: [{ name: 'answer', description: "The model's answer", type: 'text' }],
      options: [{ name: 'prompt', description: 'The instruction, with mapped inputs written as {name}', required: true, max_length: optionTextMax }],
      price_credits: 2,
      concurrency: 4,
      timeout_seconds: timeoutSeconds,
    },
    async run(request, signal) {
      const prompt = fillTemplate(request.options.get('prompt') ?? '', request.inputs);
      let answer: string;
      try {
        const completion = await client.chat.completions.create(
          { model: config.model, messages: [{ role: 'system', content: instructions }, { role: 'user', content: prompt }] },
          { signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutSeconds * 1000)]) },
        );
        answer = completion.choices[0]?.message?.content?.trim() ?? '';
      } catch (error) {
        throw failure(error, timeoutSeconds);
      }
      if (!answer) return { kind: 'empty', reason: 'The model gave no answer.' };
      return { kind: 'result', values: { answer: answer.length <= cellTextMax ? answer : `${answer.slice(0, cellTextMax - 1)}…` } };
    },
  };
}
