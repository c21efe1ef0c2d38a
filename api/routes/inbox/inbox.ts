/**
 * The unified inbox (the interface spec's What the service does): threads across email and pnet,
 * replies, labels, AI-suggested replies that wait for a person, settings of the inbound-email
 * webhook, and bulk do-not-contact with its reach (reachBulkDoNotContact).
 */
import { secretsKeyring } from '../../../services/platform/sealing.js';
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { ApiError, notFound } from '../../../domain/shared/errors.js';
import {
  BulkDncCreateSchema,
  BulkDncReachSchema,
  BulkDncResultSchema,
  InboxSettingsSchema,
  InboxSettingsUpdateSchema,
  LabelCreateSchema,
  LabelListSchema,
  LabelSchema,
  LabelUpdateSchema,
  MailboxCreateSchema,
  MailboxListSchema,
  MailboxSchema,
  MailboxUpdateSchema,
  MessageSchema,
  ReplyCreateSchema,
  SuggestionApproveSchema,
  SuggestionApprovedSchema,
  SuggestionListQuerySchema,
  SuggestionListSchema,
  SuggestionSchema,
  ThreadDetailSchema,
  ThreadIdsQuerySchema,
  ThreadLabelAddSchema,
  ThreadListQuerySchema,
  ThreadListSchema,
  ThreadSchema,
  ThreadUpdateSchema,
  WebhookSecretSchema,
  bulkThreadsMax,
} from '../../../domain/inbox/inbox.js';
import type { AppDeps } from '../../deps.js';
import {
  approveSuggestion,
  bulkDoNotContact,
  createMailbox,
  getMailbox,
  listMailboxes,
  updateMailbox,
  wakeMailbox,
  dismissSuggestion,
  peopleOfThreads,
  readThreadDetail,
  rotateWebhookSecret,
  sendReply,
  suggestReply,
  toSettings,
  updateLabel,
  updateSettings,
  updateThread,
  type InboxServiceDeps,
} from '../../../services/inbox/inbox.js';
import { listThreads, toMessage, toThread } from '../../../store/inbox/threads.js';
import { createLabel, deleteLabel, listLabels } from '../../../store/inbox/labels.js';
import { readSettings } from '../../../store/inbox/settings.js';
import { listSuggestions, readSuggestion, toSuggestion } from '../../../store/inbox/suggestions.js';
import { deleteMailbox } from '../../../store/inbox/mailboxes.js';
import { mailboxPollWorkflowId, pollMailboxNowSignal } from '../../../workflows/inbox/mailbox-poll.contract.js';
import { principalOf } from '../../plugins/auth.js';
import { wakeSequenceContacts } from '../../../services/sequences/stops.js';
import { setThreadLabel } from '../../../services/inbox/thread-labels.js';
import { actorOf } from '../../request-actor.js';

const tags = ['inbox'];
const ThreadParamsSchema = z.object({ thread_id: UuidSchema });
const ThreadLabelParamsSchema = z.object({ thread_id: UuidSchema, label_id: UuidSchema });
const LabelParamsSchema = z.object({ label_id: UuidSchema });
const SuggestionParamsSchema = z.object({ suggestion_id: UuidSchema });
const MailboxParamsSchema = z.object({ mailbox_id: UuidSchema });

export const inboxRoutes =
  (deps: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const { sql } = deps;
    const service: InboxServiceDeps = {
      sql,
      temporal: deps.temporal,
      mailer: deps.integrations.mailer,
      chatModel: deps.integrations.chatModel,
      businessContextChars: deps.integrations.businessDocuments.contextChars,
    };

    app.get(
      '/inbox/threads/',
      {
        schema: {
          operationId: 'listInboxThreads',
          tags,
          summary:
            'Threads across email and pnet, newest activity first, filtered by channel, unread, needs-reply, label and text',
          description:
            'Archived threads are left out unless `archived=true`, which lists only them. A new inbound message brings a thread back from the archive.',
          querystring: ThreadListQuerySchema,
          response: { 200: ThreadListSchema },
        },
      },
      async (request) => listThreads(sql, principalOf(request).workspaceId, request.query),
    );

    app.get(
      '/inbox/threads/bulk-do-not-contact/reach/',
      {
        schema: {
          operationId: 'reachBulkDoNotContact',
          tags,
          summary:
            'How many people a bulk do-not-contact of these threads reaches, and how many have no email (endpoint 7)',
          description:
            `Query parameter \`thread_ids\`, repeated once per thread, 1 to ${bulkThreadsMax} times: \`?thread_ids=<uuid>&thread_ids=<uuid>\`. ` +
            'Contacts are counted as people: threads with the same email or the same profile URL are one person (also across channels). ' +
            'A person without an email is not added to the list; only their current sequences stop. Ids of threads not in this workspace count for nothing.',
          querystring: ThreadIdsQuerySchema,
          response: { 200: BulkDncReachSchema },
        },
      },
      async (request) => {
        const { people, withoutEmail } = await peopleOfThreads(
          sql,
          principalOf(request).workspaceId,
          request.query.thread_ids,
        );
        return { people: people.length, without_email: withoutEmail };
      },
    );

    app.post(
      '/inbox/threads/bulk-do-not-contact/',
      {
        schema: {
          operationId: 'bulkDoNotContact',
          tags,
          summary:
            'Add the people of these threads who have an email to the do-not-contact list, and stop every current sequence of all of them',
          description: 'Counts as the reach does. Adding an email already listed is harmless. Answers the counts.',
          body: BulkDncCreateSchema,
          response: { 200: BulkDncResultSchema },
        },
      },
      async (request) => {
        const { workspaceId } = principalOf(request);
        const { result, wake } = await bulkDoNotContact(sql, workspaceId, request.body.thread_ids, {
          reason: request.body.reason,
          createdBy: actorOf(request),
        });
        if (result.people > 0) {
          wakeSequenceContacts(deps, workspaceId, wake).catch((err: unknown) =>
            request.log.warn({ err }, 'could not wake sequence contacts'),
          );
        }
        return result;
      },
    );

    app.get(
      '/inbox/threads/:thread_id/',
      {
        schema: {
          operationId: 'readInboxThread',
          tags,
          summary: 'A thread with its messages, oldest first',
          params: ThreadParamsSchema,
          response: { 200: ThreadDetailSchema, 404: DetailBodySchema },
        },
      },
      async (request) => {
        const thread = await readThreadDetail(sql, principalOf(request).workspaceId, request.params.thread_id);
        if (!thread) throw notFound('Thread');
        return thread;
      },
    );

    app.patch(
      '/inbox/threads/:thread_id/',
      {
        schema: {
          operationId: 'updateInboxThread',
          tags,
          summary: 'Mark a thread read or unread, archive it or bring it back',
          params: ThreadParamsSchema,
          body: ThreadUpdateSchema,
          response: { 200: ThreadSchema, 404: DetailBodySchema },
        },
      },
      async (request) => {
        const thread = await updateThread(
          sql,
          principalOf(request).workspaceId,
          request.params.thread_id,
          request.body,
        );
        if (!thread) throw notFound('Thread');
        return toThread(thread);
      },
    );

    app.post(
      '/inbox/threads/:thread_id/labels/',
      {
        schema: {
          operationId: 'addInboxThreadLabel',
          tags,
          summary: 'Put a label on a thread (again is harmless)',
          params: ThreadParamsSchema,
          body: ThreadLabelAddSchema,
          response: {
            200: ThreadSchema,
            404: DetailBodySchema.describe('The thread or the label is not in this workspace'),
          },
        },
      },
      async (request) =>
        setThreadLabel(sql, principalOf(request).workspaceId, request.params.thread_id, request.body.label_id, true),
    );

    app.delete(
      '/inbox/threads/:thread_id/labels/:label_id/',
      {
        schema: {
          operationId: 'removeInboxThreadLabel',
          tags,
          summary: 'Take a label off a thread (a label it does not carry is harmless)',
          params: ThreadLabelParamsSchema,
          response: { 200: ThreadSchema, 404: DetailBodySchema },
        },
      },
      async (request) =>
        setThreadLabel(sql, principalOf(request).workspaceId, request.params.thread_id, request.params.label_id, false),
    );

    app.post(
      '/inbox/threads/:thread_id/replies/',
      {
        schema: {
          operationId: 'replyInboxThread',
          tags,
          summary:
            'Reply on the thread’s channel: an email through the mail server, or a pnet message as a send_message step',
          description:
            'Email: sent from the address the contact wrote to (else the workspace `reply_from_address`), threaded with In-Reply-To and References. ' +
            'Its Message-ID is recorded before the send, so a retry with the same `idempotency_key` never sends a second message (200 with the reply already made). ' +
            'pnet: the step goes to the Tasks page first when the sender account runs in manual mode; the message reads `queued`.',
          params: ThreadParamsSchema,
          body: ReplyCreateSchema,
          response: {
            200: MessageSchema.describe('The reply this idempotency key already made'),
            201: MessageSchema,
            404: DetailBodySchema,
            409: DetailBodySchema.describe(
              'No address to reply to or from, no sender account, or not enough credits for a pnet message',
            ),
            502: DetailBodySchema.describe('The mail server refused; retry with the same idempotency key'),
            503: DetailBodySchema.describe('No mail server is configured'),
          },
        },
      },
      async (request, reply) => {
        const { workspaceId } = principalOf(request);
        const { message, created } = await sendReply(service, workspaceId, request.params.thread_id, {
          body: request.body.body,
          idempotencyKey: request.body.idempotency_key,
          sentBy: actorOf(request),
        });
        return reply.code(created ? 201 : 200).send(toMessage(message));
      },
    );

    app.post(
      '/inbox/threads/:thread_id/suggestions/',
      {
        schema: {
          operationId: 'suggestInboxReply',
          tags,
          summary:
            'Write a suggested reply to the contact’s last reply; it waits for a person to approve, edit or dismiss it',
          description:
            'Written by the configured chat model (1 credit, charged only when it is written) or, with none configured, by the local template writer ' +
            '(`model_key: local-template-writer`, free). One suggestion per inbound message: asking again answers the same one (200).',
          params: ThreadParamsSchema,
          response: {
            200: SuggestionSchema,
            201: SuggestionSchema,
            404: DetailBodySchema,
            409: DetailBodySchema.describe('No reply from the contact to answer, or not enough credits'),
            502: DetailBodySchema.describe('The model failed; nothing was charged'),
          },
        },
      },
      async (request, reply) => {
        const { suggestion, created } = await suggestReply(
          service,
          principalOf(request).workspaceId,
          request.params.thread_id,
        );
        return reply.code(created ? 201 : 200).send(suggestion);
      },
    );

    app.get(
      '/inbox/suggestions/',
      {
        schema: {
          operationId: 'listInboxSuggestions',
          tags,
          summary:
            'Suggested replies, newest first: pending ones (the approval queue) unless another status is asked for',
          querystring: SuggestionListQuerySchema,
          response: { 200: SuggestionListSchema },
        },
      },
      async (request) => ({ suggestions: await listSuggestions(sql, principalOf(request).workspaceId, request.query) }),
    );

    app.get(
      '/inbox/suggestions/:suggestion_id/',
      {
        schema: {
          operationId: 'readInboxSuggestion',
          tags,
          summary: 'Read a suggested reply',
          params: SuggestionParamsSchema,
          response: { 200: SuggestionSchema, 404: DetailBodySchema },
        },
      },
      async (request) => {
        const row = await readSuggestion(sql, principalOf(request).workspaceId, request.params.suggestion_id);
        if (!row) throw notFound('Suggestion');
        return toSuggestion(row);
      },
    );

    app.post(
      '/inbox/suggestions/:suggestion_id/approve/',
      {
        schema: {
          operationId: 'approveInboxSuggestion',
          tags,
          summary: 'Send a suggested reply, as written or edited (`body`)',
          description:
            'Only a pending suggestion; a decided one is 409 with nothing sent. A retried approval sends the same Message-ID, never a second reply.',
          params: SuggestionParamsSchema,
          body: SuggestionApproveSchema,
          response: {
            200: SuggestionApprovedSchema,
            404: DetailBodySchema,
            409: DetailBodySchema.describe('Already approved or dismissed, or no address to reply with'),
            502: DetailBodySchema,
            503: DetailBodySchema,
          },
        },
      },
      async (request) =>
        approveSuggestion(
          service,
          principalOf(request).workspaceId,
          request.params.suggestion_id,
          request.body.body,
          actorOf(request),
        ),
    );

    app.post(
      '/inbox/suggestions/:suggestion_id/dismiss/',
      {
        schema: {
          operationId: 'dismissInboxSuggestion',
          tags,
          summary: 'Dismiss a suggested reply; nothing is sent',
          params: SuggestionParamsSchema,
          response: {
            200: SuggestionSchema,
            404: DetailBodySchema,
            409: DetailBodySchema.describe('Already approved or dismissed'),
          },
        },
      },
      async (request) =>
        dismissSuggestion(sql, principalOf(request).workspaceId, request.params.suggestion_id, actorOf(request)),
    );

    app.get(
      '/inbox/labels/',
      {
        schema: {
          operationId: 'listInboxLabels',
          tags,
          summary: 'The workspace’s thread labels, alphabetical',
          response: { 200: LabelListSchema },
        },
      },
      async (request) => ({ labels: await listLabels(sql, principalOf(request).workspaceId) }),
    );

    app.post(
      '/inbox/labels/',
      {
        schema: {
          operationId: 'createInboxLabel',
          tags,
          summary: 'Create a label',
          body: LabelCreateSchema,
          response: { 201: LabelSchema, 409: DetailBodySchema.describe('A label has that name') },
        },
      },
      async (request, reply) => {
        const label = await createLabel(sql, principalOf(request).workspaceId, request.body);
        if (!label) throw new ApiError('conflict', 'A label with that name exists.');
        return reply.code(201).send(label);
      },
    );

    app.patch(
      '/inbox/labels/:label_id/',
      {
        schema: {
          operationId: 'updateInboxLabel',
          tags,
          summary: 'Rename or recolour a label',
          params: LabelParamsSchema,
          body: LabelUpdateSchema,
          response: {
            200: LabelSchema,
            404: DetailBodySchema,
            409: DetailBodySchema.describe('Another label has that name'),
          },
        },
      },
      async (request) => {
        const result = await updateLabel(sql, principalOf(request).workspaceId, request.params.label_id, request.body);
        if (result === 'missing') throw notFound('Label');
        if (result === 'taken') throw new ApiError('conflict', 'Another label has that name.');
        return result;
      },
    );

    app.delete(
      '/inbox/labels/:label_id/',
      {
        schema: {
          operationId: 'deleteInboxLabel',
          tags,
          summary: 'Delete a label; threads lose it',
          params: LabelParamsSchema,
          response: { 204: z.null().describe('Deleted'), 404: DetailBodySchema },
        },
      },
      async (request, reply) => {
        if (!(await deleteLabel(sql, principalOf(request).workspaceId, request.params.label_id)))
          throw notFound('Label');
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/inbox/mailboxes/',
      {
        schema: {
          operationId: 'createInboxMailbox',
          tags,
          summary: 'Read a mailbox over IMAP: its new messages arrive like webhook deliveries, every `poll_seconds`',
          description:
            'A workflow per mailbox (`inbox-mailbox/<id>`) reads the folder read-only from a durable cursor (UIDVALIDITY and last UID) and starts at once. ' +
            'A failed login or connection is kept in `last_error` and tried again at the next poll. The password is stored to log in and never returned.',
          body: MailboxCreateSchema,
          response: {
            201: MailboxSchema,
            409: DetailBodySchema.describe('The workspace already reads that folder of that user on that host'),
          },
        },
      },
      async (request, reply) => {
        const { workspaceId } = principalOf(request);
        const mailbox = await createMailbox(
          sql,
          workspaceId,
          request.body,
          await secretsKeyring(sql, deps.integrations),
        );
        if (!mailbox)
          throw new ApiError('conflict', 'This workspace already reads that folder of that user on that host.');
        await wakeMailbox(deps.temporal.client, deps.temporal.taskQueue, { id: mailbox.id, workspaceId });
        return reply.code(201).send(mailbox);
      },
    );

    app.get(
      '/inbox/mailboxes/',
      {
        schema: {
          operationId: 'listInboxMailboxes',
          tags,
          summary: 'The mailboxes read over IMAP, with their cursor and last poll',
          response: { 200: MailboxListSchema },
        },
      },
      async (request) => ({ mailboxes: await listMailboxes(sql, principalOf(request).workspaceId) }),
    );

    app.get(
      '/inbox/mailboxes/:mailbox_id/',
      {
        schema: {
          operationId: 'readInboxMailbox',
          tags,
          summary: 'Read a mailbox',
          params: MailboxParamsSchema,
          response: { 200: MailboxSchema, 404: DetailBodySchema },
        },
      },
      async (request) => {
        const mailbox = await getMailbox(sql, principalOf(request).workspaceId, request.params.mailbox_id);
        if (!mailbox) throw notFound('Mailbox');
        return mailbox;
      },
    );

    app.patch(
      '/inbox/mailboxes/:mailbox_id/',
      {
        schema: {
          operationId: 'updateInboxMailbox',
          tags,
          summary:
            'Change a mailbox’s connection, folder or interval, or switch it off (`enabled: false` ends its workflow)',
          params: MailboxParamsSchema,
          body: MailboxUpdateSchema,
          response: {
            200: MailboxSchema,
            404: DetailBodySchema,
            409: DetailBodySchema.describe('Another mailbox reads that folder of that user on that host'),
          },
        },
      },
      async (request) => {
        const { workspaceId } = principalOf(request);
        const result = await updateMailbox(
          sql,
          workspaceId,
          request.params.mailbox_id,
          request.body,
          await secretsKeyring(sql, deps.integrations),
        );
        if (result === 'missing') throw notFound('Mailbox');
        if (result === 'taken')
          throw new ApiError(
            'conflict',
            'Another mailbox of this workspace reads that folder of that user on that host.',
          );
        // A running workflow reads at once with the new settings (and ends if switched off); a stopped one starts again.
        await wakeMailbox(deps.temporal.client, deps.temporal.taskQueue, { id: result.id, workspaceId });
        return result;
      },
    );

    app.post(
      '/inbox/mailboxes/:mailbox_id/poll/',
      {
        schema: {
          operationId: 'pollInboxMailbox',
          tags,
          summary: 'Read the mailbox now instead of at the next interval',
          description:
            'Answers at once with the mailbox as it stands; the read shows in `last_polled_at` shortly after.',
          params: MailboxParamsSchema,
          response: {
            202: MailboxSchema,
            404: DetailBodySchema,
            409: DetailBodySchema.describe('The mailbox is switched off'),
          },
        },
      },
      async (request, reply) => {
        const { workspaceId } = principalOf(request);
        const mailbox = await getMailbox(sql, workspaceId, request.params.mailbox_id);
        if (!mailbox) throw notFound('Mailbox');
        if (!mailbox.enabled) throw new ApiError('conflict', 'The mailbox is switched off; enable it first.');
        await wakeMailbox(deps.temporal.client, deps.temporal.taskQueue, { id: mailbox.id, workspaceId });
        return reply.code(202).send(mailbox);
      },
    );

    app.delete(
      '/inbox/mailboxes/:mailbox_id/',
      {
        schema: {
          operationId: 'deleteInboxMailbox',
          tags,
          summary: 'Stop reading a mailbox; the messages already recorded stay in the inbox',
          params: MailboxParamsSchema,
          response: { 204: z.null().describe('Deleted'), 404: DetailBodySchema },
        },
      },
      async (request, reply) => {
        const { workspaceId } = principalOf(request);
        if (!(await deleteMailbox(sql, workspaceId, request.params.mailbox_id))) throw notFound('Mailbox');
        // Its workflow finds the row gone at its next read and ends; asking it to read now ends it now.
        await deps.temporal.client.workflow
          .getHandle(mailboxPollWorkflowId(request.params.mailbox_id))
          .signal(pollMailboxNowSignal)
          .catch(() => undefined);
        return reply.code(204).send(null);
      },
    );

    app.get(
      '/inbox/settings/',
      {
        schema: {
          operationId: 'readInboxSettings',
          tags,
          summary: 'The inbound-email webhook and the reply address',
          response: { 200: InboxSettingsSchema },
        },
      },
      async (request) => toSettings(await readSettings(sql, principalOf(request).workspaceId)),
    );

    app.patch(
      '/inbox/settings/',
      {
        // The reply-from address is the whole workspace's sending identity.
        config: { role: 'admin' },
        schema: {
          operationId: 'updateInboxSettings',
          tags,
          summary: 'Set the address (and name) replies are sent from when a thread does not name ours',
          description: 'A field left out keeps its value.',
          body: InboxSettingsUpdateSchema,
          response: { 200: InboxSettingsSchema },
        },
      },
      async (request) => toSettings(await updateSettings(sql, principalOf(request).workspaceId, request.body)),
    );

    app.post(
      '/inbox/settings/webhook-secret/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'rotateInboxWebhookSecret',
          tags,
          summary: 'Make a new inbound-email webhook secret (admins); the old one stops working at once',
          description: 'The secret is shown only in this answer.',
          response: { 201: WebhookSecretSchema },
        },
      },
      async (request, reply) => reply.code(201).send(await rotateWebhookSecret(sql, principalOf(request).workspaceId)),
    );
  };
