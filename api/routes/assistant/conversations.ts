/**
 * The assistant's conversations and their answers (the interface spec's Events section: the general
 * chat streamed as Server-Sent Events). Posting a message writes the question and the answer's row,
 * starts the answer's turn and streams its parts as the turn writes them to Postgres; the same
 * answer can be read again, or resumed with Last-Event-ID, from any API process.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { UuidSchema } from '../../../domain/shared/common.js';
import { ApiError } from '../../../domain/shared/errors.js';
import {
  ConversationCreateSchema,
  ConversationListQuerySchema,
  ConversationListSchema,
  ConversationReadSchema,
  ConversationSchema,
  ConversationUpdateSchema,
  MessageCreateSchema,
  defaultConversationTitle,
  titleFrom,
} from '../../../domain/assistant/assistant.js';
import { StreamEventSchema } from '../../../domain/assistant/stream.js';
import type { AnswerStreamHub } from '../../../services/assistant/answer-stream.js';
import { startTurn } from '../../../services/assistant/turn-client.js';
import {
  createConversation,
  findAnswer,
  findConversation,
  failAnswer,
  insertTurn,
  listConversations,
  listMessages,
  updateConversation,
} from '../../../store/assistant/conversations.js';
import type { AppDeps } from '../../deps.js';
import { sendAnswerStream } from '../../assistant-http.js';
import { readerOf } from '../../request-actor.js';

const tags = ['assistant'];
const ConversationParamsSchema = z.object({ conversation_id: UuidSchema });
const AnswerParamsSchema = z.object({ conversation_id: UuidSchema, message_id: UuidSchema });
const StreamHeadersSchema = z.object({
  'last-event-id': z
    .string()
    .regex(/^\d{1,9}$/)
    .optional()
    .describe('The id of the last event read: the stream resumes after it'),
});
const streamResponse = {
  200: {
    description:
      'text/event-stream in the AI SDK UI message stream protocol (header `x-vercel-ai-ui-message-stream: v1`): each event (AssistantStreamEvent) a JSON part (AssistantStreamPart) with its position as the SSE id, ' +
      'ending with `data: [DONE]` after `finish` or `error`. A comment line every 15 s keeps proxies from closing a quiet stream.',
    content: { 'text/event-stream': { schema: StreamEventSchema } },
  },
};
export const noChatModelDetail =
  'The assistant has no chat model: set OPENAI_API_KEY and OPENAI_MODEL (and OPENAI_BASE_URL for any other OpenAI-compatible API) and restart the service.';

export const assistantConversationRoutes =
  (deps: AppDeps, hub: AnswerStreamHub): FastifyPluginAsyncZod =>
  async (app) => {
    const { sql, temporal } = deps;
    app.addHook('preClose', async () => hub.close());

    app.post(
      '/assistant/conversations/',
      {
        schema: {
          operationId: 'createAssistantConversation',
          tags,
          summary: 'Start a conversation (its title defaults to the first question)',
          body: ConversationCreateSchema,
          response: { 201: ConversationSchema },
        },
      },
      async (request, reply) =>
        reply
          .code(201)
          .send(await createConversation(sql, readerOf(request), request.body.title ?? defaultConversationTitle)),
    );

    app.get(
      '/assistant/conversations/',
      {
        schema: {
          operationId: 'listAssistantConversations',
          tags,
          summary: "The caller's conversations, most recently active first; an admin may ask for every member's",
          querystring: ConversationListQuerySchema,
          response: { 200: ConversationListSchema },
        },
      },
      async (request) =>
        listConversations(sql, readerOf(request), {
          archived: request.query.archived ?? false,
          allMembers: request.query.all_members ?? false,
          limit: request.query.limit,
          offset: request.query.offset,
        }),
    );

    app.get(
      '/assistant/conversations/:conversation_id/',
      {
        schema: {
          operationId: 'readAssistantConversation',
          tags,
          summary: 'Read a conversation with its messages, oldest first',
          description:
            "A member reads their own conversations; a workspace admin reads every member's. Another's is 404.",
          params: ConversationParamsSchema,
          response: { 200: ConversationReadSchema },
        },
      },
      async (request) => {
        const conversation = await findConversation(sql, readerOf(request), request.params.conversation_id);
        return { ...conversation, messages: await listMessages(sql, conversation.id) };
      },
    );

    app.patch(
      '/assistant/conversations/:conversation_id/',
      {
        schema: {
          operationId: 'updateAssistantConversation',
          tags,
          summary: 'Rename or archive (or unarchive) a conversation; a field left out keeps its value',
          params: ConversationParamsSchema,
          body: ConversationUpdateSchema,
          response: { 200: ConversationSchema },
        },
      },
      async (request) => updateConversation(sql, readerOf(request), request.params.conversation_id, request.body),
    );

    app.post(
      '/assistant/conversations/:conversation_id/messages/',
      {
        schema: {
          operationId: 'sendAssistantMessage',
          tags,
          summary: 'Ask the assistant: the answer streams back as Server-Sent Events',
          description:
            'The question and the answer are kept in the conversation. The answer is one durable process: a client that loses the stream reads the rest with ' +
            'GET …/messages/{message_id}/stream/ and `Last-Event-ID`, without a second model call. Each workspace action the assistant proposes arrives as a ' +
            '`data-proposal` part (a card, 2.12). 503 when no chat model is configured (the detail names the variables to set); an archived conversation is 409.',
          params: ConversationParamsSchema,
          body: MessageCreateSchema,
          response: streamResponse,
        },
      },
      async (request, reply) => {
        if (!deps.integrations.chatModel) throw new ApiError('unavailable', noChatModelDetail);
        const reader = readerOf(request);
        const conversationId = request.params.conversation_id;
        const turn = await insertTurn(
          sql,
          reader,
          conversationId,
          request.body.content,
          titleFrom(request.body.content),
        );
        // The answer's row and its `start` event are committed: the stream opens now and the turn
        // starts beside it. A start that fails ends the answer with an error event; one lost with
        // this process is made good by the next read of the answer's stream.
        const started = startTurn(temporal, {
          messageId: turn.assistantMessageId,
          workspaceId: reader.workspaceId,
          conversationId,
        }).catch(async (error: unknown) => {
          request.log.error({ err: error }, 'could not start the assistant turn');
          await failAnswer(sql, turn.assistantMessageId, 'The answer could not be started; ask again.');
        });
        void started;
        return sendAnswerStream(hub, reply, turn.assistantMessageId, 0, {
          seq: 1,
          part: { type: 'start', messageId: turn.assistantMessageId },
        });
      },
    );

    app.get(
      '/assistant/conversations/:conversation_id/messages/:message_id/stream/',
      {
        schema: {
          operationId: 'streamAssistantAnswer',
          tags,
          summary: "An answer's event stream, from the start or after Last-Event-ID",
          description:
            'Resumes the same answer from Postgres: the parts already written, then the rest live. A finished answer replays and ends.',
          params: AnswerParamsSchema,
          headers: StreamHeadersSchema,
          response: streamResponse,
        },
      },
      async (request, reply) => {
        const reader = readerOf(request);
        const answer = await findAnswer(sql, reader, request.params.conversation_id, request.params.message_id);
        // An answer still streaming has its turn: started here again (a no-op when it runs) in case the asking request's start was lost.
        if (answer.status === 'streaming')
          await startTurn(temporal, {
            messageId: answer.id,
            workspaceId: reader.workspaceId,
            conversationId: request.params.conversation_id,
          });
        return sendAnswerStream(hub, reply, answer.id, Number(request.headers['last-event-id'] ?? 0));
      },
    );
  };
