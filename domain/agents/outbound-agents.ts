/**
 * The outbound agent (interface spec: Outbound agent conversation): versioned prompts per sequence
 * slot, the research brief of a contact, the messages it writes and the conversation read
 * (readOutboundConversation). The rules here are pure (research from row fields, the local template
 * writer, the judge's deterministic checks, confidence), so the activities, the training session
 * and the tests share one definition.
 *
 * Value sets the interface spec leaves open (its Resources section's open items), designed here:
 * - research `category`: role, company, industry, location, website, profile, activity, other;
 * - message `kind`: email, pnet_message, connection_note;
 * - message `status`: writing (a write under way), ready, needs_review (waits for a person:
 *   insufficient data, low confidence or a failed judge check), failed (the write failed; `error`
 *   says why), sent (the sequence sent it; `sent_at`);
 * - `confidence`: high (score >= 75), medium (>= 50), low.
 */
import { z } from 'zod';
import { NameSchema, TimestampSchema, UuidSchema, textSchema } from '../shared/common.js';

export const contactKeyMax = 255;
export const promptMax = 20_000;
export const slotsMax = 20;
/** What a model-written message costs, in tenths of a credit (2 credits); the local writer is free. */
export const modelMessagePriceTenths = 20;
export const localWriterKey = 'local-template-writer';
/** Below this many facts about the person or their company, a message is written from too little. */
export const minimumFacts = 2;

export const researchCategories = [
  'role',
  'company',
  'industry',
  'location',
  'website',
  'profile',
  'activity',
  'other',
] as const;
export const ResearchCategorySchema = z.enum(researchCategories).meta({ id: 'ResearchCategory' });
export type ResearchCategory = z.infer<typeof ResearchCategorySchema>;

export const messageKinds = ['email', 'pnet_message', 'connection_note'] as const;
export const MessageKindSchema = z.enum(messageKinds).meta({ id: 'OutboundMessageKind' });
export type MessageKind = z.infer<typeof MessageKindSchema>;

export const MessageStatusSchema = z
  .enum(['writing', 'ready', 'needs_review', 'failed', 'sent'])
  .meta({ id: 'OutboundMessageStatus' });
export type MessageStatus = z.infer<typeof MessageStatusSchema>;

export const ConfidenceSchema = z.enum(['high', 'medium', 'low']).meta({ id: 'OutboundConfidence' });
export type Confidence = z.infer<typeof ConfidenceSchema>;

/** A connection note is capped by the network; emails and messages by what a person would read. */
export const bodyMax: Record<MessageKind, number> = { email: 4000, pnet_message: 2000, connection_note: 300 };

// ---------------------------------------------------------------------------------------------
// Agents and versions

export const SlotKeySchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[a-z][a-z0-9_]*$/, 'lower-case letters, digits and underscores, starting with a letter')
  .describe('The sequence step the prompt writes, for example `opener` or `follow_up_1`');

export const AgentSlotSchema = z
  .object({
    slot_key: SlotKeySchema,
    kind: MessageKindSchema.default('email'),
    prompt: textSchema(1, promptMax).describe('What the agent should write in this step'),
  })
  .meta({ id: 'OutboundAgentSlot' });
export type AgentSlot = z.infer<typeof AgentSlotSchema>;

const SlotsSchema = z.array(AgentSlotSchema).min(1).max(slotsMax).describe('One prompt per slot; slot keys are unique');

export const OutboundAgentCreateSchema = z
  .object({
    name: NameSchema,
    instructions: textSchema(0, promptMax)
      .default('')
      .describe('Voice and rules for every slot (who the sender is, what they offer)'),
    slots: SlotsSchema,
  })
  .meta({ id: 'OutboundAgentCreate' });
export type OutboundAgentCreate = z.infer<typeof OutboundAgentCreateSchema>;

export const OutboundAgentUpdateSchema = z
  .object({
    name: NameSchema.optional(),
    instructions: textSchema(0, promptMax).optional(),
    slots: SlotsSchema.optional(),
  })
  .meta({
    id: 'OutboundAgentUpdate',
    description: 'A field left out keeps its value. A change of instructions or slots makes a new version.',
  });
export type OutboundAgentUpdate = z.infer<typeof OutboundAgentUpdateSchema>;

export const OutboundAgentSchema = z
  .object({
    id: UuidSchema,
    name: z.string(),
    version: z.int().describe('The current version; new messages are written by it'),
    instructions: z.string(),
    slots: z.array(AgentSlotSchema),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
  })
  .meta({ id: 'OutboundAgent' });
export type OutboundAgent = z.infer<typeof OutboundAgentSchema>;

export const OutboundAgentListSchema = z
  .object({ agents: z.array(OutboundAgentSchema).describe('Newest first') })
  .meta({ id: 'OutboundAgentList' });

export const OutboundAgentVersionSchema = z
  .object({
    version: z.int(),
    instructions: z.string(),
    slots: z.array(AgentSlotSchema),
    origin: z.string().describe('`created`, `edited`, or `training:<session id>` when a training session applied it'),
    created_at: TimestampSchema,
  })
  .meta({ id: 'OutboundAgentVersion' });
export type OutboundAgentVersion = z.infer<typeof OutboundAgentVersionSchema>;

export const OutboundAgentVersionListSchema = z
  .object({ versions: z.array(OutboundAgentVersionSchema).describe('Newest first') })
  .meta({ id: 'OutboundAgentVersionList' });

export const SequenceAgentBodySchema = z
  .object({
    agent_id: UuidSchema.nullable().describe(
      'The outbound agent that writes the agent-written steps; null detaches it',
    ),
  })
  .meta({ id: 'SequenceAgentBody' });
export const SequenceAgentSchema = z
  .object({ sequence_id: UuidSchema, agent_id: UuidSchema.nullable() })
  .meta({ id: 'SequenceAgent' });

// ---------------------------------------------------------------------------------------------
// Research and messages (interface spec: Outbound agent conversation)

export const ResearchFactSchema = z
  .object({
    category: ResearchCategorySchema,
    fact: z.string(),
    source_title: z.string(),
    source_url: z.string().nullable().describe('Null for a fact read from the contact row itself'),
  })
  .meta({ id: 'ResearchFact' });
export type ResearchFact = z.infer<typeof ResearchFactSchema>;

export const FindingSchema = z
  .object({
    code: z
      .string()
      .describe(
        '`ungrounded_fact`, `placeholder_left`, `too_long`, `unsafe_phrase`, `off_topic`, `no_slot_prompt`, `thin_research`, `model_judge`',
      ),
    excerpt: z.string(),
    message: z.string(),
    severity: z.enum(['info', 'warning', 'error']),
  })
  .meta({ id: 'MessageFinding' });
export type Finding = z.infer<typeof FindingSchema>;

export const JudgeVerdictSchema = z
  .object({
    grounded: z.boolean().describe('Every fact used is in the research brief'),
    language_ok: z.boolean(),
    on_topic: z.boolean(),
    safe: z.boolean(),
    quality_score: z.int().min(0).max(100),
    reasons: z.array(z.string()),
  })
  .meta({ id: 'JudgeVerdict' });
export type JudgeVerdict = z.infer<typeof JudgeVerdictSchema>;

export const OutboundMessageSchema = z
  .object({
    id: UuidSchema,
    conversation_id: UuidSchema,
    agent_version: z.int(),
    angle: z.string().describe('What the message leans on, for example `role` or `company`'),
    slot_key: z.string(),
    kind: MessageKindSchema,
    subject: z.string().nullable().describe('Null for network messages and notes'),
    body: z.string(),
    generated_subject: z.string().nullable().describe('As the writer produced it, before any edit'),
    generated_body: z.string(),
    reasoning: z.string(),
    facts_used: z.array(z.string()),
    findings: z.array(FindingSchema),
    judge_verdict: JudgeVerdictSchema,
    confidence: ConfidenceSchema,
    confidence_score: z.int().min(0).max(100),
    confident: z.boolean(),
    insufficient_data: z.boolean(),
    is_preview: z.boolean(),
    opens_thread: z.boolean().describe('The first message of the conversation'),
    model_key: z.string().describe(`The model that wrote it, or \`${localWriterKey}\` when no model is configured`),
    reach: z.enum(['none', 'mcp', 'web']),
    price_tenths: z.int().describe('Price in tenths of a credit'),
    credits_charged: z.int(),
    quality_score: z.int().min(0).max(100),
    status: MessageStatusSchema,
    error: z.string().nullable(),
    created_at: TimestampSchema,
    sent_at: TimestampSchema.nullable(),
  })
  .meta({ id: 'OutboundMessage' });
export type OutboundMessage = z.infer<typeof OutboundMessageSchema>;

export const ConversationSchema = z
  .object({
    id: UuidSchema,
    company_key: z.string().describe("The contact's company, normalised (its domain when known)"),
    subject_key: z.string().describe('The person, normalised (email, else profile URL, else the contact key)'),
    last_turn_at: TimestampSchema.nullable(),
    researched_at: TimestampSchema.nullable(),
    sources: z.array(z.string()),
    research_brief: z.array(ResearchFactSchema),
    messages: z.array(OutboundMessageSchema).describe('Oldest first'),
  })
  .meta({ id: 'OutboundConversation' });
export type Conversation = z.infer<typeof ConversationSchema>;

export const ConversationQuerySchema = z.object({
  contact_key: textSchema(1, contactKeyMax).describe(
    'The key the sequence gave the contact: `<sequence_id>:<row_id>` (1 to 255 characters, no NUL character)',
  ),
});
export const AgentParamsSchema = z.object({ agent_id: UuidSchema });

// ---------------------------------------------------------------------------------------------
// Rules

export interface ContactInput {
  name?: string;
  email?: string;
  profileUrl?: string;
  fields: Record<string, string>;
}

const freeMail = new Set([
  'gmail.com',
  'googlemail.com',
  'yahoo.com',
  'hotmail.com',
  'outlook.com',
  'live.com',
  'icloud.com',
  'aol.com',
  'proton.me',
  'protonmail.com',
  'gmx.com',
  'gmx.de',
  'web.de',
]);

const fieldCategories: [RegExp, ResearchCategory][] = [
  [/^(job_?)?(title|role|position|headline)$/, 'role'],
  [/^(company|company_?name|organi[sz]ation|employer|account)$/, 'company'],
  [/^(industry|sector|vertical)$/, 'industry'],
  [/^(location|city|country|region|state)$/, 'location'],
  [/^(website|company_?website|domain|company_?domain|url)$/, 'website'],
  [/^(recent_?(post|activity)|activity|news|about|bio|summary)$/, 'activity'],
];
const identityField =
  /^(name|first_?name|last_?name|full_?name|e_?mail|email_?address|profile(_?url)?|linkedin(_?url)?|pnet_?url|id)$/;
const normField = (name: string) =>
  name
    .trim()
    .toLowerCase()
    .replace(/[\s-]+/g, '_');

export const emailDomain = (email: string | undefined) => {
  const domain = email?.trim().toLowerCase().split('@')[1];
  return domain && !freeMail.has(domain) ? domain : null;
};
export const firstName = (name: string | undefined) => name?.trim().split(/\s+/)[0] ?? '';

/** The facts a contact row carries itself, each categorised; identity fields are not facts. */
export function factsFromFields(contact: ContactInput): ResearchFact[] {
  const facts: ResearchFact[] = [];
  for (const [name, raw] of Object.entries(contact.fields)) {
    const value = raw.trim();
    const key = normField(name);
    if (!value || identityField.test(key)) continue;
    const category = fieldCategories.find(([pattern]) => pattern.test(key))?.[1] ?? 'other';
    const fact = category === 'other' ? `${name.trim()}: ${value}` : value;
    facts.push({ category, fact: fact.slice(0, 500), source_title: 'Contact row', source_url: null });
  }
  const domain = emailDomain(contact.email);
  if (domain && !facts.some((f) => f.category === 'website')) {
    facts.push({ category: 'website', fact: domain, source_title: 'Email address domain', source_url: null });
  }
  return facts;
}

/** The company's normal form: its domain when known, else its name in lower case. */
export function companyKeyOf(contact: ContactInput, brief: ResearchFact[]): string {
  const site = brief.find((f) => f.category === 'website')?.fact;
  if (site)
    return site
      .toLowerCase()
      .replace(/^https?:\/\//, '')
      .replace(/^www\./, '')
      .replace(/\/.*$/, '');
  return (brief.find((f) => f.category === 'company')?.fact ?? '').trim().toLowerCase();
}

export function subjectKeyOf(contact: ContactInput, contactKey: string): string {
  if (contact.email?.trim()) return contact.email.trim().toLowerCase();
  if (contact.profileUrl?.trim())
    return contact.profileUrl
      .trim()
      .toLowerCase()
      .replace(/^https?:\/\/(www\.)?/, '')
      .replace(/[?#].*$/, '')
      .replace(/\/+$/, '');
  return contactKey;
}

/** Facts about the person or their company (a website alone says little). */
export const substantiveFacts = (brief: ResearchFact[]) =>
  brief.filter((f) => f.category !== 'website' && f.category !== 'other');

export interface Draft {
  angle: string;
  subject: string | null;
  body: string;
  reasoning: string;
  facts_used: string[];
  /** The writer's own estimate, 0 to 100. */
  confidence_score: number;
}

export interface WriteContext {
  agentName: string;
  instructions: string;
  slot: AgentSlot;
  contact: ContactInput;
  brief: ResearchFact[];
  /** Lessons of a training session, applied to this write. */
  lessons: string[];
  /** Messages already in the thread, oldest first. */
  thread: { slot_key: string; subject: string | null; body: string }[];
  /** Which rewrite this is (0 for the first write), so the local writer varies its angle. */
  round: number;
  /** The workspace's business context (domain/documents businessContextSection); empty when it has none. */
  business?: string;
}

const clip = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max - 1).trimEnd()}…`);

/**
 * The local template writer: composes from the research facts alone, deterministically. It is
 * what writes when no chat model is configured, and it says so (model_key local-template-writer).
 */
export function localDraft(ctx: WriteContext): Draft {
  const substantive = substantiveFacts(ctx.brief);
  const order: ResearchCategory[] = ['role', 'activity', 'company', 'industry', 'location'];
  const ranked = order.flatMap((c) => substantive.filter((f) => f.category === c));
  // A rewrite leads with the next fact, so a note gets a visibly different message.
  const lead = ranked.length > 0 ? ranked[ctx.round % ranked.length]! : null;
  const company = substantive.find((f) => f.category === 'company');
  const used = [lead, company && company !== lead ? company : null].filter((f): f is ResearchFact => f !== null);
  const greetingName = firstName(ctx.contact.name);
  const greeting = greetingName ? `Hi ${greetingName},` : 'Hello,';
  const followUp = ctx.thread.length > 0;
  const leadLine = !lead
    ? 'I came across your profile and wanted to reach out.'
    : lead.category === 'role'
      ? `I saw that you work as ${lead.fact}${company && company !== lead ? ` at ${company.fact}` : ''}.`
      : lead.category === 'activity'
        ? `I read about ${lead.fact}${company && company !== lead ? ` at ${company.fact}` : ''}.`
        : lead.category === 'company'
          ? `I have been following ${lead.fact}.`
          : lead.category === 'industry'
            ? `I work with a number of teams in ${lead.fact}${company && company !== lead ? `, and ${company.fact} stood out` : ''}.`
            : `I noticed you are based in ${lead.fact}.`;
  const ask = ctx.slot.prompt.split(/(?<=[.!?])\s+/)[0]!.trim();
  const body =
    ctx.slot.kind === 'connection_note'
      ? clip(`${greeting} ${leadLine} I would be glad to connect.`, bodyMax.connection_note)
      : clip(
          [
            greeting,
            '',
            followUp ? `Following up on my earlier note. ${leadLine}` : leadLine,
            ask ? `In short: ${ask}` : '',
            '',
            'Would a short call next week be useful?',
          ]
            .filter((line, i, all) => line !== '' || (i > 0 && all[i - 1] !== ''))
            .join('\n'),
          bodyMax[ctx.slot.kind],
        );
  const subject =
    ctx.slot.kind !== 'email'
      ? null
      : followUp
        ? `Re: ${ctx.thread.find((m) => m.subject)?.subject ?? 'my earlier note'}`
        : company
          ? `A question for ${company.fact}`
          : greetingName
            ? `A question for you, ${greetingName}`
            : 'A quick question';
  const lessons = ctx.lessons.length > 0 ? ` Lessons kept in mind: ${ctx.lessons.join('; ')}.` : '';
  return {
    angle: lead?.category ?? 'general',
    subject,
    body,
    reasoning: `Local template writer (no chat model configured): led with ${lead ? `the ${lead.category} fact` : 'no fact, for want of research'}.${lessons}`,
    facts_used: used.map((f) => f.fact),
    confidence_score: Math.min(90, 30 + 20 * used.length + (substantive.length >= 3 ? 10 : 0)),
  };
}

const unsafePhrases =
  /\b(guarantee[ds]?|risk[- ]free|act now|click here|100% free|limited time|wire transfer|bitcoin|password)\b/i;
const placeholder = /\{\{[^}]*\}\}|\[(first ?name|name|company|your name)\]|<[A-Z_]{3,}>|lorem ipsum/i;

/**
 * The judge's deterministic checks: grounded (every fact used is in the brief), language (no
 * placeholders left, not shouting, within length), on topic (it uses a fact or names the person
 * or the company), safe (no spam or scam phrases).
 */
export function judgeDraft(draft: Draft, ctx: WriteContext): { verdict: JudgeVerdict; findings: Finding[] } {
  const findings: Finding[] = [];
  const known = new Set(ctx.brief.map((f) => f.fact));
  const ungrounded = draft.facts_used.filter((f) => !known.has(f));
  for (const fact of ungrounded) {
    findings.push({
      code: 'ungrounded_fact',
      excerpt: clip(fact, 200),
      message: 'A fact the message relies on is not in the research brief.',
      severity: 'error',
    });
  }
  const text = `${draft.subject ?? ''}\n${draft.body}`;
  const hole = placeholder.exec(text);
  if (hole)
    findings.push({
      code: 'placeholder_left',
      excerpt: hole[0],
      message: 'A template placeholder was left in the message.',
      severity: 'error',
    });
  const letters = draft.body.replace(/[^A-Za-z]/g, '');
  const shouting = letters.length > 20 && letters.replace(/[^A-Z]/g, '').length / letters.length > 0.6;
  if (shouting)
    findings.push({
      code: 'shouting',
      excerpt: clip(draft.body, 80),
      message: 'Most of the message is in capitals.',
      severity: 'warning',
    });
  const tooLong = draft.body.length > bodyMax[ctx.slot.kind];
  if (tooLong)
    findings.push({
      code: 'too_long',
      excerpt: clip(draft.body.slice(bodyMax[ctx.slot.kind]), 80),
      message: `A ${ctx.slot.kind} is at most ${bodyMax[ctx.slot.kind]} characters.`,
      severity: 'error',
    });
  const empty = draft.body.trim().length === 0;
  const unsafe = unsafePhrases.exec(text);
  if (unsafe)
    findings.push({
      code: 'unsafe_phrase',
      excerpt: unsafe[0],
      message: 'The message uses a phrase that reads as spam or a scam.',
      severity: 'error',
    });
  const lower = draft.body.toLowerCase();
  const names = [firstName(ctx.contact.name), ...substantiveFacts(ctx.brief).map((f) => f.fact)].filter(
    (s) => s.length >= 2,
  );
  const onTopic = !empty && (draft.facts_used.length > 0 || names.some((n) => lower.includes(n.toLowerCase())));
  if (!onTopic)
    findings.push({
      code: 'off_topic',
      excerpt: clip(draft.body, 80),
      message: 'The message says nothing about this person or their company.',
      severity: 'warning',
    });
  const verdict = {
    grounded: ungrounded.length === 0,
    language_ok: !hole && !shouting && !tooLong && !empty,
    on_topic: onTopic,
    safe: !unsafe,
    quality_score: 0,
    reasons: findings.map((f) => f.message),
  };
  const passed = [verdict.grounded, verdict.language_ok, verdict.on_topic, verdict.safe].filter(Boolean).length;
  verdict.quality_score = Math.max(0, Math.min(100, passed * 20 + Math.min(20, draft.facts_used.length * 10)));
  return { verdict, findings };
}

/** The model judge's answer, merged into the deterministic one: a check fails if either says so. */
export function mergeVerdicts(local: JudgeVerdict, model: JudgeVerdict): JudgeVerdict {
  return {
    grounded: local.grounded && model.grounded,
    language_ok: local.language_ok && model.language_ok,
    on_topic: local.on_topic && model.on_topic,
    safe: local.safe && model.safe,
    quality_score: Math.min(local.quality_score, model.quality_score),
    reasons: [...local.reasons, ...model.reasons.map((r) => `Model judge: ${r}`)],
  };
}

export interface Assessment {
  confidence: Confidence;
  confidence_score: number;
  confident: boolean;
  insufficient_data: boolean;
  /** Why a person must look first, or null when it may go as written. */
  review_reason: 'insufficient_data' | 'low_confidence' | 'judge_failed' | null;
}

export function assess(draft: Draft, verdict: JudgeVerdict, brief: ResearchFact[]): Assessment {
  const insufficient = substantiveFacts(brief).length < minimumFacts;
  const passed = verdict.grounded && verdict.language_ok && verdict.on_topic && verdict.safe;
  let score = Math.round((Math.max(0, Math.min(100, draft.confidence_score)) + verdict.quality_score) / 2);
  if (insufficient) score = Math.min(score, 40);
  if (!passed) score = Math.min(score, 45);
  const confidence: Confidence = score >= 75 ? 'high' : score >= 50 ? 'medium' : 'low';
  const review_reason = insufficient
    ? 'insufficient_data'
    : !passed
      ? 'judge_failed'
      : confidence === 'low'
        ? 'low_confidence'
        : null;
  return {
    confidence,
    confidence_score: score,
    confident: review_reason === null,
    insufficient_data: insufficient,
    review_reason,
  };
}

/** What the chat model must answer when it writes (JSON mode). */
export const ModelDraftSchema = z.object({
  angle: z.string().min(1).max(100),
  subject: z.string().max(300).nullable().optional(),
  body: z.string().min(1).max(8000),
  reasoning: z.string().max(4000).default(''),
  facts_used: z.array(z.string().max(1000)).max(20).default([]),
  confidence_score: z.number().min(0).max(100),
});

/** What the chat model must answer when it judges. */
export const ModelVerdictSchema = z.object({
  grounded: z.boolean(),
  language_ok: z.boolean(),
  on_topic: z.boolean(),
  safe: z.boolean(),
  quality_score: z.number().min(0).max(100).transform(Math.round),
  reasons: z.array(z.string().max(500)).max(10).default([]),
});

/** What the chat model may add to a brief from a page it was shown. */
export const ModelFactsSchema = z.object({
  facts: z.array(z.object({ category: ResearchCategorySchema, fact: z.string().min(1).max(500) })).max(8),
});
