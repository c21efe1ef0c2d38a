/**
 * The assistant's answers in HTTP's shapes, for its routes (api/routes/assistant/): an attachment
 * as the API shows it, and an answer streamed as Server-Sent Events in the AI SDK UI message
 * stream protocol (decision 034).
 */
import type { FastifyReply } from 'fastify';
import type { ChatAttachment } from '../domain/assistant/attachments.js';
import { uiMessageStreamHeader, type StreamPart } from '../domain/assistant/stream.js';
import type { AnswerStreamHub } from '../services/assistant/answer-stream.js';
import type { AttachmentRecord } from '../store/assistant/attachments.js';

/** The attachment as the API shows it (without its workspace). */
export const shownAttachment = ({ workspace_id: _workspace, ...attachment }: AttachmentRecord): ChatAttachment =>
  attachment;

/**
 * Sends an answer's parts after `afterSeq` (`first` already in hand) as they are written; the
 * hub stops reading when the client goes away.
 */
export async function sendAnswerStream(
  hub: AnswerStreamHub,
  reply: FastifyReply,
  messageId: string,
  afterSeq: number,
  first?: { seq: number; part: StreamPart },
) {
  const done = new AbortController();
  reply.raw.once('close', () => done.abort());
  const events = await hub.open(messageId, afterSeq, done.signal, first);
  return reply
    .type('text/event-stream; charset=utf-8')
    .header('cache-control', 'no-cache, no-transform')
    .header('x-accel-buffering', 'no')
    .headers(uiMessageStreamHeader)
    .send(events);
}
