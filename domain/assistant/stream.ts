/**
 * The assistant's answer as a stream (spec 6, 6.1 "event names and payloads: not shown"): the
 * Vercel AI SDK's UI message stream protocol (v1), so existing chat front-ends (`useChat`) read it
 * as they are. Each event is one SSE `data:` line holding a JSON part; its SSE `id` is the part's
 * position in the answer, so a client reconnecting with `Last-Event-ID` gets the rest of the same
 * answer from Postgres. The stream ends with `data: [DONE]`.
 */
import { z } from 'zod';
import { ProposalSchema } from './assistant.js';

export const uiMessageStreamHeader = { 'x-vercel-ai-ui-message-stream': 'v1' } as const;

const Part = <T extends z.ZodRawShape>(type: string, shape: T, description: string) =>
  z.object({ type: z.literal(type), ...shape }).describe(description);

export const StreamPartSchema = z
  .discriminatedUnion('type', [
    Part('start', { messageId: z.string() }, "The answer starts; `messageId` is the assistant message's id"),
    Part('start-step', {}, 'A model step starts'),
    Part('text-start', { id: z.string() }, 'A block of text starts'),
    Part('text-delta', { id: z.string(), delta: z.string() }, 'More text of the block'),
    Part('text-end', { id: z.string() }, 'The block of text is whole'),
    Part(
      'tool-input-available',
      { toolCallId: z.string(), toolName: z.string(), input: z.unknown() },
      'The model called a tool with this input',
    ),
    Part(
      'tool-output-available',
      { toolCallId: z.string(), output: z.unknown() },
      "The tool's result (a card raised, or what a read returned)",
    ),
    Part('tool-output-error', { toolCallId: z.string(), errorText: z.string() }, 'The tool call was refused or failed'),
    Part(
      'data-proposal',
      { id: z.string(), data: ProposalSchema },
      'A card as it was proposed (its later decisions are read from the cards list)',
    ),
    Part(
      'data-notice',
      { data: z.object({ code: z.string(), text: z.string() }) },
      'Something the reader should know, such as a model step asked again after an interruption',
    ),
    Part('finish-step', {}, 'The model step ended'),
    Part(
      'finish',
      { messageMetadata: z.object({ message_id: z.string(), conversation_id: z.string() }) },
      'The answer is complete',
    ),
    Part('error', { errorText: z.string() }, 'The answer failed; the stream ends after it'),
  ])
  .meta({ id: 'AssistantStreamPart' });
export type StreamPart = z.infer<typeof StreamPartSchema>;

/**
 * One event as Server-Sent Events frame it, which is what an OpenAPI 3.1 `text/event-stream` schema
 * describes: the `data` line holds a part's JSON (contentSchema), or `[DONE]` last. An EventSource
 * names an event without an `event:` line `message`.
 */
export const StreamEventSchema = z
  .union([
    z
      .object({
        event: z.literal('message').optional(),
        id: z
          .string()
          .regex(/^[0-9]+$/)
          .describe("The part's position in the answer: reconnect with it as Last-Event-ID"),
        data: z
          .string()
          .regex(/^\{/)
          .meta({
            contentMediaType: 'application/json',
            contentSchema: { $ref: '#/components/schemas/AssistantStreamPart' },
          }),
      })
      .describe('One part of the answer'),
    z
      .object({ event: z.literal('message').optional(), id: z.string().optional(), data: z.literal('[DONE]') })
      .describe('The last event, after `finish` or `error`'),
  ])
  .meta({ id: 'AssistantStreamEvent' });

/** The parts after which nothing more is written for the message. */
export const isLastPart = (part: { type: string }) => part.type === 'finish' || part.type === 'error';

/** One SSE event. */
export const sseEvent = (seq: number, part: unknown) => `id: ${seq}\ndata: ${JSON.stringify(part)}\n\n`;
export const sseDone = 'data: [DONE]\n\n';
