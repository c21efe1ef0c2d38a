/**
 * A connected app's write that needs a person (the assistant's grant rule would ask: at or over
 * the approval threshold, destructive, or a send) becomes an assistant card instead of running:
 * a conversation of the approving member named for the app and the call, the app's request as
 * its question, and one `tool` card (origin `api`) held by an assistant turn that asks no model
 * (`raisedCards`). Approving it in the workspace runs the call as the member, as any tool card.
 */
import type { Sql } from '../../db/sql.js';
import { priceLabels, proposalLifetimeSeconds, titleFrom } from '../../domain/assistant/assistant.js';
import type { CatalogueOperation } from '../../domain/assistant/operations.js';
import { toolCardQuote } from '../../domain/assistant/tool-cards.js';
import { createConversation, failAnswer, insertTurn, type Reader } from '../../store/assistant/conversations.js';
import { appendParts } from '../../store/assistant/parts.js';
import { insertProposal, toProposal, type ProposalRow } from '../../store/assistant/proposals.js';
import { startTurn } from '../assistant/turn-client.js';
import type { TemporalHandle } from '../deps.js';

export interface AppCall {
  workspaceId: string;
  memberId: string;
  appName: string;
}

export async function raiseAppCard(
  deps: { sql: Sql; temporal: TemporalHandle },
  call: AppCall,
  op: CatalogueOperation,
  request: { method: string; url: string; body?: unknown },
): Promise<ProposalRow> {
  const { sql } = deps;
  const quote = toolCardQuote(op, request);
  const reader: Reader = { workspaceId: call.workspaceId, memberId: call.memberId, admin: false };
  const question = `${call.appName} (a connected AI app) asks to: ${quote.summary}`;
  const { card, conversationId, messageId } = await sql.begin(async (tx) => {
    const conversation = await createConversation(tx, reader, titleFrom(`${call.appName}: ${quote.verbLabel}`));
    const turn = await insertTurn(tx, reader, conversation.id, question, conversation.title);
    const row = await insertProposal(tx, {
      workspace_id: call.workspaceId,
      conversation_id: conversation.id,
      message_id: turn.assistantMessageId,
      tool_call_id: 'connected-app-call',
      member_id: call.memberId,
      origin: 'api',
      kind: 'tool',
      verb: op.name,
      input: quote.input,
      batch_id: null,
      verb_label: quote.verbLabel,
      summary: quote.summary,
      detail: { lines: [`Asked by ${call.appName}`, ...quote.lines], input: quote.input },
      price_credits: quote.price.credits,
      price_per: quote.price.per,
      expected_credits: quote.price.expected,
      ...priceLabels(quote.price),
      destructive: quote.destructive,
      loss: quote.loss,
      sends: quote.sends,
      source_column_id: null,
      source_record_id: null,
      runs_column_id: null,
      prepared_column: null,
      lifetimeSeconds: proposalLifetimeSeconds,
    });
    const text = `${call.appName} asked for this; it waits for your approval.`;
    await appendParts(tx, turn.assistantMessageId, [
      { type: 'text-start', id: 'app-call' },
      { type: 'text-delta', id: 'app-call', delta: text },
      { type: 'text-end', id: 'app-call' },
      { type: 'data-proposal', id: row.id, data: toProposal(row) },
    ]);
    return { card: row, conversationId: conversation.id, messageId: turn.assistantMessageId };
  });
  try {
    await startTurn(deps.temporal, {
      messageId,
      workspaceId: call.workspaceId,
      conversationId,
      raisedCards: [card.id],
    });
  } catch (error) {
    await failAnswer(sql, messageId, 'The card could not be held for a decision; ask the app to try again.');
    throw error;
  }
  return card;
}
