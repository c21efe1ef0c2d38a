/**
 * Recording what arrives in the unified inbox (email through the webhook, pnet through the
 * check_inbox and read_conversation steps) and what we send back (email replies through a
 * mailer). Every message is keyed by its Message-ID or network id, so recording the same one
 * twice is one row; a thread's summary (unread, needs_reply, snippet) is recomputed from its
 * messages in the same transaction.
 */
import { simpleParser } from 'mailparser';
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { savepoint, type Db, type Sql } from '../../db/sql.js';
import { normalizeEmail, normalizeProfileUrl } from '../../domain/inbox/do-not-contact.js';
import {
  PnetConversationMessageSchema,
  PnetInboxThreadSchema,
  classifyInboundEmail,
  type Channel,
  type MessageKind,
} from '../../domain/inbox/inbox.js';
import type { ActionKind } from '../../domain/pnet/limits.js';
import { recordWorkspaceEvent } from '../notifications/outbox.js';

// ---------------------------------------------------------------------------------------------
// Threads and messages

export interface ThreadKey {
  workspaceId: string;
  channel: Channel;
  externalKey: string | null;
  subject?: string | null;
  contactName?: string | null;
  contactEmail?: string | null;
  contactProfileUrl?: string | null;
  pnetAccountId?: string | null;
  ourAddress?: string | null;
}

export interface NewMessage {
  workspaceId: string;
  threadId: string;
  direction: 'inbound' | 'outbound';
  kind: MessageKind;
  fromEmail?: string | null;
  fromProfileUrl?: string | null;
  toEmail?: string | null;
  subject?: string | null;
  body: string;
  externalId: string | null;
  occurredAt: Date;
  inReplyTo?: string | null;
  referenceIds?: string[];
  deliveryStatus?: 'sending' | 'sent' | 'queued' | 'failed' | null;
  sentBy?: string | null;
  browserStepId?: string | null;
}

/** Postgres cannot store NUL; mail and page text may carry one. */
export const clean = (text: string | null | undefined) => (text == null ? null : text.replace(/\u0000/g, ''));

/** The sequence contact a person belongs to, when the sequences migration is there (no hard dependency). */
export async function sequenceContactOf(
  tx: Db,
  workspaceId: string,
  email: string | null,
  profileUrl: string | null,
): Promise<string | null> {
  if (!email && !profileUrl) return null;
  const [present] = await tx<{ ok: boolean }[]>`select to_regclass('sequence_contacts') is not null as ok`;
  if (!present?.ok) return null;
  try {
    const [row] = await savepoint(
      tx,
      (sp) => sp<{ id: string }[]>`
      select id from sequence_contacts
      where workspace_id = ${workspaceId} and (email = ${email} or profile_url = ${profileUrl})
      order by (status = 'active') desc limit 1`,
    );
    return row?.id ?? null;
  } catch {
    return null;
  }
}

/** Finds the thread by its external key, or the person's newest thread on the channel, or makes one. */
export async function upsertThread(tx: Db, key: ThreadKey, matchByContact: boolean): Promise<string> {
  const email = normalizeEmail(key.contactEmail);
  const profile = normalizeProfileUrl(key.contactProfileUrl);
  if (key.externalKey) {
    const [byKey] = await tx<{ id: string }[]>`
      select id from inbox_threads where workspace_id = ${key.workspaceId} and channel = ${key.channel} and external_key = ${key.externalKey}`;
    if (byKey) return fillThread(tx, byKey.id, key);
  }
  if (matchByContact && (email || profile)) {
    const [byContact] = await tx<{ id: string }[]>`
      select id from inbox_threads
      where workspace_id = ${key.workspaceId} and channel = ${key.channel}
        and ${key.channel === 'email' ? tx`contact_email = ${email}` : tx`contact_profile_url = ${profile}`}
      order by last_message_at desc nulls last limit 1`;
    if (byContact) return fillThread(tx, byContact.id, key);
  }
  const contact = await sequenceContactOf(tx, key.workspaceId, email, profile);
  const [made] = await tx<{ id: string }[]>`
    insert into inbox_threads (workspace_id, channel, subject, contact_name, contact_email, contact_profile_url, sequence_contact_id,
      external_key, pnet_account_id, our_address)
    values (${key.workspaceId}, ${key.channel}, ${clean(key.subject)?.slice(0, 998) ?? null}, ${clean(key.contactName)?.slice(0, 255) ?? null}, ${email}, ${profile},
      ${contact}, ${key.externalKey}, ${key.pnetAccountId ?? null}, ${normalizeEmail(key.ourAddress)})
    on conflict (workspace_id, channel, external_key) where external_key is not null
      do update set updated_at = now()
    returning id`;
  return made!.id;
}

/** Fills what an earlier record of the thread did not know; never overwrites. */
export async function fillThread(tx: Db, threadId: string, key: ThreadKey): Promise<string> {
  await tx`
    update inbox_threads set
      contact_name = coalesce(contact_name, ${clean(key.contactName)?.slice(0, 255) ?? null}),
      contact_email = coalesce(contact_email, ${normalizeEmail(key.contactEmail)}),
      contact_profile_url = coalesce(contact_profile_url, ${normalizeProfileUrl(key.contactProfileUrl)}),
      subject = coalesce(subject, ${clean(key.subject)?.slice(0, 998) ?? null}),
      pnet_account_id = coalesce(${key.pnetAccountId ?? null}, pnet_account_id),
      our_address = coalesce(our_address, ${normalizeEmail(key.ourAddress)}),
      updated_at = now()
    where id = ${threadId}`;
  return threadId;
}

/** Records a message once (by external id); `duplicate` when it was already there. */
export async function insertMessage(
  tx: Db,
  m: NewMessage,
): Promise<{ id: string; threadId: string; duplicate: boolean }> {
  const [row] = await tx<{ id: string }[]>`
    insert into inbox_messages (workspace_id, thread_id, direction, kind, from_email, from_profile_url, to_email, subject, body,
      external_id, occurred_at, in_reply_to, reference_ids, delivery_status, sent_by, browser_step_id)
    values (${m.workspaceId}, ${m.threadId}, ${m.direction}, ${m.kind}, ${normalizeEmail(m.fromEmail)}, ${normalizeProfileUrl(m.fromProfileUrl)},
      ${normalizeEmail(m.toEmail)}, ${clean(m.subject)?.slice(0, 998) ?? null}, ${clean(m.body) ?? ''}, ${m.externalId}, ${m.occurredAt},
      ${m.inReplyTo ?? null}, ${m.referenceIds ?? []}, ${m.deliveryStatus ?? null}, ${m.sentBy ?? null}, ${m.browserStepId ?? null})
    on conflict (workspace_id, external_id) where external_id is not null do nothing
    returning id`;
  if (row) {
    if (m.direction === 'inbound' && m.kind === 'reply') await recordReplyReceived(tx, m, row.id);
    return { id: row.id, threadId: m.threadId, duplicate: false };
  }
  const [existing] = await tx<{ id: string; thread_id: string }[]>`
    select id, thread_id from inbox_messages where workspace_id = ${m.workspaceId} and external_id = ${m.externalId}`;
  return { id: existing!.id, threadId: existing!.thread_id, duplicate: true };
}

/** A new inbound reply (email or pnet) is a workspace event, in the transaction that records it. */
async function recordReplyReceived(tx: Db, m: NewMessage, messageId: string): Promise<void> {
  const fromEmail = normalizeEmail(m.fromEmail);
  const fromProfileUrl = normalizeProfileUrl(m.fromProfileUrl);
  await recordWorkspaceEvent(tx, {
    workspaceId: m.workspaceId,
    type: 'reply.received',
    payload: {
      message_id: messageId,
      thread_id: m.threadId,
      channel: fromProfileUrl && !fromEmail ? 'pnet' : 'email',
      from_email: fromEmail,
      from_profile_url: fromProfileUrl,
      subject: clean(m.subject)?.slice(0, 998) ?? null,
      sequence_contact_id: await sequenceContactOf(tx, m.workspaceId, fromEmail, fromProfileUrl),
    },
  });
}

/**
 * Recomputes a thread's summary from its messages. A new inbound message makes it unread and
 * brings it back from the archive.
 */
export async function refreshThread(tx: Db, threadId: string, newInbound: boolean): Promise<void> {
  await tx`
    with last as (
      select direction, kind, body from inbox_messages where thread_id = ${threadId} order by occurred_at desc, created_at desc limit 1
    ), agg as (
      select max(occurred_at) as last_at, max(occurred_at) filter (where direction = 'inbound') as last_in, count(*)::int as n
      from inbox_messages where thread_id = ${threadId}
    )
    update inbox_threads t set
      last_message_at = greatest(agg.last_at, t.last_message_at), last_inbound_at = agg.last_in, message_count = agg.n,
      snippet = coalesce(left(regexp_replace((select body from last), '\\s+', ' ', 'g'), 200), t.snippet),
      needs_reply = coalesce((select direction = 'inbound' and kind = 'reply' from last), false),
      unread = t.unread or ${newInbound}, archived_at = case when ${newInbound} then null else t.archived_at end,
      updated_at = now()
    from agg where t.id = ${threadId}`;
}

/**
 * For sequences: records an email we sent, so a reply threads to it by In-Reply-To. Idempotent
 * by Message-ID. Returns the thread.
 */
export async function recordSentEmail(
  tx: Db,
  input: {
    workspaceId: string;
    messageId: string;
    from: string;
    to: string;
    subject: string;
    body: string;
    sentAt: Date;
    sequenceContactId?: string | null;
    contactName?: string | null;
  },
): Promise<string> {
  const threadId = await upsertThread(
    tx,
    {
      workspaceId: input.workspaceId,
      channel: 'email',
      externalKey: input.messageId,
      subject: input.subject,
      contactEmail: input.to,
      contactName: input.contactName,
      ourAddress: input.from,
    },
    true,
  );
  if (input.sequenceContactId) {
    await tx`update inbox_threads set sequence_contact_id = coalesce(sequence_contact_id, ${input.sequenceContactId}) where id = ${threadId}`;
  }
  const message = await insertMessage(tx, {
    workspaceId: input.workspaceId,
    threadId,
    direction: 'outbound',
    kind: 'sent',
    fromEmail: input.from,
    toEmail: input.to,
    subject: input.subject,
    body: input.body,
    externalId: input.messageId,
    occurredAt: input.sentAt,
    deliveryStatus: 'sent',
  });
  if (!message.duplicate) await refreshThread(tx, threadId, false);
  return message.threadId;
}

// ---------------------------------------------------------------------------------------------
// pnet reads

/** The step kinds whose success recordPnetRead writes to the inbox (the others it leaves alone). */
export const recordsPnetRead = (kind: ActionKind) => kind === 'check_inbox' || kind === 'read_conversation';

/**
 * Records what a successful check_inbox or read_conversation found, in the settling
 * transaction (under a savepoint, so an unreadable outcome never blocks the settle). Returns the
 * profile URLs that wrote new replies, for waking their sequence contacts.
 */

export async function recordPnetRead(
  tx: Db,
  step: { workspace_id: string; account_id: string; kind: ActionKind; params: Record<string, unknown> },
  outcome: Record<string, unknown> | null,
): Promise<string[]> {
  if (!recordsPnetRead(step.kind)) return [];
  try {
    return await savepoint(tx, (sp) =>
      step.kind === 'check_inbox' ? recordCheckInbox(sp, step, outcome) : recordConversation(sp, step, outcome),
    );
  } catch (err) {
    console.warn('pnet inbox read not recorded', err);
    return [];
  }
}

/** What a read_conversation step's params accept (domain/pnet.ts). */
export const threadUrlSchema = z.url({ protocol: /^https?$/ }).max(2048);

export async function recordCheckInbox(
  tx: Db,
  step: { workspace_id: string; account_id: string },
  outcome: Record<string, unknown> | null,
): Promise<string[]> {
  const threads = PnetInboxThreadSchema.array().safeParse(outcome?.threads ?? []);
  if (!threads.success) return [];
  for (const t of threads.data) {
    const profile = normalizeProfileUrl(t.profile_url);
    const externalKey = normalizeProfileUrl(t.thread_url);
    if (!profile || !externalKey) continue;
    const id = await upsertThread(
      tx,
      {
        workspaceId: step.workspace_id,
        channel: 'pnet',
        externalKey,
        contactName: t.name,
        contactProfileUrl: profile,
        pnetAccountId: step.account_id,
      },
      false,
    );
    if (!t.unread) continue;
    // The read only says there is something new; the messages come with read_conversation,
    // queued here as the account's housekeeping queues its reads (one waiting per thread).
    await tx`update inbox_threads set unread = true, archived_at = null, updated_at = now() where id = ${id}`;
    if (!threadUrlSchema.safeParse(t.thread_url).success) continue;
    await tx`
      insert into browser_steps (workspace_id, account_id, kind, params, status, metered, queued_at)
      select ${step.workspace_id}, ${step.account_id}, 'read_conversation', ${tx.json({ kind: 'read_conversation', thread_url: t.thread_url })}, 'queued', true, now()
      where not exists (
        select 1 from browser_steps where account_id = ${step.account_id} and kind = 'read_conversation'
          and status in ('queued', 'resuming', 'claimed') and params->>'thread_url' = ${t.thread_url})`;
  }
  return [];
}

export async function recordConversation(
  tx: Db,
  step: { workspace_id: string; account_id: string; params: Record<string, unknown> },
  outcome: Record<string, unknown> | null,
): Promise<string[]> {
  const messages = PnetConversationMessageSchema.array().safeParse(outcome?.messages ?? []);
  if (!messages.success) return [];
  const threadUrl =
    typeof outcome?.thread_url === 'string'
      ? outcome.thread_url
      : typeof step.params.thread_url === 'string'
        ? step.params.thread_url
        : null;
  const externalKey = normalizeProfileUrl(threadUrl);
  if (!externalKey) return [];
  const [known] = await tx<{ contact_profile_url: string | null }[]>`
    select contact_profile_url from inbox_threads where workspace_id = ${step.workspace_id} and channel = 'pnet' and external_key = ${externalKey}`;
  const profile =
    normalizeProfileUrl(typeof outcome?.profile_url === 'string' ? outcome.profile_url : null) ??
    normalizeProfileUrl(messages.data.find((m) => m.direction === 'inbound' && m.profile_url)?.profile_url) ??
    known?.contact_profile_url ??
    null;
  // A thread needs a person to belong to; without one there is nothing to stop or show.
  if (!profile) return [];
  const threadId = await upsertThread(
    tx,
    {
      workspaceId: step.workspace_id,
      channel: 'pnet',
      externalKey,
      contactName: typeof outcome?.name === 'string' ? outcome.name : null,
      contactProfileUrl: profile,
      pnetAccountId: step.account_id,
    },
    false,
  );
  let newInbound = false;
  for (const m of messages.data) {
    const inbound = m.direction === 'inbound';
    const saved = await insertMessage(tx, {
      workspaceId: step.workspace_id,
      threadId,
      direction: m.direction,
      kind: inbound ? 'reply' : 'sent',
      fromProfileUrl: inbound ? (m.profile_url ?? profile) : null,
      body: m.text,
      externalId: `pnet:${m.id}`,
      occurredAt: new Date(m.sent_at),
    });
    if (inbound && !saved.duplicate) newInbound = true;
  }
  await refreshThread(tx, threadId, newInbound);
  return newInbound ? [profile] : [];
}

/** Profile URLs a settled read_conversation reports replies from (for waking sequence contacts). */
export function pnetReplyProfiles(kind: ActionKind, outcome: Record<string, unknown> | null): string[] {
  if (kind !== 'read_conversation') return [];
  const parsed = PnetConversationMessageSchema.array().safeParse(outcome?.messages ?? []);
  if (!parsed.success || !parsed.data.some((m) => m.direction === 'inbound')) return [];
  const profiles = [
    outcome?.profile_url,
    ...parsed.data.filter((m) => m.direction === 'inbound').map((m) => m.profile_url),
  ];
  return [
    ...new Set(
      profiles.map((p) => normalizeProfileUrl(typeof p === 'string' ? p : null)).filter((p): p is string => p !== null),
    ),
  ];
}

// ---------------------------------------------------------------------------------------------
// Inbound email (the webhook, and IMAP polling when it comes)

export const messageIdPattern = /<[^<>\s]+>/g;
export const idsIn = (value: string | string[] | undefined): string[] =>
  (Array.isArray(value) ? value.join(' ') : (value ?? '')).match(messageIdPattern) ?? [];

export interface InboundEmailResult {
  message_id: string;
  thread_id: string;
  kind: Exclude<MessageKind, 'sent'>;
  duplicate: boolean;
  /** Who to wake: the sender of a reply, the address that bounced. */
  wakeEmail: string | null;
}

/**
 * Records one raw MIME message received for the workspace: classified (reply, bounce with the
 * bounced address as from_email, auto-reply), threaded by In-Reply-To / References to a message
 * we recorded (for a bounce: the Message-ID quoted in the report), else the person's email
 * thread, else a new one. Idempotent by Message-ID (a message without one is keyed by its hash).
 */
export async function recordInboundEmail(
  sql: Sql,
  workspaceId: string,
  raw: Buffer,
  receivedAt = new Date(),
): Promise<InboundEmailResult> {
  const parsed = await simpleParser(raw, { skipImageLinks: true, skipTextToHtml: true });
  const headerLines = new Map<string, string>();
  for (const h of parsed.headerLines)
    if (!headerLines.has(h.key)) headerLines.set(h.key, h.line.slice(h.line.indexOf(':') + 1).trim());
  const header = (name: string) => headerLines.get(name.toLowerCase());
  const fromAddress = parsed.from?.value[0]?.address ?? null;
  const fromName = parsed.from?.value[0]?.name || null;
  const toAddress = (Array.isArray(parsed.to) ? parsed.to[0] : parsed.to)?.value[0]?.address ?? null;
  const kind = classifyInboundEmail({
    header,
    contentType: header('content-type'),
    from: fromAddress,
    subject: parsed.subject ?? null,
  });
  const source = raw.toString('latin1');
  const bounced =
    kind === 'bounce'
      ? normalizeEmail(
          /^(?:Final|Original)-Recipient:\s*rfc822;\s*<?([^\s<>;]+@[^\s<>;]+)>?/im.exec(source)?.[1] ??
            header('x-failed-recipients')?.split(',')[0] ??
            null,
        )
      : null;
  const ownId = idsIn(parsed.messageId)[0] ?? `<sha256.${createHash('sha256').update(raw).digest('hex')}@inbound>`;
  const threadIds = [...idsIn(parsed.inReplyTo), ...idsIn(parsed.references).reverse()];
  // A bounce quotes the original message's headers; its Message-ID threads the bounce.
  if (kind === 'bounce')
    for (const m of source.matchAll(/^Message-ID:\s*(<[^<>\s]+>)/gim)) if (m[1] !== ownId) threadIds.push(m[1]!);
  const contact = kind === 'bounce' ? bounced : normalizeEmail(fromAddress);
  const dated =
    parsed.date && !Number.isNaN(parsed.date.getTime()) && parsed.date <= receivedAt ? parsed.date : receivedAt;
  const body = (parsed.text ?? '').trim().slice(0, 100_000);

  const result = await sql.begin(async (tx) => {
    const known = await tx<{ id: string; thread_id: string; kind: MessageKind }[]>`
      select id, thread_id, kind from inbox_messages where workspace_id = ${workspaceId} and external_id = ${ownId}`;
    if (known[0]) return { message_id: known[0].id, thread_id: known[0].thread_id, kind, duplicate: true };
    const [threaded] = threadIds.length
      ? await tx<{ thread_id: string }[]>`
          select thread_id from inbox_messages where workspace_id = ${workspaceId} and external_id = any(${threadIds}::text[])
          order by occurred_at desc limit 1`
      : [];
    let threadId = threaded?.thread_id ?? (await threadFromSequenceSend(tx, workspaceId, threadIds));
    if (!threadId) {
      if (!contact)
        throw new InboundEmailError(
          'The message names no sender (or, for a bounce, no failed recipient) to file it under.',
        );
      threadId = await upsertThread(
        tx,
        {
          workspaceId,
          channel: 'email',
          externalKey: ownId,
          subject: parsed.subject ?? null,
          contactEmail: contact,
          contactName: kind === 'reply' || kind === 'auto_reply' ? fromName : null,
          ourAddress: toAddress,
        },
        true,
      );
    } else {
      await fillThread(tx, threadId, {
        workspaceId,
        channel: 'email',
        externalKey: null,
        ourAddress: toAddress,
        contactName: kind === 'bounce' ? null : fromName,
      });
    }
    const saved = await insertMessage(tx, {
      workspaceId,
      threadId,
      direction: 'inbound',
      kind,
      fromEmail: kind === 'bounce' ? bounced : fromAddress,
      toEmail: toAddress,
      subject: parsed.subject ?? null,
      body,
      externalId: ownId,
      occurredAt: dated,
      inReplyTo: idsIn(parsed.inReplyTo)[0] ?? null,
      referenceIds: idsIn(parsed.references).slice(-20),
    });
    if (!saved.duplicate) await refreshThread(tx, threadId, true);
    return { message_id: saved.id, thread_id: saved.threadId, kind, duplicate: saved.duplicate };
  });
  return { ...result, wakeEmail: kind === 'auto_reply' ? null : contact };
}

export interface SequenceSendRow {
  contact_id: string;
  message_id: string;
  to_email: string | null;
  from_email: string | null;
  subject: string | null;
  body: string;
  sent_at: Date | null;
  created_at: Date;
}

/**
 * A reply to a sequence email (sequence_sends, migration 015, read only when present): the
 * thread is opened with that email in it and linked to its sequence contact.
 */
export async function threadFromSequenceSend(tx: Db, workspaceId: string, ids: string[]): Promise<string | undefined> {
  if (ids.length === 0) return undefined;
  const [present] = await tx<{ ok: boolean }[]>`select to_regclass('sequence_sends') is not null as ok`;
  if (!present?.ok) return undefined;
  let send: SequenceSendRow | undefined;
  try {
    [send] = await savepoint(
      tx,
      (sp) => sp<SequenceSendRow[]>`
      select contact_id, message_id, to_email, from_email, subject, body, sent_at, created_at from sequence_sends
      where workspace_id = ${workspaceId} and message_id = any(${ids}::text[]) and channel = 'email'
      order by created_at desc limit 1`,
    );
  } catch {
    return undefined;
  }
  if (!send?.to_email) return undefined;
  const threadId = await upsertThread(
    tx,
    {
      workspaceId,
      channel: 'email',
      externalKey: send.message_id,
      subject: send.subject,
      contactEmail: send.to_email,
      ourAddress: send.from_email,
    },
    true,
  );
  await tx`update inbox_threads set sequence_contact_id = coalesce(sequence_contact_id, ${send.contact_id}) where id = ${threadId}`;
  const sent = await insertMessage(tx, {
    workspaceId,
    threadId,
    direction: 'outbound',
    kind: 'sent',
    fromEmail: send.from_email,
    toEmail: send.to_email,
    subject: send.subject,
    body: send.body,
    externalId: send.message_id,
    occurredAt: send.sent_at ?? send.created_at,
    deliveryStatus: 'sent',
  });
  if (!sent.duplicate) await refreshThread(tx, threadId, false);
  return sent.threadId;
}

/** A message that cannot be filed (no sender to key it by); the webhook answers 422. */
export class InboundEmailError extends Error {
  override name = 'InboundEmailError';
}
