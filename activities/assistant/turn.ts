/**
 * The activities of an assistant turn: one model step (streamed into Postgres as it arrives, and
 * recorded whole so a retried turn never asks again for a step it has), a card for each tool call
 * (found again on a retry, never raised twice), and the answer's end.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import { textOf } from '../../domain/shared/text.js';
import type { Sql } from '../../db/sql.js';
import {
  proposalLifetimeSeconds,
  priceLabels,
  runsWithoutAsking,
  verbLabels,
  type Verb,
} from '../../domain/assistant/assistant.js';
import { readTools, verbTools } from '../../domain/assistant/verbs.js';
import { pageReadBytesMax } from '../../domain/assistant/attachments.js';
import {
  getAttachment,
  listAttachments,
  readAttachmentPages,
  type AttachmentRecord,
} from '../../store/assistant/attachments.js';
import type { StreamPart } from '../../domain/assistant/stream.js';
import { ApiError } from '../../domain/shared/errors.js';
import { ChatModelError, type ChatMessage, type ChatModel, type ChatToolCall } from '../../integrations/chat-model.js';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import {
  prepareColumn,
  quoteVerb,
  VerbRefused,
  type Quote,
  type ToolCardInput,
  type VerbDeps,
} from '../../services/assistant/verbs.js';
import { operationRequest } from '../../domain/assistant/operations.js';
import {
  assistantOperations,
  briefAnswer,
  findOperations,
  operationTools,
  toolCardQuote,
  type OperationDoor,
} from '../../domain/assistant/tool-cards.js';
import type { EndpointCaller } from '../../integrations/web/web-endpoint.js';
import { answerContext, closeAnswer, conversationHistory } from '../../store/assistant/conversations.js';
import {
  answerText,
  appendParts,
  appendToolOutput,
  openTextBlocks,
  findModelStep,
  recordModelStep,
  type ModelStepResult,
} from '../../store/assistant/parts.js';
import {
  failUnprepared,
  insertProposal,
  proposalById,
  proposalOfToolCall,
  toProposal,
} from '../../store/assistant/proposals.js';
import { listGrants, readSettings } from '../../store/assistant/settings.js';
import { workspaceBrief } from '../../store/assistant/workspace.js';
import { businessContext } from '../../store/documents/documents.js';
import { businessContextSection } from '../../domain/documents/documents.js';
import { contextCharsDefault } from '../../domain/documents/documents.js';

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

export interface ProposeCardRequest {
  messageId: string;
  call: ChatToolCall;
  batchId: string | null;
}

export interface ProposedCard {
  cardId: string | null;
  autoRun: boolean;
  /** What the model reads back as the tool's result. */
  toolResult: string;
}

const historyMax = 40;

function systemPrompt(
  brief: Awaited<ReturnType<typeof workspaceBrief>>,
  attachments: AttachmentRecord[],
  business: { title: string; summary: string }[] = [],
): string {
  const tables =
    brief.tables.map((t) => `- table "${t.name}" (${t.id}), ${t.row_count} rows`).join('\n') || '- no tables yet';
  const sequences =
    brief.sequences.map((s) => `- sequence "${s.name}" (${s.id}), ${s.status}`).join('\n') || '- no sequences yet';
  return [
    "You are the workspace's sales assistant. Answer in plain words and keep it short.",
    'To change anything in the workspace, call a tool: each call becomes a card that quotes its price in credits,',
    'and the person approves it unless they granted that verb. Never claim an action happened before its card was applied.',
    'The workspace now:',
    tables,
    sequences,
    ...(attachments.length
      ? [
          'Files attached to this conversation (read them with read_attachment):',
          ...attachments.map(
            (a) =>
              `- "${a.filename}" (${a.id}), ${a.kind}, ${a.status === 'ready' ? `${a.page_count} ${a.kind === 'pdf' ? 'pages' : 'rows'}` : a.status}`,
          ),
        ]
      : []),
    // Business context (decision 035): the workspace's included document summaries, oldest first, within the budget.
    ...(business.length ? ['', businessContextSection(business)] : []),
  ].join('\n');
}

function verbDeps(deps: AssistantTurnDeps): VerbDeps {
  const context = Context.current();
  return {
    sql: deps.sql,
    providers: deps.enrichmentProviders,
    temporal: { client: context.client, taskQueue: context.info.taskQueue },
    operations: deps.operations,
    endpoints: deps.endpoints,
  };
}

export function createAssistantTurnActivities(deps: AssistantTurnDeps) {
  const { sql } = deps;
  const flushMs = deps.flushMs ?? 40;

  return {
    /** One model call: its parts are written as they stream; the whole step is recorded with its last parts. */
    async answerStep({
      messageId,
      step,
      transcript,
    }: {
      messageId: string;
      step: number;
      transcript: TurnMessage[];
    }): Promise<ModelStepResult> {
      const recorded = await findModelStep(sql, messageId, step);
      if (recorded) return recorded;
      const model = deps.chatModel();
      if (!model)
        throw ApplicationFailure.nonRetryable(
          'No chat model is configured: set OPENAI_API_KEY and OPENAI_MODEL (and OPENAI_BASE_URL for another OpenAI-compatible API).',
          'unavailable',
        );
      const ctx = await answerContext(sql, messageId);
      if (!ctx) throw ApplicationFailure.nonRetryable('The answer is gone.', 'not_found');
      const context = Context.current();
      const attempt = context.info.attempt;

      // The answer's `start` event was written with its row (store/assistant/conversations.ts insertTurn).
      const opening: StreamPart[] = [];
      if (attempt > 1) {
        // The interrupted attempt's text block is closed, so a reader shows it whole and apart from the new one.
        for (const id of await openTextBlocks(sql, messageId)) opening.push({ type: 'text-end', id });
        opening.push({
          type: 'data-notice',
          data: { code: 'step_restarted', text: 'The answer was interrupted; this step is asked again.' },
        });
      }
      opening.push({ type: 'start-step' });
      await appendParts(sql, messageId, opening);

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
      const textId = `text-${step}-${attempt}`;
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
        for await (const event of model.stream({ messages, tools, signal: context.cancellationSignal })) {
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
        if (context.cancellationSignal.aborted)
          throw ApplicationFailure.retryable(
            'The model call was cancelled with its worker; it is asked again.',
            'cancelled',
          );
        if (error instanceof ChatModelError) {
          throw error.retryable
            ? ApplicationFailure.retryable(error.message, 'model_failed')
            : ApplicationFailure.nonRetryable(error.message, 'bad_gateway');
        }
        throw error;
      } finally {
        clearInterval(beat);
      }
      await flush();
      const result: ModelStepResult = { text, toolCalls, ...usage };
      const closing: StreamPart[] = [];
      if (started) closing.push({ type: 'text-end', id: textId });
      for (const call of toolCalls)
        closing.push({
          type: 'tool-input-available',
          toolCallId: call.id,
          toolName: call.name,
          input: parseArguments(call.arguments),
        });
      closing.push({ type: 'finish-step' });
      await sql.begin(async (tx) => {
        // Recorded with the step's last parts: a step either has both or is asked again.
        if (await findModelStep(tx, messageId, step)) return;
        await appendParts(tx, messageId, closing);
        await recordModelStep(tx, messageId, step, result);
      });
      return result;
    },

    /** The card a tool call raises (or the one it raised before), or the reason it raises none. */
    async proposeCard({ messageId, call, batchId }: ProposeCardRequest): Promise<ProposedCard> {
      const ctx = await answerContext(sql, messageId);
      if (!ctx) throw ApplicationFailure.nonRetryable('The answer is gone.', 'not_found');
      const vdeps = verbDeps(deps);
      let card = await proposalOfToolCall(sql, messageId, call.id);
      if (!card) {
        let quote: CardQuote;
        try {
          const input = parseArguments(call.arguments);
          if (input === undefined) throw new VerbRefused(`The arguments of ${call.name} are not JSON.`);
          const quoted = await quoteCall(vdeps, deps.operations(), ctx, call.name, input);
          if ('answer' in quoted) {
            await appendToolOutput(sql, messageId, call.id, [
              { type: 'tool-output-available', toolCallId: call.id, output: quoted.answer },
            ]);
            return { cardId: null, autoRun: false, toolResult: briefAnswer(quoted.answer) };
          }
          quote = quoted;
        } catch (error) {
          const reason = refusalOf(error);
          await appendToolOutput(sql, messageId, call.id, [
            { type: 'tool-output-error', toolCallId: call.id, errorText: reason },
          ]);
          return { cardId: null, autoRun: false, toolResult: `Refused: ${reason}` };
        }
        const labels = priceLabels(quote.price);
        card = await insertProposal(sql, {
          workspace_id: ctx.workspace_id,
          conversation_id: ctx.conversation_id,
          message_id: messageId,
          tool_call_id: call.id,
          member_id: ctx.member_id,
          origin: 'assistant',
          kind: quote.kind,
          verb: quote.verb,
          input: quote.input,
          batch_id: batchId,
          verb_label: quote.verbLabel,
          summary: quote.summary,
          detail: { lines: quote.lines, input: quote.input },
          price_credits: quote.price.credits,
          price_per: quote.price.per,
          expected_credits: quote.price.expected,
          ...labels,
          destructive: quote.destructive,
          loss: quote.loss,
          sends: quote.sends,
          source_column_id: quote.sourceColumnId,
          source_record_id: null,
          runs_column_id: quote.runsColumnId,
          prepared_column: null,
          lifetimeSeconds: proposalLifetimeSeconds,
        });
        if (quote.prepares) {
          try {
            await prepareColumn(vdeps, card);
          } catch (error) {
            // The column cannot be made (a name taken, too many columns): the card fails with why, and costs nothing.
            const reason = refusalOf(error);
            await failUnprepared(sql, card.id, reason);
          }
          card = (await proposalById(sql, card.id))!;
        }
      }
      const proposal = toProposal(card);
      await appendToolOutput(sql, messageId, call.id, [
        {
          type: 'tool-output-available',
          toolCallId: call.id,
          output: { proposal_id: card.id, status: card.status, summary: card.summary, price_label: card.price_label },
        },
        { type: 'data-proposal', id: card.id, data: proposal },
      ]);
      const [settings, grants] = await Promise.all([
        readSettings(sql, ctx.workspace_id),
        listGrants(sql, ctx.workspace_id),
      ]);
      const autoRun =
        card.status === 'pending' &&
        runsWithoutAsking({
          verb: card.verb,
          priceCredits: card.price_credits,
          destructive: card.destructive,
          sends: card.sends,
          conversationId: card.conversation_id,
          memberId: card.member_id,
          settings,
          grants,
        });
      const toolResult =
        card.status === 'failed'
          ? `The card could not be prepared: ${card.error ?? 'unknown reason'}`
          : `Card ${card.id} proposed: ${card.summary} (${card.price_label}). ${autoRun ? 'It runs now under a standing grant.' : 'It waits for the person to approve it.'}`;
      return { cardId: card.id, autoRun, toolResult };
    },

    /** Ends the answer once: its text, and the last part (`finish`, or `error` with why). */
    async finishAnswer({ messageId, error }: { messageId: string; error?: string }): Promise<void> {
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
    },
  };
}

/** A card's quote: a verb's, or a tool card's for a write operation. */
type CardQuote = Quote & { kind: 'verb' | 'tool'; verb: string; verbLabel: string };

/**
 * What a tool call comes to: a card's quote, or (finding operations, a read operation) an answer
 * given at once. Refusals throw, as quoteVerb's do.
 */
async function quoteCall(
  vdeps: VerbDeps,
  door: OperationDoor | null,
  ctx: { workspace_id: string; conversation_id: string; member_id: string | null },
  name: string,
  input: unknown,
): Promise<CardQuote | { answer: unknown }> {
  if (name === 'read_attachment') return { answer: await readAttachment(vdeps.sql, ctx, input) };
  if (name !== 'find_operations' && name !== 'call_operation') {
    return {
      ...(await quoteVerb(vdeps, ctx.workspace_id, name, input)),
      kind: 'verb',
      verb: name,
      verbLabel: verbLabels[name as Verb] ?? name,
    };
  }
  if (!door) throw new VerbRefused('The API cannot be called from this process.');
  const operations = assistantOperations(door.catalogue());
  const args = (input ?? {}) as { query?: unknown; operation?: unknown; input?: unknown };
  if (name === 'find_operations') return { answer: { operations: findOperations(operations, textOf(args.query)) } };
  const op = operations.find((o) => o.name === args.operation);
  if (!op)
    throw new VerbRefused(
      `There is no operation named ${String(args.operation)} that the assistant may call; find one with find_operations.`,
    );
  let request: ToolCardInput['request'];
  try {
    request = operationRequest(op, (args.input ?? {}) as Record<string, unknown>);
  } catch (error) {
    throw new VerbRefused((error as Error).message);
  }
  if (op.access === 'read') {
    if (!ctx.member_id) throw new VerbRefused('This conversation has no member to act for.');
    const answer = await door.call(ctx.member_id, request);
    return { answer: { status: answer.status, body: answer.body } };
  }
  return {
    kind: 'tool',
    verb: op.name,
    ...toolCardQuote(op, request),
    sourceColumnId: null,
    runsColumnId: null,
    prepares: false,
  };
}

/** Pages of a file of this conversation (another conversation's or workspace's is not found). */
async function readAttachment(sql: Sql, ctx: { workspace_id: string; conversation_id: string }, input: unknown) {
  const args = (input ?? {}) as { attachment_id?: unknown; offset?: unknown; limit?: unknown };
  const id = textOf(args.attachment_id);
  const attachment = /^[0-9a-f-]{36}$/i.test(id) ? await getAttachment(sql, ctx.workspace_id, id) : undefined;
  if (!attachment || attachment.conversation_id !== ctx.conversation_id)
    throw new VerbRefused(`No file ${id} is attached to this conversation.`);
  if (attachment.status !== 'ready' || attachment.page_count === null)
    throw new VerbRefused(`"${attachment.filename}" cannot be read: ${attachment.error ?? attachment.status}.`);
  const offset = Math.max(0, Math.trunc(Number(args.offset ?? 0)) || 0);
  const limit = Math.min(10, Math.max(1, Math.trunc(Number(args.limit ?? 10)) || 10));
  return readAttachmentPages(
    sql,
    { id: attachment.id, filename: attachment.filename, page_count: attachment.page_count },
    offset,
    limit,
    pageReadBytesMax,
  );
}

function parseArguments(raw: string): unknown {
  try {
    return raw.trim() === '' ? {} : (JSON.parse(raw) as unknown);
  } catch {
    return undefined;
  }
}

function refusalOf(error: unknown): string {
  if (error instanceof VerbRefused) return error.message;
  if (error instanceof ApiError && error.status < 500) return error.detail;
  throw error;
}

export type AssistantTurnActivities = ReturnType<typeof createAssistantTurnActivities>;
