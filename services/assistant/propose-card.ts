/**
 * Raising the card a tool call of an assistant turn asks for (`proposeCard`,
 * docs/decisions/034-assistant-turns-and-cards.md): a card found again on a retry, never raised
 * twice (the card is keyed by its message and tool call); or, for a read (find_operations, a read
 * operation, read_attachment), the answer at once; or the reason the call raises nothing, which the
 * model reads as the tool's error. Deciding the card is services/assistant/cards.ts.
 */
import type { Sql } from '../../db/sql.js';
import {
  proposalLifetimeSeconds,
  priceLabels,
  runsWithoutAsking,
  verbLabels,
  type Verb,
} from '../../domain/assistant/assistant.js';
import { offeredTo, operationRequest } from '../../domain/assistant/operations.js';
import {
  assistantOperations,
  briefAnswer,
  findOperations,
  toolCardQuote,
  type OperationDoor,
} from '../../domain/assistant/tool-cards.js';
import { attachmentPageWindow, cardToolResult, parseArguments } from '../../domain/assistant/turn.js';
import { ApiError, nonRetryable } from '../../domain/shared/errors.js';
import { textOf } from '../../domain/shared/text.js';
import type { ChatToolCall } from '../../integrations/chat-model.js';
import { getAttachment } from '../../store/assistant/attachments.js';
import { answerContext } from '../../store/assistant/conversations.js';
import { appendToolOutput } from '../../store/assistant/parts.js';
import {
  failUnprepared,
  insertProposal,
  proposalById,
  proposalOfToolCall,
  toProposal,
} from '../../store/assistant/proposals.js';
import { listGrants, readSettings } from '../../store/assistant/settings.js';
import { getMember } from '../../store/platform/workspaces.js';
import { readReadyAttachmentPages } from './attachment-pages.js';
import { prepareColumn, quoteVerb, VerbRefused, type Quote, type ToolCardInput, type VerbDeps } from './verbs.js';

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

/** The card a tool call raises (or the one it raised before), or the reason it raises none. */
export async function proposeCard(
  vdeps: VerbDeps,
  { messageId, call, batchId }: ProposeCardRequest,
): Promise<ProposedCard> {
  const { sql } = vdeps;
  const ctx = await answerContext(sql, messageId);
  if (!ctx) throw nonRetryable('The answer is gone.', 'not_found');
  let card = await proposalOfToolCall(sql, messageId, call.id);
  if (!card) {
    let quote: CardQuote;
    try {
      const input = parseArguments(call.arguments);
      if (input === undefined) throw new VerbRefused(`The arguments of ${call.name} are not JSON.`);
      const quoted = await quoteCall(vdeps, vdeps.operations?.() ?? null, ctx, call.name, input);
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
  return { cardId: card.id, autoRun, toolResult: cardToolResult(card, autoRun) };
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
  // The member the conversation acts for may call what their role allows, and no more (x-admin-only).
  const member = ctx.member_id ? await getMember(vdeps.sql, ctx.workspace_id, ctx.member_id) : undefined;
  const everyOperation = assistantOperations(door.catalogue());
  const operations = offeredTo(everyOperation, member?.role ?? 'member');
  const args = (input ?? {}) as { query?: unknown; operation?: unknown; input?: unknown };
  if (name === 'find_operations') return { answer: { operations: findOperations(operations, textOf(args.query)) } };
  const op = operations.find((o) => o.name === args.operation);
  if (!op)
    throw new VerbRefused(
      everyOperation.some((o) => o.name === args.operation)
        ? `${String(args.operation)} is for workspace admins only, and this conversation acts for a member.`
        : `There is no operation named ${String(args.operation)} that the assistant may call; find one with find_operations.`,
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
  const read = await readReadyAttachmentPages({ sql }, attachment, attachmentPageWindow(args));
  if (!read)
    throw new VerbRefused(`"${attachment.filename}" cannot be read: ${attachment.error ?? attachment.status}.`);
  return read;
}

/** Why a tool call raises no card, as the model reads it; anything else is the activity's failure. */
function refusalOf(error: unknown): string {
  if (error instanceof VerbRefused) return error.message;
  if (error instanceof ApiError && error.status < 500) return error.detail;
  throw error;
}
