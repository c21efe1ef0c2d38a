/**
 * The outbound agent's write of a sequence step's message (the sequence contact workflow's
 * writeStepMessage activity): research a contact once per conversation, write the slot's message
 * (services/agents/outbound-writer.ts), and store it with its confidence. Idempotent per (contact
 * key, slot key), because the message row is keyed so and a stored message is answered as it is.
 * Credits: a model-written message holds its price before the model is asked and charges it in the
 * transaction that stores the message; a failure releases it. The hold's cause key carries the
 * write's attempt number, so a write retried after a failure holds afresh and a message is still
 * charged at most once.
 */
import type { Sql } from '../../db/sql.js';
import { businessContextSection, contextCharsDefault } from '../../domain/documents/documents.js';
import {
  contactKeyMax,
  factsFromFields,
  subjectKeyOf,
  type WriteContext,
} from '../../domain/agents/outbound-agents.js';
import {
  creditsOf,
  slotToWrite,
  stepMessageResult,
  type WriteStepMessageResult,
  type Written,
} from '../../domain/agents/outbound-writing.js';
import type { WriteRequest } from '../../domain/sequences/advance.js';
import { nonRetryable } from '../../domain/shared/errors.js';
import type { ChatModel } from '../../integrations/chat-model.js';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import { businessContext } from '../../store/documents/documents.js';
import {
  claimWrite,
  failWrite,
  findMessage,
  findResearchedConversation,
  findWrite,
  loadAgentVersion,
  openConversation,
  storeResearch,
  storeWrittenMessage,
  touchConversation,
  writtenThread,
  type ResearchedConversation,
} from '../../store/agents/outbound-agents.js';
import { chargeHold, releaseHold, type CreditHold } from '../../store/platform/credits.js';
import { composeMessage, holdWritePrice, writeFailureOf } from './outbound-writer.js';
import { researchContact, type Research } from './research.js';

export interface OutboundAgentDeps {
  /** Characters of business context a prompt reads (DOCUMENT_CONTEXT_CHARS). */
  businessContextChars?: number;
  sql: Sql;
  /** The configured chat model, or null: then the local template writer writes, for free. */
  chatModel: ChatModel | null;
  enrichmentProviders?: EnrichmentProviders;
}

/** What the sequence's move asks the outbound agent to write (decided in domain/sequences/advance.ts). */
export type WriteStepMessageInput = WriteRequest;

/** The conversation of (agent, contact key), researched once: later slots reuse the brief. */
async function researchedConversation(
  { sql, chatModel, enrichmentProviders }: OutboundAgentDeps,
  input: WriteStepMessageInput,
): Promise<ResearchedConversation> {
  const conversation = await openConversation(sql, {
    workspaceId: input.workspaceId,
    agentId: input.agentId,
    contactKey: input.contactKey,
    subjectKey: subjectKeyOf(input.contact, input.contactKey),
  });
  if (conversation.researched_at) return conversation;
  const research: Research = await researchContact(
    { chatModel, webPage: enrichmentProviders?.get('web_page_reader') },
    input.contact,
    factsFromFields(input.contact),
  );
  const updated = await storeResearch(sql, conversation.id, research);
  return updated ?? (await findResearchedConversation(sql, conversation.id))!;
}

/**
 * Writes the message of one agent-written sequence step. A retry (same contact key and slot)
 * answers the stored message and charges nothing more; a failed write is tried afresh.
 */
export async function writeStepMessage(
  deps: OutboundAgentDeps,
  input: WriteStepMessageInput,
): Promise<WriteStepMessageResult> {
  const { sql, chatModel } = deps;
  if (input.contactKey.length < 1 || input.contactKey.length > contactKeyMax) {
    throw nonRetryable(`A contact key is 1 to ${contactKeyMax} characters.`, 'unprocessable');
  }
  const agent = await loadAgentVersion(sql, input.workspaceId, input.agentId);
  if (!agent) throw nonRetryable('Outbound agent not found.', 'not_found');
  const conversation = await researchedConversation(deps, input);
  const stored = await findWrite(sql, conversation.id, input.slotKey);
  if (stored && stored.status !== 'failed' && stored.status !== 'writing') return stepMessageResult(stored);

  // Claim the write: a new row, or the next attempt of a failed (or abandoned) one.
  const claimed = await claimWrite(sql, {
    workspaceId: input.workspaceId,
    conversationId: conversation.id,
    writeKey: input.slotKey,
    agentVersion: agent.version,
    slotKey: input.slotKey,
    kind: input.kind,
  });
  if (!claimed) {
    const now = await findWrite(sql, conversation.id, input.slotKey);
    return stepMessageResult(now!);
  }

  const { slot, findings: extra } = slotToWrite(agent, input.slotKey, input.kind);
  const thread = await writtenThread(sql, conversation.id, input.slotKey);
  const ctx: WriteContext = {
    agentName: agent.name,
    instructions: agent.instructions,
    slot,
    contact: input.contact,
    brief: conversation.research_brief,
    lessons: [],
    thread,
    round: 0,
    business: businessContextSection(
      await businessContext(sql, input.workspaceId, deps.businessContextChars ?? contextCharsDefault),
    ),
  };
  const causeKey = `outbound-message:${claimed.id}:${claimed.attempt}`;
  let hold: CreditHold | null = null;
  let written: Written;
  try {
    hold = await holdWritePrice(sql, input.workspaceId, chatModel, causeKey);
    written = await composeMessage(chatModel, ctx, extra);
  } catch (error) {
    const failure = writeFailureOf(error);
    await sql.begin(async (tx) => {
      if (hold) await releaseHold(tx, hold.id);
      await failWrite(tx, claimed, failure.message);
    });
    throw failure;
  }

  const { draft, assessment, verdict } = written;
  const charged = creditsOf(written.priceTenths);
  const message = await sql.begin(async (tx) => {
    const row = await storeWrittenMessage(tx, claimed, {
      draft,
      findings: written.findings,
      verdict,
      assessment,
      opensThread: thread.length === 0,
      modelKey: written.modelKey,
      reach: conversation.sources.length > 0 ? 'web' : 'none',
      priceTenths: written.priceTenths,
      creditsCharged: charged,
      status: assessment.review_reason ? 'needs_review' : 'ready',
    });
    if (hold) {
      // Stored: the price is spent. Superseded by a newer attempt: this one's hold goes back.
      if (row) await chargeHold(tx, hold.id, charged);
      else await releaseHold(tx, hold.id);
    }
    await touchConversation(tx, conversation.id);
    return row ?? (await findMessage(tx, claimed.id))!;
  });
  return stepMessageResult(message);
}
