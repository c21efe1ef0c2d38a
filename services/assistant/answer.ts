/**
 * An assistant turn's answer (docs/decisions/034-assistant-turns-and-cards.md): each model step
 * (`answerStep`), streamed into Postgres as it arrives and recorded whole so a retried turn never
 * asks again for a step it has, and the answer's end (`finishAnswer`). The turn's workflow calls
 * them through activities/assistant/turn.ts; a step's failures are TypedFailures (the door makes
 * them ApplicationFailures), whose retryable flag is the workflow's retry policy's answer.
 */
import type { Sql } from '../../db/sql.js';
import { stepClosing, stepOpening, stepTextId, systemPrompt } from '../../domain/assistant/turn.js';
import { readTools, verbTools } from '../../domain/assistant/verbs.js';
import { operationTools, type OperationDoor } from '../../domain/assistant/tool-cards.js';
import type { StreamPart } from '../../domain/assistant/stream.js';
import { contextCharsDefault } from '../../domain/documents/documents.js';
import { nonRetryable, retryable } from '../../domain/shared/errors.js';
import { ChatModelError, type ChatMessage, type ChatModel, type ChatToolCall } from '../../integrations/chat-model.js';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import type { EndpointCaller } from '../../integrations/web/web-endpoint.js';
import { listAttachments } from '../../store/assistant/attachments.js';
import { answerContext, closeAnswer, conversationHistory } from '../../store/assistant/conversations.js';
import {
  answerText,
  appendParts,
  findModelStep,
  openTextBlocks,
  recordModelStep,
  type ModelStepResult,
} from '../../store/assistant/parts.js';
import { workspaceBrief } from '../../store/assistant/workspace.js';
import { businessContext } from '../../store/documents/documents.js';

/** What the turn's use cases reach, as the worker holds it (activities/index.ts). */
export interface AssistantTurnDeps {
  sql: Sql;
  /** Read at each call, so the model configured now is the one asked. */
  chatModel: () => ChatModel | null;
  /** The API's own operations for tool cards; null where the app is not in this process. */
  operations: () => OperationDoor | null;
  endpoints: () => EndpointCaller;
  enrichmentProviders: EnrichmentProviders;
  /** Characters of business-context summaries a prompt reads (DOCUMENT_CONTEXT_CHARS); 12000 when omitted. */
  businessContextChars?: () => number;
  /** How long text deltas gather before they are written as one part. */
  flushMs?: number;
}

/** What the model said in a step of this turn, and the results of its tool calls, for the next step. */
export type TurnMessage = Extract<ChatMessage, { role: 'assistant' | 'tool' }>;

/** The activity attempt a step runs in: its number (above 1 on a retry), its heartbeat and its cancellation. */
export interface StepAttempt {
  attempt: number;
  heartbeat: () => void;
  signal: AbortSignal;
}

const historyMax = 40;

/** One model call: its parts are written as they stream; the whole step is recorded with its last parts. */
export async function answerStep(
  deps: Pick<AssistantTurnDeps, 'sql' | 'chatModel' | 'operations' | 'businessContextChars' | 'flushMs'>,
  context: StepAttempt,
  { messageId, step, transcript }: { messageId: string; step: number; transcript: TurnMessage[] },
): Promise<ModelStepResult> {
  const { sql } = deps;
  const flushMs = deps.flushMs ?? 40;
  const recorded = await findModelStep(sql, messageId, step);
  if (recorded) return recorded;
  const model = deps.chatModel();
  if (!model)
    throw nonRetryable(
      'No chat model is configured: set OPENAI_API_KEY and OPENAI_MODEL (and OPENAI_BASE_URL for another OpenAI-compatible API).',
      'unavailable',
    );
  const ctx = await answerContext(sql, messageId);
  if (!ctx) throw nonRetryable('The answer is gone.', 'not_found');
  const attempt = context.attempt;

  // The answer's `start` event was written with its row (store/assistant/conversations.ts insertTurn).
  const openBlocks = attempt > 1 ? await openTextBlocks(sql, messageId) : [];
  await appendParts(sql, messageId, stepOpening(attempt, openBlocks));

  const [brief, attachments, history, business] = await Promise.all([
    workspaceBrief(sql, ctx.workspace_id),
    listAttachments(sql, ctx.workspace_id, ctx.conversation_id),
    conversationHistory(sql, messageId, historyMax),
    businessContext(sql, ctx.workspace_id, deps.businessContextChars?.() ?? contextCharsDefault),
  ]);
  const messages: ChatMessage[] = [
    { role: 'system', content: systemPrompt(brief, attachments, business) },
    ...history,
    ...transcript,
  ];
  const textId = stepTextId(step, attempt);
  let text = '';
  let pending = '';
  let started = false;
  let lastFlush = Date.now();
  const toolCalls: ChatToolCall[] = [];
  let usage = { promptTokens: 0, completionTokens: 0 };
  const flush = async () => {
    if (!pending) return;
    const parts: StreamPart[] = started ? [] : [{ type: 'text-start', id: textId }];
    started = true;
    parts.push({ type: 'text-delta', id: textId, delta: pending });
    pending = '';
    lastFlush = Date.now();
    await appendParts(sql, messageId, parts);
    context.heartbeat();
  };
  // Alive while the model thinks or streams a tool call's arguments, not only when text arrives.
  const beat = setInterval(() => context.heartbeat(), 10_000);
  try {
    const tools = [...verbTools(), ...readTools, ...(deps.operations() ? operationTools : [])];
    for await (const event of model.stream({ messages, tools, signal: context.signal })) {
      if (event.type === 'text-delta') {
        text += event.delta;
        pending += event.delta;
        // The first words go out at once (time to first byte); later ones gather a moment.
        if (!started || Date.now() - lastFlush >= flushMs) await flush();
      } else if (event.type === 'tool-call') toolCalls.push(event.call);
      else usage = { promptTokens: event.promptTokens, completionTokens: event.completionTokens };
    }
  } catch (error) {
    // Cancelled because this worker is shutting down (or the turn is): not the model's failure, so
    // the step is asked again on the next worker rather than failing the answer.
    if (context.signal.aborted)
      throw retryable('The model call was cancelled with its worker; it is asked again.', 'cancelled');
    if (error instanceof ChatModelError) {
      throw error.retryable ? retryable(error.message, 'model_failed') : nonRetryable(error.message, 'bad_gateway');
    }
    throw error;
  } finally {
    clearInterval(beat);
  }
  await flush();
  const result: ModelStepResult = { text, toolCalls, ...usage };
  const closing = stepClosing(textId, started, toolCalls);
  await sql.begin(async (tx) => {
    // Recorded with the step's last parts: a step either has both or is asked again.
    if (await findModelStep(tx, messageId, step)) return;
    await appendParts(tx, messageId, closing);
    await recordModelStep(tx, messageId, step, result);
  });
  return result;
}

/** Ends the answer once: its text, and the last part (`finish`, or `error` with why). */
export async function finishAnswer(
  deps: Pick<AssistantTurnDeps, 'sql' | 'chatModel'>,
  { messageId, error }: { messageId: string; error?: string },
): Promise<void> {
  const { sql } = deps;
  const ctx = await answerContext(sql, messageId);
  if (!ctx || ctx.status !== 'streaming') return;
  const last: StreamPart = error
    ? { type: 'error', errorText: error }
    : { type: 'finish', messageMetadata: { message_id: messageId, conversation_id: ctx.conversation_id } };
  const content = await answerText(sql, messageId);
  await closeAnswer(sql, messageId, last, {
    status: error ? 'failed' : 'complete',
    content,
    error: error ?? null,
    modelKey: deps.chatModel()?.key ?? null,
  });
}
