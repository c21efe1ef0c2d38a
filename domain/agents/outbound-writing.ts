/**
 * The outbound agent's writing decisions, pure: the slot prompt a write uses, what the model judge
 * adds to the deterministic checks, what a written message costs in credits, and how a stored
 * message answers the sequence step's write. The writer (services/agents/outbound-writer.ts) and
 * writeStepMessage (services/agents/outbound-agent.ts) apply them; training sessions share them.
 */
import {
  mergeVerdicts,
  type AgentSlot,
  type Assessment,
  type Draft,
  type Finding,
  type JudgeVerdict,
  type MessageKind,
} from './outbound-agents.js';

/** One message as the writer wrote and judged it. */
export interface Written {
  draft: Draft;
  verdict: JudgeVerdict;
  findings: Finding[];
  assessment: Assessment;
  modelKey: string;
  priceTenths: number;
}

/** The credits a message's price (in tenths of a credit) is charged as: a started credit counts whole. */
export const creditsOf = (priceTenths: number) => Math.ceil(priceTenths / 10);

/**
 * The slot a sequence step's message is written with, of the step's kind. An agent without a
 * prompt for the slot writes from its general instructions, and the message carries a warning.
 */
export function slotToWrite(
  agent: { instructions: string; slots: AgentSlot[] },
  slotKey: string,
  kind: MessageKind,
): { slot: AgentSlot; findings: Finding[] } {
  const slot = agent.slots.find((s) => s.slot_key === slotKey);
  if (slot) return { slot: { ...slot, kind }, findings: [] };
  return {
    slot: {
      slot_key: slotKey,
      kind,
      prompt: agent.instructions || 'Introduce the sender briefly and ask for a short call.',
    },
    findings: [
      {
        code: 'no_slot_prompt',
        excerpt: slotKey,
        message: 'The agent has no prompt for this slot; its general instructions were used.',
        severity: 'warning',
      },
    ],
  };
}

/**
 * The model judge's answer (null: none usable) over the deterministic verdict: a check fails if
 * either says so, a failed check with reasons is a warning, and no usable answer is said so.
 */
export function withModelJudge(
  verdict: JudgeVerdict,
  model: JudgeVerdict | null,
): { verdict: JudgeVerdict; finding: Finding | null } {
  if (!model) {
    return {
      verdict,
      finding: {
        code: 'model_judge',
        excerpt: '',
        message: 'The model judge gave no usable verdict; only the deterministic checks were applied.',
        severity: 'info',
      },
    };
  }
  const failed = model.reasons.length > 0 && !(model.grounded && model.language_ok && model.on_topic && model.safe);
  return {
    verdict: mergeVerdicts(verdict, model),
    finding: failed
      ? { code: 'model_judge', excerpt: '', message: model.reasons.join(' '), severity: 'warning' }
      : null,
  };
}

/** What writeStepMessage answers the sequence contact workflow (workflows/sequences/sequence-contact.ts). */
export interface WriteStepMessageResult {
  messageId: string;
  subject: string | null;
  body: string;
  needsReview: boolean;
  reason: string | null;
}

/** The columns of a stored message (store/agents/outbound-agents.ts, StoredMessage) its answer reads. */
export interface StoredWrite {
  id: string;
  status: string;
  subject: string | null;
  body: string;
  insufficient_data: boolean;
  judge_verdict: Partial<JudgeVerdict>;
}

/** A stored message as the step's answer: whether a person must look first, and why. */
export function stepMessageResult(m: StoredWrite): WriteStepMessageResult {
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
