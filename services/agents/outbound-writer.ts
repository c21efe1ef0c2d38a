/**
 * The outbound agent's writer, shared by a sequence step's write (services/agents/outbound-agent.ts)
 * and a training session's (services/agents/training-sessions.ts): write a slot's message through
 * the chat model (JSON mode, validated) or, without one, the local template writer, and judge it.
 * A model-written message's price is held before the model is asked (holdWritePrice); the caller
 * charges it in the transaction that stores the message, or releases it.
 *
 * Failures are TypedFailures typed for the calling workflows' retry policies (their
 * nonRetryableErrorTypes: `insufficient_credits`, `not_found`, ...), which the activity doors
 * translate (activities/shared/failures.ts): these use cases run only as activities.
 */
import type { Sql } from '../../db/sql.js';
import { ApiError, TypedFailure, nonRetryable, retryable } from '../../domain/shared/errors.js';
import {
  ModelDraftSchema,
  ModelVerdictSchema,
  assess,
  judgeDraft,
  localDraft,
  localWriterKey,
  modelMessagePriceTenths,
  type Draft,
  type Finding,
  type WriteContext,
} from '../../domain/agents/outbound-agents.js';
import { creditsOf, withModelJudge, type Written } from '../../domain/agents/outbound-writing.js';
import { ChatModelError, type ChatModel } from '../../integrations/chat-model.js';
import { holdCredits, type CreditHold } from '../../store/platform/credits.js';

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
  const { verdict, finding } = withModelJudge(judged.verdict, parseJson(judgeAnswer, ModelVerdictSchema));
  if (finding) findings.push(finding);
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

/** Maps a write's failure to the typed failure the caller's retry policy reads. */
export function writeFailureOf(error: unknown): TypedFailure {
  if (error instanceof TypedFailure) return error;
  if (error instanceof WriteFailure) return new TypedFailure(error.message, 'model_failed', error.retryable);
  if (error instanceof ApiError) return nonRetryable(error.detail, error.code);
  return retryable((error as Error).message ?? String(error), 'write_failed');
}
