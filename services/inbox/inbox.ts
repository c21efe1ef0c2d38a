/** The unified inbox's use cases: threads and labels, settings, replies, suggestions, bulk do-not-contact and mailboxes, over the store. */
import { seal, type Keyring } from '../../integrations/secrets/sealed.js';
import { businessContext } from '../../store/documents/documents.js';
import { businessContextSection, contextCharsDefault } from '../../domain/documents/documents.js';
import type { Client } from '@temporalio/client';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { ChatModel } from '../../integrations/chat-model.js';
import { chargeHold, holdCredits, releaseHold } from '../../store/platform/credits.js';
import { insertMessage, refreshThread } from '../../store/inbox/messages.js';
import {
  findThread,
  iso,
  markDeliveryFailed,
  markDeliverySent,
  markThreadRead,
  messageByExternalId,
  messageById,
  patchThread,
  threadContacts,
  threadMessages,
  toMessage,
  toThread,
  type MessageRow,
} from '../../store/inbox/threads.js';
import { getLabel, labelNameTaken, setLabel } from '../../store/inbox/labels.js';
import { readSettings, storeWebhookSecret, upsertReplyFrom, type SettingsRow } from '../../store/inbox/settings.js';
import {
  insertSuggestion,
  markSuggestionApproved,
  markSuggestionDismissed,
  readSuggestion,
  suggestionFor,
  toSuggestion,
} from '../../store/inbox/suggestions.js';
import { insertMailbox, mailboxRow, mailboxRows, setMailbox, type MailboxRow } from '../../store/inbox/mailboxes.js';
import { recordContactStops } from '../../store/sequences/stops.js';
import type { Db, Sql } from '../../db/sql.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import {
  countPeople,
  suggestionPriceCredits,
  type Label,
  type Mailbox,
  type MailboxCreate,
  type MailboxUpdate,
  type Suggestion,
} from '../../domain/inbox/inbox.js';
import { mailboxPollWorkflow } from '../../workflows/inbox/mailbox-poll.js';
import { mailboxPollWorkflowId, pollMailboxNowSignal } from '../../workflows/inbox/mailbox-poll.contract.js';
import { WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';
import { startStepWorkflow } from '../pnet/browser-step-client.js';
import { addEntries } from '../../store/inbox/do-not-contact.js';
import { accountRunMode, insertStep } from '../../store/pnet/step-queue.js';
import { Mailer } from '../../integrations/mailer.js';
import { SuggestionContext, SuggestionDraft, templateSuggestion, modelSuggestion } from './suggestions.js';
import type { TemporalHandle } from '../deps.js';

export async function readThreadDetail(db: Db, workspaceId: string, threadId: string) {
  const thread = await findThread(db, workspaceId, threadId);
  if (!thread) return null;
  return { ...toThread(thread), messages: (await threadMessages(db, threadId)).map(toMessage) };
}

export async function updateThread(
  db: Db,
  workspaceId: string,
  threadId: string,
  patch: { unread?: boolean; archived?: boolean },
) {
  return (await patchThread(db, workspaceId, threadId, patch)) ? findThread(db, workspaceId, threadId) : null;
}

// Labels

/** 'missing', 'taken', or the label. */
export async function updateLabel(
  db: Db,
  workspaceId: string,
  labelId: string,
  input: { name?: string; color?: string | null },
): Promise<Label | 'missing' | 'taken'> {
  const current = await getLabel(db, workspaceId, labelId);
  if (!current) return 'missing';
  const name = input.name ?? current.name;
  if (name !== current.name) {
    if (await labelNameTaken(db, workspaceId, name, labelId)) return 'taken';
  }
  const color = input.color === undefined ? current.color : input.color;
  return setLabel(db, labelId, name, color);
}

// Settings

export const toSettings = (s: SettingsRow) => ({
  webhook_path: '/inbox/inbound-email/',
  webhook_secret_set: s.webhook_secret !== null,
  webhook_secret_rotated_at: iso(s.webhook_secret_rotated_at),
  reply_from_address: s.reply_from_address,
  reply_from_name: s.reply_from_name,
});

export async function updateSettings(
  db: Db,
  workspaceId: string,
  patch: { reply_from_address?: string | null; reply_from_name?: string | null },
) {
  const address = patch.reply_from_address === undefined ? null : (patch.reply_from_address?.toLowerCase() ?? null);
  await upsertReplyFrom(db, workspaceId, patch, address);
  return readSettings(db, workspaceId);
}

export async function rotateWebhookSecret(db: Db, workspaceId: string) {
  const secret = `whsec_${randomBytes(32).toString('base64url')}`;
  const rotatedAt = await storeWebhookSecret(db, workspaceId, secret);
  return { secret, rotated_at: rotatedAt.toISOString() };
}

// The people behind threads (reachBulkDoNotContact and the bulk action)

/** The selected threads' contacts grouped into people; ids of other workspaces count for nothing. */
export async function peopleOfThreads(db: Db | Sql, workspaceId: string, threadIds: string[]) {
  const rows = await threadContacts(db, workspaceId, threadIds);
  const counted = countPeople(rows.map((r) => ({ email: r.contact_email, profileUrl: r.contact_profile_url })));
  return {
    ...counted,
    sequenceContactIds: rows.map((r) => r.sequence_contact_id).filter((id): id is string => id !== null),
  };
}

// ---------------------------------------------------------------------------------------------
// Replies, suggestions and bulk do-not-contact: SQL around a send or a model call.

export interface InboxServiceDeps {
  sql: Sql;
  temporal: TemporalHandle;
  mailer: Mailer | null;
  chatModel: ChatModel | null;
  /** Characters of business context a suggestion's prompt reads (DOCUMENT_CONTEXT_CHARS). */
  businessContextChars?: number;
}

const replySubject = (subject: string | null) =>
  subject ? (/^re:/i.test(subject) ? subject : `Re: ${subject}`) : '(no subject)';

/**
 * Replies on the thread's channel. Email: the outbound row with its Message-ID is committed
 * ('sending') before the mail server is asked, so a retry (the same idempotency key) sends that
 * same Message-ID again at most, and a reply already sent is answered as it is. pnet: a
 * send_message step for the thread's sender account (manual mode puts it on the Tasks page).
 */
export async function sendReply(
  deps: InboxServiceDeps,
  workspaceId: string,
  threadId: string,
  input: { body: string; idempotencyKey?: string; sentBy: string | null },
): Promise<{ message: MessageRow; created: boolean }> {
  const { sql } = deps;
  const thread = await findThread(sql, workspaceId, threadId);
  if (!thread) throw notFound('Thread');
  const token = input.idempotencyKey
    ? createHash('sha256').update(`${workspaceId}:${threadId}:${input.idempotencyKey}`).digest('hex').slice(0, 32)
    : randomUUID();

  if (thread.channel === 'pnet') {
    const externalId = `pnet-reply:${token}`;
    const known = await messageByExternalId(sql, workspaceId, externalId);
    if (known) return { message: known, created: false };
    if (!thread.pnet_account_id || !thread.contact_profile_url)
      throw new ApiError('conflict', 'This conversation has no sender account to reply through.');
    const runMode = await accountRunMode(sql, workspaceId, thread.pnet_account_id);
    if (!runMode) throw new ApiError('conflict', 'The sender account of this conversation is gone.');
    const step = await insertStep(
      sql,
      workspaceId,
      {
        account_id: thread.pnet_account_id,
        params: { kind: 'send_message', profile_url: `https://${thread.contact_profile_url}`, body: input.body },
        contact_key: null,
        sequence_id: null,
        run_before: null,
        test: false,
      },
      runMode,
    );
    const saved = await sql.begin(async (tx) => {
      const m = await insertMessage(tx, {
        workspaceId,
        threadId,
        direction: 'outbound',
        kind: 'sent',
        body: input.body,
        externalId,
        occurredAt: new Date(),
        deliveryStatus: 'queued',
        sentBy: input.sentBy,
        browserStepId: step.id,
      });
      await refreshThread(tx, threadId, false);
      await markThreadRead(tx, threadId);
      return m;
    });
    await startStepWorkflow({ ...deps.temporal, sql }, step);
    return { message: await messageById(sql, saved.id), created: true };
  }

  if (!thread.contact_email) throw new ApiError('conflict', 'This conversation has no email address to reply to.');
  const settings = await readSettings(sql, workspaceId);
  const from = thread.our_address ?? settings.reply_from_address;
  if (!from)
    throw new ApiError('conflict', 'No address to reply from: set `reply_from_address` in PATCH /inbox/settings/.');
  if (!deps.mailer)
    throw new ApiError('unavailable', 'No mail server is configured here (SMTP_URL); replies cannot be sent.');
  const messageId = `<reply.${token}@${from.split('@')[1]}>`;
  const existing = await messageByExternalId(sql, workspaceId, messageId);
  if (existing?.delivery_status === 'sent') return { message: existing, created: false };
  const history = await threadMessages(sql, threadId);
  const previous = [...history]
    .reverse()
    .find(
      (m) =>
        m.external_id &&
        m.external_id !== messageId &&
        m.delivery_status !== 'failed' &&
        m.delivery_status !== 'sending',
    );
  const references = previous ? [...previous.reference_ids, previous.external_id!].slice(-20) : [];
  const subject = replySubject(thread.subject);
  const saved = await sql.begin(async (tx) => {
    const m = await insertMessage(tx, {
      workspaceId,
      threadId,
      direction: 'outbound',
      kind: 'sent',
      fromEmail: from,
      toEmail: thread.contact_email,
      subject,
      body: input.body,
      externalId: messageId,
      occurredAt: new Date(),
      inReplyTo: previous?.external_id ?? null,
      referenceIds: references,
      deliveryStatus: 'sending',
      sentBy: input.sentBy,
    });
    await refreshThread(tx, threadId, false);
    await markThreadRead(tx, threadId);
    return m;
  });
  const row = await messageById(sql, saved.id);
  try {
    await deps.mailer.send({
      messageId,
      from: { name: settings.reply_from_name, address: from },
      to: thread.contact_email,
      subject,
      text: row.body,
      inReplyTo: row.in_reply_to,
      references: row.reference_ids,
    });
  } catch (err) {
    await markDeliveryFailed(sql, row.id, String((err as Error).message).slice(0, 500));
    throw new ApiError(
      'bad_gateway',
      `The mail server did not take the reply: ${String((err as Error).message).slice(0, 200)}. Retry with the same idempotency_key.`,
    );
  }
  await markDeliverySent(sql, row.id);
  return { message: await messageById(sql, row.id), created: !saved.duplicate };
}

/**
 * A suggested reply to the thread's last inbound reply, one per message (asking again answers the
 * same one). A model-written one costs `suggestionPriceCredits`, held before the call, charged
 * with the insert, released if the call fails; the local template writer is free.
 */
export async function suggestReply(
  deps: InboxServiceDeps,
  workspaceId: string,
  threadId: string,
): Promise<{ suggestion: Suggestion; created: boolean }> {
  const { sql } = deps;
  const thread = await findThread(sql, workspaceId, threadId);
  if (!thread) throw notFound('Thread');
  const history = await threadMessages(sql, threadId);
  const answering = [...history].reverse().find((m) => m.direction === 'inbound' && m.kind === 'reply');
  if (!answering) throw new ApiError('conflict', 'This conversation has no reply from the contact to answer.');
  const known = await suggestionFor(sql, answering.id);
  if (known) return { suggestion: toSuggestion(known), created: false };
  const context: SuggestionContext = {
    channel: thread.channel,
    contactName: thread.contact_name,
    subject: thread.subject,
    messages: history
      .filter((m) => m.kind === 'reply' || m.kind === 'sent')
      .map((m) => ({ direction: m.direction, body: m.body })),
    answering: answering.body,
    business: businessContextSection(
      await businessContext(sql, workspaceId, deps.businessContextChars ?? contextCharsDefault),
    ),
  };
  const id = randomUUID();
  const insert = (db: Db, draft: SuggestionDraft, credits: number) =>
    insertSuggestion(db, {
      id,
      workspaceId,
      threadId,
      messageId: answering.id,
      subject: draft.subject,
      body: draft.body,
      modelKey: draft.modelKey,
      credits,
    });
  const model = deps.chatModel;
  if (!model) {
    const row = await insert(sql, templateSuggestion(context), 0);
    return row
      ? { suggestion: toSuggestion(row), created: true }
      : { suggestion: toSuggestion((await suggestionFor(sql, answering.id))!), created: false };
  }
  const causeKey = `inbox-suggestion:${id}`;
  const hold = await sql.begin((tx) => holdCredits(tx, { workspaceId, amount: suggestionPriceCredits, causeKey }));
  let draft: SuggestionDraft;
  try {
    draft = await modelSuggestion(model, context);
  } catch (err) {
    await sql.begin((tx) => releaseHold(tx, hold.id));
    throw new ApiError(
      'bad_gateway',
      `The model could not write a suggestion: ${String((err as Error).message).slice(0, 200)}`,
    );
  }
  const row = await sql.begin(async (tx) => {
    const made = await insert(tx, draft, suggestionPriceCredits);
    // Someone else's suggestion for this message landed first: this one is not kept, nor charged.
    if (made) await chargeHold(tx, hold.id);
    else await releaseHold(tx, hold.id);
    return made ?? (await suggestionFor(tx, answering.id))!;
  });
  return { suggestion: toSuggestion(row), created: row.id === id };
}

/** Sends the suggestion (or the person's edit of it) as a reply; only a pending one. */
export async function approveSuggestion(
  deps: InboxServiceDeps,
  workspaceId: string,
  suggestionId: string,
  edit: string | undefined,
  actor: string | null,
) {
  const current = await readSuggestion(deps.sql, workspaceId, suggestionId);
  if (!current) throw notFound('Suggestion');
  if (current.status !== 'pending')
    throw new ApiError('conflict', `The suggestion is already ${current.status}; nothing changed.`);
  const body = edit ?? current.body;
  // The key makes a retried approval send the same Message-ID, never a second reply.
  const { message } = await sendReply(deps, workspaceId, current.thread_id, {
    body,
    idempotencyKey: `suggestion.${suggestionId}`,
    sentBy: actor,
  });
  const row = await markSuggestionApproved(deps.sql, suggestionId, {
    sentMessageId: message.id,
    edited: body !== current.body,
    body,
    actor,
  });
  return {
    suggestion: toSuggestion(row ?? (await readSuggestion(deps.sql, workspaceId, suggestionId))!),
    message: toMessage(message),
  };
}

export async function dismissSuggestion(
  db: Db,
  workspaceId: string,
  suggestionId: string,
  actor: string | null,
): Promise<Suggestion> {
  const row = await markSuggestionDismissed(db, workspaceId, suggestionId, actor);
  if (row) return toSuggestion(row);
  const current = await readSuggestion(db, workspaceId, suggestionId);
  if (!current) throw notFound('Suggestion');
  throw new ApiError('conflict', `The suggestion is already ${current.status}; nothing changed.`);
}

/**
 * Bulk do-not-contact: every email of the selected people goes on the list, and every one of
 * them (email or not) gets a stop row, so their current sequences stop at the next check.
 */
export async function bulkDoNotContact(
  sql: Sql,
  workspaceId: string,
  threadIds: string[],
  options: { reason: string | null; createdBy: string | null },
) {
  return sql.begin(async (tx) => {
    const { people, withoutEmail, sequenceContactIds } = await peopleOfThreads(tx, workspaceId, threadIds);
    const emails = [...new Set(people.flatMap((p) => p.emails))];
    const profileUrls = [...new Set(people.flatMap((p) => p.profileUrls))];
    const listed = await addEntries(
      tx,
      workspaceId,
      emails.map((value) => ({ kind: 'email' as const, value })),
      {
        reason: options.reason,
        source: 'inbox_bulk',
        createdBy: options.createdBy,
      },
    );
    const reason = 'inbox_bulk_do_not_contact';
    await recordContactStops(tx, workspaceId, { emails, profileUrls, sequenceContactIds }, reason, options.createdBy);
    return {
      result: {
        people: people.length,
        without_email: withoutEmail,
        added: listed.added,
        already_listed: listed.existing,
        stopped: people.length,
      },
      wake: { emails, profileUrls, sequenceContactIds },
    };
  });
}

// IMAP mailboxes

export const toMailbox = (r: MailboxRow): Mailbox => ({
  id: r.id,
  address: r.address,
  host: r.host,
  port: r.port,
  secure: r.secure,
  username: r.username,
  folder: r.folder,
  poll_seconds: r.poll_seconds,
  enabled: r.enabled,
  uid_validity: r.uid_validity,
  last_uid: r.last_uid,
  messages_recorded: r.messages_recorded,
  last_polled_at: iso(r.last_polled_at),
  last_error: r.last_error,
  workflow_id: mailboxPollWorkflowId(r.id),
  created_at: r.created_at.toISOString(),
});

/** null when the workspace already reads that folder of that user on that host. */
/** What a mailbox's password is sealed with: its column and workspace, so a value copied elsewhere does not open. */
export const mailboxPasswordContext = (workspaceId: string) => `inbox_mailboxes.password_sealed:${workspaceId}`;

export async function createMailbox(
  db: Db,
  workspaceId: string,
  m: MailboxCreate,
  keyring: Keyring,
): Promise<Mailbox | null> {
  const { password, ...rest } = m;
  const row = await insertMailbox(db, workspaceId, rest, seal(keyring, password, mailboxPasswordContext(workspaceId)));
  return row ? toMailbox(row) : null;
}

export async function listMailboxes(db: Db, workspaceId: string): Promise<Mailbox[]> {
  return (await mailboxRows(db, workspaceId)).map(toMailbox);
}

export async function getMailbox(db: Db, workspaceId: string, mailboxId: string): Promise<Mailbox | null> {
  const row = await mailboxRow(db, workspaceId, mailboxId);
  return row ? toMailbox(row) : null;
}

/** 'missing', 'taken', or the mailbox. Another host, user or folder starts the cursor again. */
export async function updateMailbox(
  db: Db,
  workspaceId: string,
  mailboxId: string,
  p: MailboxUpdate,
  keyring: Keyring,
): Promise<Mailbox | 'missing' | 'taken'> {
  const current = await getMailbox(db, workspaceId, mailboxId);
  if (!current) return 'missing';
  const host = p.host?.toLowerCase() ?? current.host;
  const username = p.username ?? current.username;
  const folder = p.folder ?? current.folder;
  const moved = host !== current.host || username !== current.username || folder !== current.folder;
  try {
    const row = await setMailbox(db, workspaceId, mailboxId, {
      host,
      username,
      folder,
      port: p.port ?? current.port,
      secure: p.secure ?? current.secure,
      passwordSealed: p.password ? seal(keyring, p.password, mailboxPasswordContext(workspaceId)) : null,
      poll_seconds: p.poll_seconds ?? current.poll_seconds,
      enabled: p.enabled ?? current.enabled,
      uid_validity: moved ? null : current.uid_validity,
      last_uid: moved ? 0 : current.last_uid,
    });
    return row ? toMailbox(row) : 'missing';
  } catch (err) {
    if ((err as { code?: string }).code === '23505') return 'taken';
    throw err;
  }
}

/** Starts the mailbox's polling workflow, or asks the running one to read now. */
export async function wakeMailbox(
  client: Client,
  taskQueue: string,
  mailbox: { id: string; workspaceId: string },
): Promise<void> {
  await client.workflow.signalWithStart(mailboxPollWorkflow, {
    taskQueue,
    workflowId: mailboxPollWorkflowId(mailbox.id),
    args: [{ mailboxId: mailbox.id, workspaceId: mailbox.workspaceId }],
    signal: pollMailboxNowSignal,
    typedSearchAttributes: [{ key: WorkspaceIdKey, value: mailbox.workspaceId }],
  });
}
