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
import { ApplicationFailure } from '@temporalio/common';
import type { Db, Sql } from '../../db/sql.js';
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
  type AgentSlot,
  type Assessment,
  type ContactInput,
  type Draft,
  type Finding,
  type JudgeVerdict,
  type MessageKind,
  type ResearchFact,
  type WriteContext,
} from '../../domain/agents/outbound-agents.js';
import { ChatModelError, type ChatModel } from '../../integrations/chat-model.js';
import { chargeHold, holdCredits, releaseHold, type CreditHold } from '../../store/platform/credits.js';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import { researchContact, type Research } from '../../services/agents/research.js';

export interface OutboundAgentDeps {
  sql: Sql;
  /** The configured chat model, or null: then the local template writer writes, for free. */
  chatModel: ChatModel | null;
  enrichmentProviders?: EnrichmentProviders;
}

export interface WriteStepMessageInput {
  workspaceId: string;
  agentId: string;
  sequenceId: string;
  contactKey: string;
  slotKey: string;
  kind: MessageKind;
  contact: ContactInput;
}

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

export interface AgentVersionRecord {
  id: string;
  workspace_id: string;
  name: string;
  version: number;
  instructions: string;
  slots: AgentSlot[];
}

export async function loadAgentVersion(db: Db, workspaceId: string, agentId: string): Promise<AgentVersionRecord | undefined> {
  const [agent] = await db<AgentVersionRecord[]>`
    select a.id, a.workspace_id, a.name, a.version, v.instructions, v.slots
    from outbound_agents a join outbound_agent_versions v on v.agent_id = a.id and v.version = a.version
    where a.id = ${agentId} and a.workspace_id = ${workspaceId}`;
  return agent;
}

function writerPrompt(ctx: WriteContext): string {
  return [
    `You write one outbound ${ctx.slot.kind.replace('_', ' ')} for the sender described below, to one person, using only facts from the research brief.`,
    `Sender's agent: ${ctx.agentName}.`,
    ctx.instructions ? `Instructions for every message:\n${ctx.instructions}` : '',
    `This step (${ctx.slot.slot_key}):\n${ctx.slot.prompt}`,
    ctx.lessons.length > 0 ? `Lessons from people who reviewed earlier messages (follow them):\n${ctx.lessons.map((l) => `- ${l}`).join('\n')}` : '',
    'Answer a JSON object: {"angle": what the message leans on (a research category), "subject": string or null (null unless an email), ' +
      '"body": the message, "reasoning": why it is written so, "facts_used": [facts copied word for word from the brief], ' +
      '"confidence_score": 0 to 100}.',
  ]
    .filter(Boolean)
    .join('\n\n');
}

function contactPrompt(ctx: WriteContext): string {
  const facts = ctx.brief.map((f) => `- [${f.category}] ${f.fact} (source: ${f.source_title})`).join('\n') || '- (nothing found)';
  const thread = ctx.thread.map((m) => `[${m.slot_key}] ${m.subject ? `Subject: ${m.subject}\n` : ''}${m.body}`).join('\n---\n');
  return [`Person: ${ctx.contact.name ?? '(name unknown)'}`, `Research brief:\n${facts}`, thread ? `Messages already sent, oldest first:\n${thread}` : '']
    .filter(Boolean)
    .join('\n\n');
}

function parseJson<T>(text: string, schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } }): T | null {
  try {
    const parsed = schema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

async function ask(model: ChatModel, system: string, user: string): Promise<string> {
  try {
    return (await model.complete({ json: true, temperature: 0.4, messages: [{ role: 'system', content: system }, { role: 'user', content: user }] })).content;
  } catch (error) {
    if (error instanceof ChatModelError) throw new WriteFailure(error.message, error.retryable);
    throw new WriteFailure(`The model call failed: ${(error as Error).message}`, true);
  }
}

/** Writes and judges one message. Throws WriteFailure when the model fails or answers badly. */
export async function composeMessage(model: ChatModel | null, ctx: WriteContext, extraFindings: Finding[] = []): Promise<Written> {
  if (!model) {
    const draft = localDraft(ctx);
    const judged = judgeDraft(draft, ctx);
    return { draft, ...judged, findings: [...extraFindings, ...judged.findings], assessment: assess(draft, judged.verdict, ctx.brief), modelKey: localWriterKey, priceTenths: 0 };
  }
  const answer = await ask(model, writerPrompt(ctx), contactPrompt(ctx));
  const parsed = parseJson(answer, ModelDraftSchema);
  // Retryable: the same request usually comes back well-formed on a second try.
  if (!parsed) throw new WriteFailure('The model did not answer with the message JSON (angle, body, facts_used, confidence_score).', true);
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
    if (modelVerdict.reasons.length > 0 && !(modelVerdict.grounded && modelVerdict.language_ok && modelVerdict.on_topic && modelVerdict.safe)) {
      findings.push({ code: 'model_judge', excerpt: '', message: modelVerdict.reasons.join(' '), severity: 'warning' });
    }
  } else {
    findings.push({ code: 'model_judge', excerpt: '', message: 'The model judge gave no usable verdict; only the deterministic checks were applied.', severity: 'info' });
  }
  return { draft, verdict, findings, assessment: assess(draft, verdict, ctx.brief), modelKey: model.key, priceTenths: modelMessagePriceTenths };
}

/** Holds a model write's price; null when the write is free. Refused (insufficient_credits) before the model is asked. */
export async function holdWritePrice(sql: Sql, workspaceId: string, model: ChatModel | null, causeKey: string): Promise<CreditHold | null> {
  if (!model) return null;
  return sql.begin((tx) => holdCredits(tx, { workspaceId, amount: creditsOf(modelMessagePriceTenths), causeKey })) as Promise<CreditHold>;
}

/** Maps a write's failure to the activity failure the caller's retry policy reads. */
export function activityFailure(error: unknown): ApplicationFailure {
  if (error instanceof ApplicationFailure) return error;
  if (error instanceof WriteFailure) {
    return error.retryable ? ApplicationFailure.retryable(error.message, 'model_failed') : ApplicationFailure.nonRetryable(error.message, 'model_failed');
  }
  if (error instanceof ApiError) return ApplicationFailure.nonRetryable(error.detail, error.code);
  return ApplicationFailure.retryable((error as Error).message ?? String(error), 'write_failed');
}

interface ConversationRecord {
  id: string;
  researched_at: Date | null;
  research_brief: ResearchFact[];
  sources: string[];
}

interface StoredMessage {
  id: string;
  attempt: number;
  status: string;
  subject: string | null;
  body: string;
  confident: boolean;
  insufficient_data: boolean;
  confidence: string;
  judge_verdict: Partial<JudgeVerdict>;
}

function resultOf(m: StoredMessage): WriteStepMessageResult {
  const needsReview = m.status === 'needs_review';
  const judgeFailed = !(m.judge_verdict.grounded && m.judge_verdict.language_ok && m.judge_verdict.on_topic && m.judge_verdict.safe);
  return {
    messageId: m.id,
    subject: m.subject,
    body: m.body,
    needsReview,
    reason: !needsReview ? null : m.insufficient_data ? 'insufficient_data' : judgeFailed ? 'judge_failed' : 'low_confidence',
  };
}

export function createOutboundAgentActivities(deps: OutboundAgentDeps) {
  const { sql, chatModel } = deps;
  const webPage = deps.enrichmentProviders?.get('web_page_reader');

  /** The conversation of (agent, contact key), researched once: later slots reuse the brief. */
  async function researchedConversation(input: WriteStepMessageInput): Promise<ConversationRecord> {
    const [conversation] = await sql<ConversationRecord[]>`
      insert into outbound_conversations (workspace_id, agent_id, contact_key, subject_key)
      values (${input.workspaceId}, ${input.agentId}, ${input.contactKey}, ${subjectKeyOf(input.contact, input.contactKey)})
      on conflict (agent_id, contact_key) do update set contact_key = excluded.contact_key
      returning id, researched_at, research_brief, sources`;
    if (conversation!.researched_at) return conversation!;
    const research: Research = await researchContact({ chatModel, webPage }, input.contact, factsFromFields(input.contact));
    const [updated] = await sql<ConversationRecord[]>`
      update outbound_conversations
      set research_brief = ${sql.json(research.brief as never)}, sources = ${research.sources}, company_key = ${research.companyKey}, researched_at = now()
      where id = ${conversation!.id} and researched_at is null
      returning id, researched_at, research_brief, sources`;
    return updated ?? (await sql<ConversationRecord[]>`select id, researched_at, research_brief, sources from outbound_conversations where id = ${conversation!.id}`)[0]!;
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
      const [stored] = await sql<StoredMessage[]>`
        select * from outbound_messages where conversation_id = ${conversation.id} and write_key = ${input.slotKey}`;
      if (stored && stored.status !== 'failed' && stored.status !== 'writing') return resultOf(stored);

      // Claim the write: a new row, or the next attempt of a failed (or abandoned) one.
      const [claimed] = await sql<StoredMessage[]>`
        insert into outbound_messages (workspace_id, conversation_id, write_key, agent_version, slot_key, kind, status)
        values (${input.workspaceId}, ${conversation.id}, ${input.slotKey}, ${agent.version}, ${input.slotKey}, ${input.kind}, 'writing')
        on conflict (conversation_id, write_key) do update
          set attempt = outbound_messages.attempt + 1, status = 'writing', error = null, agent_version = excluded.agent_version
          where outbound_messages.status in ('failed', 'writing')
        returning *`;
      if (!claimed) {
        const [now] = await sql<StoredMessage[]>`select * from outbound_messages where conversation_id = ${conversation.id} and write_key = ${input.slotKey}`;
        return resultOf(now!);
      }

      const extra: Finding[] = [];
      let slot = agent.slots.find((s) => s.slot_key === input.slotKey);
      if (!slot) {
        extra.push({ code: 'no_slot_prompt', excerpt: input.slotKey, message: 'The agent has no prompt for this slot; its general instructions were used.', severity: 'warning' });
        slot = { slot_key: input.slotKey, kind: input.kind, prompt: agent.instructions || 'Introduce the sender briefly and ask for a short call.' };
      }
      const thread = await sql<{ slot_key: string; subject: string | null; body: string }[]>`
        select slot_key, subject, body from outbound_messages
        where conversation_id = ${conversation.id} and write_key <> ${input.slotKey} and status in ('ready', 'needs_review', 'sent')
        order by created_at, id`;
      const ctx: WriteContext = {
        agentName: agent.name,
        instructions: agent.instructions,
        slot: { ...slot, kind: input.kind },
        contact: input.contact,
        brief: conversation.research_brief,
        lessons: [],
        thread,
        round: 0,
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
          await tx`update outbound_messages set status = 'failed', error = ${failure.message}
            where id = ${claimed.id} and attempt = ${claimed.attempt} and status = 'writing'`;
        });
        throw failure;
      }

      const { draft, assessment, verdict } = written;
      const charged = creditsOf(written.priceTenths);
      const message = await sql.begin(async (tx) => {
        const [row] = await tx<StoredMessage[]>`
          update outbound_messages set
            angle = ${draft.angle}, subject = ${draft.subject}, body = ${draft.body},
            generated_subject = ${draft.subject}, generated_body = ${draft.body}, reasoning = ${draft.reasoning},
            facts_used = ${draft.facts_used}, findings = ${tx.json(written.findings as never)}, judge_verdict = ${tx.json(verdict as never)},
            confidence = ${assessment.confidence}, confidence_score = ${assessment.confidence_score}, confident = ${assessment.confident},
            insufficient_data = ${assessment.insufficient_data}, is_preview = false,
            opens_thread = ${thread.length === 0}, model_key = ${written.modelKey}, reach = ${conversation.sources.length > 0 ? 'web' : 'none'},
            price_tenths = ${written.priceTenths}, credits_charged = ${charged}, quality_score = ${verdict.quality_score},
            status = ${assessment.review_reason ? 'needs_review' : 'ready'}, error = null
          where id = ${claimed.id} and attempt = ${claimed.attempt} and status = 'writing'
          returning *`;
        if (hold) {
          // Stored: the price is spent. Superseded by a newer attempt: this one's hold goes back.
          if (row) await chargeHold(tx, hold.id, charged);
          else await releaseHold(tx, hold.id);
        }
        await tx`update outbound_conversations set last_turn_at = now() where id = ${conversation.id}`;
        return row ?? (await tx<StoredMessage[]>`select * from outbound_messages where id = ${claimed.id}`)[0]!;
      });
      return resultOf(message);
    },
  };
}
export type OutboundAgentActivities = ReturnType<typeof createOutboundAgentActivities>;
