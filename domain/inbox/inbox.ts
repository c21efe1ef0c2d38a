/**
 * The unified inbox (interface spec: What the service does, Other responses;
 * reachBulkDoNotContact): threads across email and pnet, their messages, labels, replies,
 * AI-suggested replies that wait for a person, and bulk do-not-contact. Also the pure rules the
 * inbound paths share: how an email is classified (reply, bounce, auto-reply), how a webhook
 * signature is formed, and the pnet read outcomes.
 */
import { z } from 'zod';
import {
  EmailAddressSchema,
  lineSchema,
  NameSchema,
  queryInteger,
  textSchema,
  TimestampSchema,
  UuidSchema,
} from '../shared/common.js';

export const ChannelSchema = z.enum(['email', 'pnet']).meta({ id: 'InboxChannel' });
export type Channel = z.infer<typeof ChannelSchema>;
export const MessageKindSchema = z.enum(['reply', 'bounce', 'auto_reply', 'sent']).meta({ id: 'InboxMessageKind' });
export type MessageKind = z.infer<typeof MessageKindSchema>;

/** reachBulkDoNotContact and the bulk action: 1 to 200 threads (the interface spec's Limits). */
export const bulkThreadsMax = 200;
export const threadPageMax = 100;
export const replyBodyMax = 8000;
/** Price of one model-written suggestion; the local template writer is free. */
export const suggestionPriceCredits = 1;
export const localTemplateWriterKey = 'local-template-writer';
/** How far a webhook's timestamp may be from our clock before it is refused as stale. */
export const webhookToleranceSeconds = 300;

const queryBool = z.enum(['true', 'false']).transform((v) => v === 'true');

export const LabelSchema = z
  .object({ id: UuidSchema, name: z.string(), color: z.string().nullable(), created_at: TimestampSchema })
  .meta({ id: 'InboxLabel' });
export type Label = z.infer<typeof LabelSchema>;
const ColorSchema = z
  .string()
  .regex(/^#[0-9a-fA-F]{6}$/)
  .nullable();
export const LabelCreateSchema = z
  .object({ name: NameSchema.max(100), color: ColorSchema.default(null) })
  .meta({ id: 'InboxLabelCreate' });
export const LabelUpdateSchema = z
  .object({ name: NameSchema.max(100).optional(), color: ColorSchema.optional() })
  .meta({ id: 'InboxLabelUpdate' });
export const LabelListSchema = z
  .object({ labels: z.array(LabelSchema).describe('Alphabetical') })
  .meta({ id: 'InboxLabelList' });

export const ThreadSchema = z
  .object({
    id: UuidSchema,
    channel: ChannelSchema,
    subject: z.string().nullable(),
    contact_name: z.string().nullable(),
    contact_email: z.string().nullable(),
    contact_profile_url: z.string().nullable().describe('Normalised: no scheme, www, query or trailing slash'),
    sequence_contact_id: UuidSchema.nullable().describe(
      'The sequence contact the thread belongs to, when a sequence opened it',
    ),
    last_message_at: TimestampSchema.nullable(),
    last_inbound_at: TimestampSchema.nullable(),
    unread: z.boolean(),
    archived: z.boolean(),
    needs_reply: z.boolean().describe('The last message is an inbound reply not yet answered'),
    message_count: z.int(),
    snippet: z.string().nullable().describe('The start of the last message'),
    labels: z.array(LabelSchema),
    created_at: TimestampSchema,
  })
  .meta({ id: 'InboxThread' });
export type Thread = z.infer<typeof ThreadSchema>;

export const MessageSchema = z
  .object({
    id: UuidSchema,
    thread_id: UuidSchema,
    direction: z.enum(['inbound', 'outbound']),
    kind: MessageKindSchema.describe(
      '`bounce`: delivery failed and from_email is the address that bounced; `auto_reply`: out of office, never stops a sequence',
    ),
    from_email: z.string().nullable(),
    from_profile_url: z.string().nullable(),
    to_email: z.string().nullable(),
    subject: z.string().nullable(),
    body: z.string(),
    external_id: z.string().nullable().describe('Email Message-ID or the network message id'),
    delivery_status: z
      .enum(['sending', 'sent', 'queued', 'failed'])
      .nullable()
      .describe('Our replies only; `queued`: a pnet reply waiting for the browser'),
    delivery_error: z.string().nullable(),
    occurred_at: TimestampSchema,
  })
  .meta({ id: 'InboxMessage' });
export type Message = z.infer<typeof MessageSchema>;

export const ThreadDetailSchema = ThreadSchema.extend({
  messages: z.array(MessageSchema).describe('Oldest first'),
}).meta({ id: 'InboxThreadDetail' });

export const ThreadListQuerySchema = z.object({
  channel: ChannelSchema.optional(),
  unread: queryBool.optional(),
  needs_reply: queryBool.optional(),
  label_id: UuidSchema.optional(),
  archived: queryBool.default(false).describe('Archived threads instead of the inbox'),
  search: textSchema(1, 200).optional().describe('Contact name, email, profile URL or subject containing this text'),
  limit: queryInteger(z.int().min(1).max(threadPageMax).default(50)),
  offset: queryInteger(z.int().min(0).max(1_000_000).default(0)),
});
export type ThreadListQuery = z.infer<typeof ThreadListQuerySchema>;

export const ThreadListSchema = z
  .object({
    threads: z.array(ThreadSchema).describe('Newest activity first'),
    total: z.int(),
    next_offset: z.int().nullable(),
  })
  .meta({ id: 'InboxThreadList' });

export const ThreadUpdateSchema = z
  .object({ unread: z.boolean().optional(), archived: z.boolean().optional() })
  .meta({ id: 'InboxThreadUpdate', description: 'A field left out keeps its value.' });

export const ThreadLabelAddSchema = z.object({ label_id: UuidSchema }).meta({ id: 'InboxThreadLabelAdd' });

export const ReplyCreateSchema = z
  .object({
    body: textSchema(1, replyBodyMax),
    idempotency_key: z
      .string()
      .regex(/^[A-Za-z0-9_.:-]{1,100}$/)
      .optional()
      .describe('The same key again answers the reply already made instead of sending a second one'),
  })
  .meta({ id: 'InboxReplyCreate' });
export type ReplyCreate = z.infer<typeof ReplyCreateSchema>;

// reachBulkDoNotContact and the bulk action.

/**
 * A query string carries a single id as a string and repeated ones as an array; both are the
 * array the spec describes.
 */
export const ThreadIdsQuerySchema = z.object({
  thread_ids: z
    .preprocess((v) => (typeof v === 'string' ? [v] : v), z.array(UuidSchema).min(1).max(bulkThreadsMax))
    .describe('The selected threads: repeat the parameter, `?thread_ids=<uuid>&thread_ids=<uuid>`, 1 to 200 times'),
});

export const BulkDncReachSchema = z
  .object({
    people: z
      .int()
      .describe('Contacts counted as people: threads with the same email or the same profile URL are one person'),
    without_email: z
      .int()
      .describe('People with no email address: not added to the list, only their current sequences stop'),
  })
  .meta({ id: 'BulkDoNotContactReach' });

export const BulkDncCreateSchema = z
  .object({
    thread_ids: z.array(UuidSchema).min(1).max(bulkThreadsMax),
    reason: textSchema(0, 500).nullable().default(null),
  })
  .meta({ id: 'BulkDoNotContactCreate' });

export const BulkDncResultSchema = BulkDncReachSchema.extend({
  added: z.int().describe('Emails newly on the do-not-contact list'),
  already_listed: z.int().describe('Emails the list already had'),
  stopped: z.int().describe('People whose current sequences were stopped (everyone selected)'),
}).meta({ id: 'BulkDoNotContactResult' });

// Settings of the inbound-email webhook and replies.

export const InboxSettingsSchema = z
  .object({
    webhook_path: z.string().describe('Where the mail provider posts raw MIME (`POST`, signed; see inbound email)'),
    webhook_secret_set: z.boolean(),
    webhook_secret_rotated_at: TimestampSchema.nullable(),
    reply_from_address: z.string().nullable().describe('The From of replies when the thread does not name our address'),
    reply_from_name: z.string().nullable(),
  })
  .meta({ id: 'InboxSettings' });
export const InboxSettingsUpdateSchema = z
  .object({
    reply_from_address: EmailAddressSchema.nullable().optional(),
    reply_from_name: NameSchema.nullable().optional(),
  })
  .meta({ id: 'InboxSettingsUpdate' });
export const WebhookSecretSchema = z
  .object({
    secret: z.string().describe('Shown once: sign with HMAC-SHA256 over `<timestamp>.<raw body>`'),
    rotated_at: TimestampSchema,
  })
  .meta({ id: 'InboxWebhookSecret' });

export const InboundEmailResultSchema = z
  .object({
    message_id: UuidSchema,
    thread_id: UuidSchema,
    kind: MessageKindSchema,
    duplicate: z.boolean().describe('The same Message-ID was recorded before; nothing changed'),
  })
  .meta({ id: 'InboundEmailResult' });

// AI-suggested replies.

export const SuggestionStatusSchema = z.enum(['pending', 'approved', 'dismissed']);
export const SuggestionSchema = z
  .object({
    id: UuidSchema,
    thread_id: UuidSchema,
    message_id: UuidSchema.describe('The inbound message it answers'),
    status: SuggestionStatusSchema,
    subject: z.string().nullable(),
    body: z.string(),
    model_key: z.string().describe('The model that wrote it, or `local-template-writer` when no model is configured'),
    credits_charged: z.int().describe('Only model-written suggestions cost credits'),
    edited: z.boolean().describe('A person changed the text before approving'),
    sent_message_id: UuidSchema.nullable(),
    decided_at: TimestampSchema.nullable(),
    created_at: TimestampSchema,
  })
  .meta({ id: 'InboxSuggestion' });
export type Suggestion = z.infer<typeof SuggestionSchema>;
export const SuggestionListQuerySchema = z.object({
  status: SuggestionStatusSchema.default('pending'),
  thread_id: UuidSchema.optional(),
  limit: queryInteger(z.int().min(1).max(threadPageMax).default(50)),
});
export const SuggestionListSchema = z
  .object({ suggestions: z.array(SuggestionSchema).describe('Newest first') })
  .meta({ id: 'InboxSuggestionList' });
export const SuggestionApproveSchema = z
  .object({ body: textSchema(1, replyBodyMax).optional().describe('Edit then approve: this text is sent instead') })
  .meta({ id: 'InboxSuggestionApprove' });
export const SuggestionApprovedSchema = z
  .object({ suggestion: SuggestionSchema, message: MessageSchema })
  .meta({ id: 'InboxSuggestionApproved' });

// pnet reads (the open items of the interface spec's Resources section leave which outcome fields
// belong to which kind to us).

const OutcomeUrlSchema = lineSchema(1, 2048);
export const PnetInboxThreadSchema = z.object({
  thread_url: OutcomeUrlSchema,
  profile_url: OutcomeUrlSchema.nullable().optional(),
  name: NameSchema.nullable().optional(),
  last_activity_at: TimestampSchema.nullable().optional(),
  unread: z.boolean().optional(),
});
export const PnetConversationMessageSchema = z.object({
  id: lineSchema(1, 255).describe('The network message id: the same message read twice is one message'),
  direction: z.enum(['inbound', 'outbound']),
  text: textSchema(0, replyBodyMax),
  sent_at: TimestampSchema,
  profile_url: OutcomeUrlSchema.nullable().optional(),
});
/** Outcome fields of check_inbox (`threads`) and read_conversation (`thread_url`, `profile_url`, `name`, `messages`). */
export const pnetInboxOutcomeFields = {
  threads: z
    .array(PnetInboxThreadSchema)
    .max(200)
    .optional()
    .describe('check_inbox: threads with new inbound activity'),
  thread_url: OutcomeUrlSchema.optional().describe('read_conversation: the thread read'),
  profile_url: OutcomeUrlSchema.nullable().optional().describe('read_conversation: the other person'),
  name: NameSchema.nullable().optional().describe('read_conversation: the other person’s name'),
  messages: z.array(PnetConversationMessageSchema).max(500).optional().describe('read_conversation: the whole thread'),
};
export type PnetInboxThread = z.infer<typeof PnetInboxThreadSchema>;
export type PnetConversationMessage = z.infer<typeof PnetConversationMessageSchema>;

// Classifying inbound email.

/** Headers as mailparser gives them: lower-case names, values as text. */
export type HeaderLookup = (name: string) => string | undefined;

/**
 * A delivery status notification (RFC 3464) is a bounce; RFC 3834's Auto-Submitted, the common
 * X-Autoreply / X-Autorespond headers, Precedence auto_reply and the usual out-of-office subjects
 * mark an auto-reply. Everything else a person wrote.
 */
export function classifyInboundEmail(input: {
  header: HeaderLookup;
  contentType: string | undefined;
  from: string | null;
  subject: string | null;
}): Exclude<MessageKind, 'sent'> {
  const contentType = (input.contentType ?? '').toLowerCase();
  if (contentType.includes('multipart/report') && contentType.includes('delivery-status')) return 'bounce';
  const from = (input.from ?? '').toLowerCase();
  const subject = (input.subject ?? '').toLowerCase();
  if (
    /^(mailer-daemon|postmaster)@/.test(from) &&
    /(undeliver|delivery status|failure|returned mail|not delivered)/.test(subject)
  )
    return 'bounce';
  const autoSubmitted = (input.header('auto-submitted') ?? 'no').toLowerCase().trim();
  if (autoSubmitted !== 'no' && autoSubmitted !== '') return 'auto_reply';
  if (
    input.header('x-autoreply') ||
    input.header('x-autorespond') ||
    input.header('x-auto-response-suppress')?.toLowerCase().includes('all')
  )
    return 'auto_reply';
  if (/^(auto_reply|auto-reply)$/.test((input.header('precedence') ?? '').toLowerCase().trim())) return 'auto_reply';
  if (/^(out of (the )?office|automatic reply|auto(matic)?[- ]?reply|autoreply)\b/.test(subject)) return 'auto_reply';
  return 'reply';
}

/** The first characters of a body, on one line, for thread lists. */
export const snippetOf = (body: string): string => body.replace(/\s+/g, ' ').trim().slice(0, 200);

/**
 * Counts contacts as people (reachBulkDoNotContact): two contacts are one person when they share an
 * email or a profile URL (union-find over both keys).
 */
export function countPeople(contacts: { email: string | null; profileUrl: string | null }[]): {
  people: { emails: string[]; profileUrls: string[] }[];
  withoutEmail: number;
} {
  const parent = contacts.map((_, i) => i);
  const find = (i: number): number => (parent[i] === i ? i : (parent[i] = find(parent[i]!)));
  const firstBy = new Map<string, number>();
  contacts.forEach((c, i) => {
    for (const key of [c.email ? `e:${c.email}` : null, c.profileUrl ? `p:${c.profileUrl}` : null]) {
      if (!key) continue;
      const seen = firstBy.get(key);
      if (seen === undefined) firstBy.set(key, i);
      else parent[find(i)] = find(seen);
    }
  });
  const groups = new Map<number, { emails: Set<string>; profileUrls: Set<string> }>();
  contacts.forEach((c, i) => {
    const root = find(i);
    const g = groups.get(root) ?? { emails: new Set<string>(), profileUrls: new Set<string>() };
    if (c.email) g.emails.add(c.email);
    if (c.profileUrl) g.profileUrls.add(c.profileUrl);
    groups.set(root, g);
  });
  const people = [...groups.values()].map((g) => ({ emails: [...g.emails], profileUrls: [...g.profileUrls] }));
  return { people, withoutEmail: people.filter((p) => p.emails.length === 0).length };
}

// IMAP mailboxes read by polling.

export const MailboxSchema = z
  .object({
    id: UuidSchema,
    address: z.string().describe('Our address this mailbox receives for'),
    host: z.string(),
    port: z.int(),
    secure: z.boolean().describe('TLS from the start (port 993); false for a plain connection'),
    username: z.string(),
    folder: z.string(),
    poll_seconds: z.int(),
    enabled: z.boolean(),
    uid_validity: z
      .int()
      .nullable()
      .describe(
        'The folder’s UIDVALIDITY the cursor belongs to; a new one reads the folder again (recorded messages are skipped)',
      ),
    last_uid: z.int().describe('The cursor: the last UID recorded'),
    messages_recorded: z.int(),
    last_polled_at: TimestampSchema.nullable(),
    last_error: z.string().nullable().describe('Why the last poll failed; null after a good one'),
    workflow_id: z.string().describe('The polling workflow in the Temporal UI'),
    created_at: TimestampSchema,
  })
  .meta({ id: 'InboxMailbox', description: 'The password is never returned.' });
export type Mailbox = z.infer<typeof MailboxSchema>;

/** One poll of a mailbox, as the poll answers its workflow (workflows/inbox/mailbox-poll.ts). */
export interface MailboxPollResult {
  /** `gone`/`disabled`: the workflow ends; `failed`: the error is on the mailbox row and the next poll tries again. */
  state: 'polled' | 'failed' | 'gone' | 'disabled';
  recorded: number;
  /** More messages are waiting than one poll reads. */
  more: boolean;
  pollSeconds: Mailbox['poll_seconds'];
  uidValidity: Mailbox['uid_validity'];
  lastUid: Mailbox['last_uid'];
}

const HostSchema = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[A-Za-z0-9.-]+$/, 'a host name or IPv4 address');
export const MailboxCreateSchema = z
  .object({
    address: EmailAddressSchema,
    host: HostSchema,
    port: z.int().min(1).max(65535).default(993),
    secure: z.boolean().default(true),
    username: NameSchema,
    password: textSchema(1, 1024),
    folder: NameSchema.default('INBOX'),
    poll_seconds: z.int().min(15).max(86_400).default(60),
  })
  .meta({ id: 'InboxMailboxCreate' });
export type MailboxCreate = z.infer<typeof MailboxCreateSchema>;

export const MailboxUpdateSchema = z
  .object({
    host: HostSchema.optional(),
    port: z.int().min(1).max(65535).optional(),
    secure: z.boolean().optional(),
    username: NameSchema.optional(),
    password: textSchema(1, 1024).optional(),
    folder: NameSchema.optional(),
    poll_seconds: z.int().min(15).max(86_400).optional(),
    enabled: z.boolean().optional(),
  })
  .meta({
    id: 'InboxMailboxUpdate',
    description: 'A field left out keeps its value. A new host, user or folder starts the cursor again.',
  });
export type MailboxUpdate = z.infer<typeof MailboxUpdateSchema>;
export const MailboxListSchema = z
  .object({ mailboxes: z.array(MailboxSchema).describe('Oldest first') })
  .meta({ id: 'InboxMailboxList' });
