/**
 * The AI column: an instruction answered for each row by a chat model on an OpenAI-compatible API
 * (the `openai` package; OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL). Without a key and a model
 * it does not exist here, so listEnrichmentProviders leaves it out rather than list it broken. The
 * client's own retries are off: the run's activity retry policy is the one place that retries.
 */
import {
  ChatModelError,
  chatModelConfigFrom,
  openAiChatModel,
  type ChatModel,
  type ChatModelConfig,
} from '../chat-model.js';
import {
  EnrichmentError,
  fillTemplate,
  optionTextMax,
  type EnrichmentProvider,
} from '../../domain/tables/enrichments.js';
import { cellTextMax } from '../../domain/tables/tables.js';

export type AiColumnConfig = ChatModelConfig;

/** The configuration from the environment, or null when a key or a model is missing. */
export const aiColumnConfigFrom = chatModelConfigFrom;

const instructions =
  'You fill one cell of a spreadsheet column. Follow the instruction for the row given. ' +
  'Answer with the cell value only: no preamble, no quotes, no explanation. ' +
  'If the row does not give enough to answer, answer with nothing at all.';

export function aiColumn(config: AiColumnConfig | ChatModel): EnrichmentProvider {
  const model = 'complete' in config ? config : openAiChatModel(config);
  const timeoutSeconds = model.timeoutSeconds;
  return {
    info: {
      key: 'ai_column',
      display_name: 'AI column',
      description: `Answers an instruction for each row with a chat model (${model.key}). Map columns as named inputs and write them into the prompt as {name}.`,
      credentials: 'platform',
      inputs: [],
      named_inputs: true,
      outputs: [{ name: 'answer', description: "The model's answer", type: 'text' }],
      options: [
        {
          name: 'prompt',
          description: 'The instruction, with mapped inputs written as {name}',
          required: true,
          max_length: optionTextMax,
        },
      ],
      price_credits: 2,
      concurrency: 4,
      timeout_seconds: timeoutSeconds,
    },
    async run(request, signal) {
      const prompt = fillTemplate(request.options.get('prompt') ?? '', request.inputs);
      let answer: string;
      try {
        ({ content: answer } = await model.complete({
          messages: [
            { role: 'system', content: instructions },
            { role: 'user', content: prompt },
          ],
          signal,
        }));
      } catch (error) {
        if (error instanceof ChatModelError) throw new EnrichmentError(error.message, error.retryable);
        throw error;
      }
      if (!answer) return { kind: 'empty', reason: 'The model gave no answer.' };
      return {
        kind: 'result',
        values: { answer: answer.length <= cellTextMax ? answer : `${answer.slice(0, cellTextMax - 1)}…` },
      };
    },
  };
}
