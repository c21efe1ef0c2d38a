/**
 * The outbound agent's writing: research a contact once per conversation, write a slot's message
 * through the chat model (JSON mode, validated) or, without one, the local template writer, judge
 * it, and store it with its confidence. `writeStepMessage` is the activity the sequence contact
 * workflow calls: idempotent per (contact key, slot key), because the message row is keyed so and
 * a stored message is answered as it is. Credits: a model-written message holds its price before
 * the model is asked and charges it in the transaction that stores the message; a failure
 * releases it. The hold's cause key carries the write's attempt number, so a write retried after a
 * failure holds afresh and a message is still charged at most once.
 */
import { businessContext } from '../../store/documents/documents.js';
import { businessContextSection, contextCharsDefault } from '../../domain/documents/documents.js';
import { ApplicationFailure } from '@temporalio/common';
import type { Sql } from '../../db/sql.js';
import { ApiError } from '../../domain/shared/errors.js';
import {
  ModelDraftSchema,
  ModelVerdictSchema,
  assess,
  contactKeyMax,
  factsFromFields,
  judgeDraft,
  localDraft,
  localWriterKey,
  mergeVerdicts,
  modelMessagePriceTenths,
  subjectKeyOf,
  type Assessment,
  type Draft,
  type Finding,
  type JudgeVerdict,
  type WriteContext,
} from '../../domain/agents/outbound-agents.js';
import { ChatModelError, type ChatModel } from '../../integrations/chat-model.js';
import { chargeHold, holdCredits, releaseHold, type CreditHold } from '../../store/platform/credits.js';
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
  type StoredMessage,
} from '../../store/agents/outbound-agents.js';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import { researchContact, type Research } from '../../services/agents/research.js';
import { WriteRequest } from '../../domain/sequences/advance.js';

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

export interface WriteStepMessageResult {
  messageId: string;
  subject: string | null;
  body: string;
  needsReview: boolean;
  reason: string | null;
}

/** A write that did not produce a message; `retryable` says whether trying again may help. */
export class WriteFailure extends Error {
  override name = 'WriteFailure';
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

export interface Written {
  draft: Draft;
  verdict: JudgeVerdict;
  findings: Finding[];
  assessment: Assessment;
  modelKey: string;
  priceTenths: number;
}

export const creditsOf = (priceTenths: number) => Math.ceil(priceTenths / 10);

function writerPrompt(ctx: WriteContext): string {
  return [
    `You write one outbound ${ctx.slot.kind.replace('_', ' ')} for the sender described below, to one person, using only facts from the research brief.`,
    `Sender's agent: ${ctx.agentName}.`,
    ctx.instructions ? `Instructions for every message:\n${ctx.instructions}` : '',
    ctx.business ?? '',
    `This step (${ctx.slot.slot_key}):\n${ctx.slot.prompt}`,
    ctx.lessons.length > 0
      ? `Lessons from people who reviewed earlier messages (follow them):\n${ctx.lessons.map((l) => `- ${l}`).join('\n')}`
      : '',
    'Answer a JSON object: {"angle": what the message leans on (a research category), "subject": string or null (null unless an email), ' +
      '"body": the message, "reasoning": why it is written so, "facts_used": [facts copied word for word from the brief], ' +
      '"confidence_score": 0 to 100}.',
  ]
    .filter(Boolean)
    .join('\n\n');
}

function contactPrompt(ctx: WriteContext): string {
  const facts =
    ctx.brief.map((f) => `- [${f.category}] ${f.fact} (source: ${f.source_title})`).join('\n') || '- (nothing found)';
  const thread = ctx.thread
    .map((m) => `[${m.slot_key}] ${m.subject ? `Subject: ${m.subject}\n` : ''}${m.body}`)
    .join('\n---\n');
  return [
    `Person: ${ctx.contact.name ?? '(name unknown)'}`,
    `Research brief:\n${facts}`,
    thread ? `Messages already sent, oldest first:\n${thread}` : '',
  ]
    .filter(Boolean)
    .join('\n\n');
}

function parseJson<T>(
  text: string,
  schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } },
): T | null {
  try {
    const parsed = schema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

async function ask(model: ChatModel, system: string, user: string): Promise<string> {
  try {
    return (
      await model.complete({
        json: true,
        temperature: 0.4,
        messages: [
          { role: 'system', content: system },
          { role: 'user', content: user },
        ],
      })
    ).content;
  } catch (error) {
    if (error instanceof ChatModelError) throw new WriteFailure(error.message, error.retryable);
    throw new WriteFailure(`The model call failed: ${(error as Error).message}`, true);
  }
}

/** Writes and judges one message. Throws WriteFailure when the model fails or answers badly. */
export async function composeMessage(
  model: ChatModel | null,
  ctx: WriteContext,
  extraFindings: Finding[] = [],
): Promise<Written> {
  if (!model) {
    const draft = localDraft(ctx);
    const judged = judgeDraft(draft, ctx);
    return {
      draft,
      ...judged,
      findings: [...extraFindings, ...judged.findings],
      assessment: assess(draft, judged.verdict, ctx.brief),
      modelKey: localWriterKey,
      priceTenths: 0,
    };
  }
  const answer = await ask(model, writerPrompt(ctx), contactPrompt(ctx));
  const parsed = parseJson(answer, ModelDraftSchema);
  // Retryable: the same request usually comes back well-formed on a second try.
  if (!parsed)
    throw new WriteFailure(
      'The model did not answer with the message JSON (angle, body, facts_used, confidence_score).',
      true,
    );
  const draft: Draft = {
    angle: parsed.angle,
    subject: ctx.slot.kind === 'email' ? (parsed.subject ?? '') || null : null,
    body: parsed.body.trim(),
    reasoning: parsed.reasoning,
    facts_used: parsed.facts_used,
    confidence_score: Math.round(parsed.confidence_score),
  };
  const judged = judgeDraft(draft, ctx);
  let verdict = judged.verdict;
  const findings = [...extraFindings, ...judged.findings];
  const judgeAnswer = await ask(
    model,
    'You judge an outbound sales message against the research brief it was written from. Answer a JSON object ' +
      '{"grounded": every claim about the person is in the brief, "language_ok": fluent and free of placeholders, "on_topic": about this person and the offer, ' +
      '"safe": nothing misleading, pushy or offensive, "quality_score": 0 to 100, "reasons": [short strings]}.',
    `${contactPrompt(ctx)}\n\nMessage to judge:\n${draft.subject ? `Subject: ${draft.subject}\n` : ''}${draft.body}`,
  ).catch((error: unknown) => {
    if (error instanceof WriteFailure && !error.retryable) throw error;
    return '';
  });
  const modelVerdict = parseJson(judgeAnswer, ModelVerdictSchema);
  if (modelVerdict) {
    verdict = mergeVerdicts(verdict, modelVerdict);
    if (
      modelVerdict.reasons.length > 0 &&
      !(modelVerdict.grounded && modelVerdict.language_ok && modelVerdict.on_topic && modelVerdict.safe)
    ) {
      findings.push({ code: 'model_judge', excerpt: '', message: modelVerdict.reasons.join(' '), severity: 'warning' });
    }
  } else {
    findings.push({
      code: 'model_judge',
      excerpt: '',
      message: 'The model judge gave no usable verdict; only the deterministic checks were applied.',
      severity: 'info',
    });
  }
  return {
    draft,
    verdict,
    findings,
    assessment: assess(draft, verdict, ctx.brief),
    modelKey: model.key,
    priceTenths: modelMessagePriceTenths,
  };
}

/** Holds a model write's price; null when the write is free. Refused (insufficient_credits) before the model is asked. */
export async function holdWritePrice(
  sql: Sql,
  workspaceId: string,
  model: ChatModel | null,
  causeKey: string,
): Promise<CreditHold | null> {
  if (!model) return null;
  return sql.begin<CreditHold>((tx) =>
    holdCredits(tx, { workspaceId, amount: creditsOf(modelMessagePriceTenths), causeKey }),
  );
}

/** Maps a write's failure to the activity failure the caller's retry policy reads. */
export function activityFailure(error: unknown): ApplicationFailure {
  if (error instanceof ApplicationFailure) return error;
  if (error instanceof WriteFailure) {
    return error.retryable
      ? ApplicationFailure.retryable(error.message, 'model_failed')
      : ApplicationFailure.nonRetryable(error.message, 'model_failed');
  }
  if (error instanceof ApiError) return ApplicationFailure.nonRetryable(error.detail, error.code);
  return ApplicationFailure.retryable((error as Error).message ?? String(error), 'write_failed');
}

function resultOf(m: StoredMessage): WriteStepMessageResult {
  const needsReview = m.status === 'needs_review';
  const judgeFailed = !(
    m.judge_verdict.grounded &&
    m.judge_verdict.language_ok &&
    m.judge_verdict.on_topic &&
    m.judge_verdict.safe
  );
  return {
    messageId: m.id,
    subject: m.subject,
    body: m.body,
    needsReview,
    reason: !needsReview
      ? null
      : m.insufficient_data
        ? 'insufficient_data'
        : judgeFailed
          ? 'judge_failed'
          : 'low_confidence',
  };
}

export function createOutboundAgentActivities(deps: OutboundAgentDeps) {
  const { sql, chatModel } = deps;
  const webPage = deps.enrichmentProviders?.get('web_page_reader');

  /** The conversation of (agent, contact key), researched once: later slots reuse the brief. */
  async function researchedConversation(input: WriteStepMessageInput): Promise<ResearchedConversation> {
    const conversation = await openConversation(sql, {
      workspaceId: input.workspaceId,
      agentId: input.agentId,
      contactKey: input.contactKey,
      subjectKey: subjectKeyOf(input.contact, input.contactKey),
    });
    if (conversation.researched_at) return conversation;
    const research: Research = await researchContact(
      { chatModel, webPage },
      input.contact,
      factsFromFields(input.contact),
    );
    const updated = await storeResearch(sql, conversation.id, research);
    return updated ?? (await findResearchedConversation(sql, conversation.id))!;
  }

  return {
    /**
     * Writes the message of one agent-written sequence step. A retry (same contact key and slot)
     * answers the stored message and charges nothing more; a failed write is tried afresh.
     */
    async writeStepMessage(input: WriteStepMessageInput): Promise<WriteStepMessageResult> {
      if (input.contactKey.length < 1 || input.contactKey.length > contactKeyMax) {
        throw ApplicationFailure.nonRetryable(`A contact key is 1 to ${contactKeyMax} characters.`, 'unprocessable');
      }
      const agent = await loadAgentVersion(sql, input.workspaceId, input.agentId);
      if (!agent) throw ApplicationFailure.nonRetryable('Outbound agent not found.', 'not_found');
      const conversation = await researchedConversation(input);
      const stored = await findWrite(sql, conversation.id, input.slotKey);
      if (stored && stored.status !== 'failed' && stored.status !== 'writing') return resultOf(stored);

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
        return resultOf(now!);
      }

      const extra: Finding[] = [];
      let slot = agent.slots.find((s) => s.slot_key === input.slotKey);
      if (!slot) {
        extra.push({
          code: 'no_slot_prompt',
          excerpt: input.slotKey,
          message: 'The agent has no prompt for this slot; its general instructions were used.',
          severity: 'warning',
        });
        slot = {
          slot_key: input.slotKey,
          kind: input.kind,
          prompt: agent.instructions || 'Introduce the sender briefly and ask for a short call.',
        };
      }
      const thread = await writtenThread(sql, conversation.id, input.slotKey);
      const ctx: WriteContext = {
        agentName: agent.name,
        instructions: agent.instructions,
        slot: { ...slot, kind: input.kind },
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
        const failure = activityFailure(error);
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
      return resultOf(message);
    },
  };
}
export type OutboundAgentActivities = ReturnType<typeof createOutboundAgentActivities>;
