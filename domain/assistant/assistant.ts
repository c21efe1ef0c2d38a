/**
 * The in-app assistant's resources (interface spec 2.11 Assistant settings; 2.12 Action proposal): its settings, the cards it proposes, the
 * grants people give from a card, the activity log, and conversations with their messages.
 * Pure: schemas, enums, bounds and the rules the store and the turn's workflow apply.
 */
import { z } from 'zod';
import { NameSchema, queryInteger, textSchema, TimestampSchema, UuidSchema } from '../shared/common.js';

// ---- Verbs and settings (interface spec 2.11 Assistant settings) ----

export const verbs = [
  'create_table_from_search',
  'add_column',
  'run_column',
  'enrich_rows',
  'add_contacts_to_sequence',
  'push_to_destination',
  'call_endpoint',
  'start_search',
] as const;
export const VerbSchema = z.enum(verbs).meta({ id: 'AssistantVerb' });
export type Verb = z.infer<typeof VerbSchema>;

/**
 * Verbs that always ask: a send (pushing rows to a destination reaches people and systems outside
 * the workspace) is never granted and never runs on its own.
 */
export const alwaysAsks: ReadonlySet<string> = new Set<Verb>(['push_to_destination']);

export const verbLabels: Record<Verb, string> = {
  create_table_from_search: 'Create a table from a search',
  add_column: 'Add a column',
  run_column: 'Run a column',
  enrich_rows: 'Enrich rows',
  add_contacts_to_sequence: 'Add contacts to a sequence',
  push_to_destination: 'Push to a destination',
  call_endpoint: 'Call an endpoint',
  start_search: 'Start a search',
};

/** The verbs a person may grant: every verb but those that always ask, which are refused naming the verb. */
export const GrantableVerbSchema = z
  .enum(verbs.filter((v) => !alwaysAsks.has(v)) as [Verb, ...Verb[]], {
    error: (issue) =>
      typeof issue.input === 'string' && alwaysAsks.has(issue.input)
        ? `${issue.input} always asks and cannot be granted`
        : `not a verb that can be granted (${verbs.filter((v) => !alwaysAsks.has(v)).join(', ')})`,
  })
  .meta({ id: 'AssistantGrantableVerb' });

export const thresholdMax = 100_000;
export const defaultThresholdCredits = 25;

export const AssistantSettingsSchema = z
  .object({
    approval_threshold_credits: z
      .int()
      .min(0)
      .max(thresholdMax)
      .describe('Whole credits. A card priced at or above this always asks, whatever was granted'),
    default_granted_verbs: z
      .array(VerbSchema)
      .max(verbs.length)
      .describe('Verbs that run without asking (under the threshold) in every conversation of the workspace'),
  })
  .meta({ id: 'AssistantSettings' });
export type AssistantSettings = z.infer<typeof AssistantSettingsSchema>;

export const AssistantSettingsUpdateSchema = z
  .strictObject({
    approval_threshold_credits: z.int().min(0).max(thresholdMax).optional(),
    default_granted_verbs: z
      .array(GrantableVerbSchema)
      .max(verbs.length)
      .transform((list) => [...new Set(list)])
      .optional()
      .describe(
        `At most ${verbs.length} verbs (a verb named twice counts once); a verb that always asks (push_to_destination) cannot be granted and is refused by name`,
      ),
  })
  .meta({ id: 'AssistantSettingsUpdate' });
export type AssistantSettingsUpdate = z.infer<typeof AssistantSettingsUpdateSchema>;

// ---- Cards (interface spec 2.12 Action proposal) and their statuses (interface spec 3.4 Proposal status) ----

export const ProposalStatusSchema = z.enum(['pending', 'applying', 'applied', 'failed', 'dismissed', 'expired']).meta({
  id: 'ProposalStatus',
  description:
    'pending -> applying (approved, or granted and under the threshold) -> applied | failed; pending -> dismissed; pending -> expired ' +
    "(nobody decided within the card's lifetime). Only a pending card can be decided; every other status is final but applying, which ends in applied or failed.",
});
export type ProposalStatus = z.infer<typeof ProposalStatusSchema>;
export const ApprovalScopeSchema = z
  .enum(['once', 'thread', 'project_me', 'project_all'])
  .meta({ id: 'ApprovalScope' });
export type ApprovalScope = z.infer<typeof ApprovalScopeSchema>;
export type GrantScope = Exclude<ApprovalScope, 'once'>;
export const DecisionSchema = z
  .enum(['approved', 'automatic', 'rejected', 'sent_by_person', 'not_recorded'])
  .meta({ id: 'ActivityDecision' });
export type Decision = z.infer<typeof DecisionSchema>;
export const OutcomeSchema = z
  .enum(['sent', 'done', 'failed', 'skipped', 'already_pending', 'stopped', 'not_sent'])
  .meta({ id: 'ActivityOutcome' });
export type Outcome = z.infer<typeof OutcomeSchema>;
export const ActorKindSchema = z.enum(['user', 'api', 'system']).meta({ id: 'ActorKind' });
export type ActorKind = z.infer<typeof ActorKindSchema>;
export const ProposalOriginSchema = z.enum(['assistant', 'api']).meta({
  id: 'ProposalOrigin',
  description: "assistant: raised by the assistant in a conversation; api: raised through the API on a caller's behalf",
});

/** How long a card waits for a decision before it expires. */
export const proposalLifetimeSeconds = 7 * 86_400;

export const AppliedResultSchema = z
  .object({
    content: z.string().describe('What happened, in a sentence'),
    link: z.string().nullable().describe('Where to see it (an API path)'),
    link_label: z.string().nullable(),
    entity_id: UuidSchema.nullable().describe('What was made or changed'),
    opens: z.enum(['table', 'column', 'sequence', 'run', 'none']).describe('What the link opens'),
    made: z.int().min(0).describe('How many things it made or changed (rows, contacts, cells)'),
  })
  .meta({ id: 'ProposalAppliedResult' });
export type AppliedResult = z.infer<typeof AppliedResultSchema>;

export const PreparedColumnSchema = z
  .object({ table_id: UuidSchema, column_id: UuidSchema, name: z.string(), kind: z.string() })
  .meta({
    id: 'ProposalPreparedColumn',
    description: 'The column made when the card was proposed: approving runs it, dismissing removes it',
  });
export type PreparedColumn = z.infer<typeof PreparedColumnSchema>;

export const ProposalDetailSchema = z
  .object({
    lines: z.array(z.string()).describe('What the card will do, one line each'),
    input: z.record(z.string(), z.unknown()).describe('The arguments it runs with'),
  })
  .meta({ id: 'ProposalDetail' });
export type ProposalDetail = z.infer<typeof ProposalDetailSchema>;

export const ProposalSchema = z
  .object({
    id: UuidSchema,
    origin: ProposalOriginSchema,
    conversation_id: UuidSchema.nullable(),
    message_id: UuidSchema.nullable(),
    source_column_id: UuidSchema.nullable(),
    source_record_id: UuidSchema.nullable(),
    runs_column_id: UuidSchema.nullable(),
    verb: z.string().describe('The workspace verb, or the operation name of a tool card'),
    kind: z.enum(['verb', 'tool']),
    batch_id: UuidSchema.nullable().describe('Cards raised together share it'),
    verb_label: z.string(),
    summary: z.string(),
    detail: ProposalDetailSchema.nullable(),
    price_credits: z.number().nullable().describe('The most it may spend, quoted when proposed; null when free'),
    price_per: z.enum(['call', 'day']),
    expected_credits: z.number().nullable(),
    charged_credits: z.number().nullable().describe('What the run cost, once finished'),
    price_label: z.string(),
    approve_label: z.string(),
    price_aside: z.string(),
    destructive: z.boolean(),
    loss: z.string().nullable(),
    grantable: z.boolean().describe('True only for a pending card of a verb that is not a send'),
    status: ProposalStatusSchema,
    proposed_at: TimestampSchema,
    decided_at: TimestampSchema.nullable(),
    decided_by_display_name: z.string().nullable(),
    applied_result: AppliedResultSchema.nullable(),
    error: z.string().nullable(),
    prepared_column: PreparedColumnSchema.nullable(),
  })
  .meta({ id: 'Proposal' });
export type Proposal = z.infer<typeof ProposalSchema>;

export const proposalIdsMax = 50;
export const ApproveRequestSchema = z
  .strictObject({ scope: ApprovalScopeSchema.default('once') })
  .meta({ id: 'ProposalApprove' });
export const ApproveAllRequestSchema = z
  .strictObject({
    proposal_ids: z
      .array(UuidSchema)
      .min(1)
      .max(proposalIdsMax)
      .describe('Each applied on its own; a failure does not stop the rest'),
    scope: ApprovalScopeSchema.default('once').describe('Applied to every card'),
  })
  .meta({ id: 'ProposalApproveAll' });
export const ProposalActionsSchema = z
  .object({ actions: z.array(ProposalSchema).describe('Every card named, in the order asked, as it stands now') })
  .meta({ id: 'ProposalActions' });
export const ProposalListQuerySchema = z.object({
  status: ProposalStatusSchema.optional(),
  conversation_id: UuidSchema.optional(),
  limit: queryInteger(z.int().min(1).max(200).default(100)),
  offset: queryInteger(z.int().min(0).default(0)),
});
export const ProposalListSchema = z
  .object({ actions: z.array(ProposalSchema).describe('In the order made'), total_count: z.int() })
  .meta({ id: 'ProposalList' });

// ---- Grants ----

export const GrantSchema = z
  .object({
    id: UuidSchema,
    verb: z.string(),
    scope: z.enum(['thread', 'project_me', 'project_all']),
    conversation_id: UuidSchema.nullable().describe('The conversation a `thread` grant covers'),
    member_id: UuidSchema.nullable().describe('The member a `project_me` grant covers'),
    granted_by_display_name: z.string().nullable(),
    proposal_id: UuidSchema.nullable().describe('The card it was given from'),
    created_at: TimestampSchema,
  })
  .meta({ id: 'AssistantGrant' });
export type Grant = z.infer<typeof GrantSchema>;
export const GrantListSchema = z
  .object({ grants: z.array(GrantSchema).describe('Oldest first') })
  .meta({ id: 'AssistantGrantList' });

/**
 * Whether a card runs without asking: only when its verb is granted in a scope that covers it
 * (the workspace's default grants cover every conversation), AND its price is below the threshold,
 * AND it is not destructive, AND it is not a send. Every other card waits for a person.
 */
export interface AutoRunQuestion {
  verb: string;
  priceCredits: number | null;
  destructive: boolean;
  sends: boolean;
  conversationId: string | null;
  memberId: string | null;
  settings: AssistantSettings;
  grants: Pick<Grant, 'verb' | 'scope' | 'conversation_id' | 'member_id'>[];
}

export function grantCovers(
  grant: AutoRunQuestion['grants'][number],
  q: Pick<AutoRunQuestion, 'verb' | 'conversationId' | 'memberId'>,
): boolean {
  if (grant.verb !== q.verb) return false;
  switch (grant.scope) {
    case 'thread':
      return q.conversationId !== null && grant.conversation_id === q.conversationId;
    case 'project_me':
      return q.memberId !== null && grant.member_id === q.memberId;
    case 'project_all':
      return true;
  }
}

export function runsWithoutAsking(q: AutoRunQuestion): boolean {
  if (q.sends || q.destructive || alwaysAsks.has(q.verb)) return false;
  if ((q.priceCredits ?? 0) >= q.settings.approval_threshold_credits) return false;
  const byDefault = (q.settings.default_granted_verbs as string[]).includes(q.verb);
  return byDefault || q.grants.some((g) => grantCovers(g, q));
}

/** A card may be granted from only while pending, and only for a verb that is not a send. */
export const isGrantable = (card: { status: ProposalStatus; sends: boolean; verb: string; destructive: boolean }) =>
  card.status === 'pending' && !card.sends && !alwaysAsks.has(card.verb) && !card.destructive;

// ---- Prices, as a card shows them ----

export interface Price {
  credits: number | null;
  per: 'call' | 'day';
  expected: number | null;
  aside: string;
}

const credits = (n: number) => `${n} credit${n === 1 ? '' : 's'}`;

export function priceLabels(price: Price): { price_label: string; approve_label: string; price_aside: string } {
  if (!price.credits)
    return { price_label: 'Free', approve_label: 'Approve', price_aside: price.aside || 'Costs no credits' };
  const per = price.per === 'day' ? ' a day' : '';
  return {
    price_label: `Up to ${credits(price.credits)}${per}`,
    approve_label: `Approve · up to ${credits(price.credits)}${per}`,
    price_aside: price.aside,
  };
}

// ---- The activity log ----

export const ActivitySchema = z
  .object({
    id: UuidSchema,
    conversation_id: UuidSchema.nullable(),
    proposal_id: UuidSchema.nullable(),
    verb: z.string(),
    decision: DecisionSchema,
    outcome: OutcomeSchema.nullable().describe('Null while the decision has no outcome yet'),
    actor_kind: ActorKindSchema,
    actor_display_name: z.string().nullable(),
    note: z.string().nullable(),
    created_at: TimestampSchema,
  })
  .meta({ id: 'AssistantActivity' });
export type Activity = z.infer<typeof ActivitySchema>;
export const ActivityListSchema = z
  .object({ activity: z.array(ActivitySchema).describe('Newest first'), total_count: z.int() })
  .meta({ id: 'AssistantActivityList' });
export const ActivityListQuerySchema = z.object({
  conversation_id: UuidSchema.optional(),
  limit: queryInteger(z.int().min(1).max(200).default(100)),
  offset: queryInteger(z.int().min(0).default(0)),
});

// ---- Conversations and messages ----

export const messageContentMax = 20_000;

export const ConversationSchema = z
  .object({
    id: UuidSchema,
    title: z.string(),
    member_id: UuidSchema.nullable().describe('Whose conversation it is'),
    archived: z.boolean(),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
  })
  .meta({ id: 'AssistantConversation' });
export type Conversation = z.infer<typeof ConversationSchema>;

export const MessageSchema = z
  .object({
    id: UuidSchema,
    conversation_id: UuidSchema,
    role: z.enum(['user', 'assistant']),
    content: z.string().describe("The message's text; an assistant message's text so far while it streams"),
    status: z.enum(['streaming', 'complete', 'failed']),
    error: z.string().nullable(),
    proposal_ids: z.array(UuidSchema).describe('Cards this message proposed, in the order made'),
    created_at: TimestampSchema,
  })
  .meta({ id: 'AssistantMessage' });
export type Message = z.infer<typeof MessageSchema>;

export const ConversationReadSchema = ConversationSchema.extend({
  messages: z.array(MessageSchema).describe('Oldest first'),
}).meta({ id: 'AssistantConversationRead' });
export const ConversationListSchema = z
  .object({ conversations: z.array(ConversationSchema).describe('Most recently active first'), total_count: z.int() })
  .meta({ id: 'AssistantConversationList' });
export const ConversationListQuerySchema = z.object({
  archived: z
    .enum(['true', 'false'])
    .transform((v) => v === 'true')
    .optional()
    .describe('Only archived (true) or only open (false) conversations; open ones when omitted'),
  all_members: z
    .enum(['true', 'false'])
    .transform((v) => v === 'true')
    .optional()
    .describe("An admin's view of every member's conversations"),
  limit: queryInteger(z.int().min(1).max(200).default(50)),
  offset: queryInteger(z.int().min(0).default(0)),
});
export const ConversationCreateSchema = z
  .strictObject({ title: NameSchema.optional() })
  .meta({ id: 'AssistantConversationCreate' });
export const ConversationUpdateSchema = z
  .strictObject({ title: NameSchema.optional(), archived: z.boolean().optional() })
  .meta({ id: 'AssistantConversationUpdate' });
export const MessageCreateSchema = z
  .strictObject({ content: textSchema(1, messageContentMax).describe('What the person asks, in plain words') })
  .meta({ id: 'AssistantMessageCreate' });

/** The title of a conversation started without one, until its first question names it. */
export const defaultConversationTitle = 'New conversation';

/** A conversation's title from its first question. */
export function titleFrom(question: string): string {
  const line = question.replace(/\s+/g, ' ').trim();
  return line.length <= 80 ? line : `${line.slice(0, 79)}…`;
}
