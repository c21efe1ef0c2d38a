/** Activities of the chat-attachment workflow: doors to services/assistant/attachment-extraction.ts. */
import { whileBeating } from '../shared/heartbeat.js';
import { withActivityFailures } from '../shared/failures.js';
import {
  extractChatAttachment,
  failChatAttachment,
  type AttachmentExtractionDeps,
} from '../../services/assistant/attachment-extraction.js';
import type { ChatAttachmentOutcome } from '../../workflows/assistant/chat-attachment.contract.js';

export function createChatAttachmentActivities(deps: AttachmentExtractionDeps) {
  return withActivityFailures({
    extractChatAttachment: ({ attachmentId }: { attachmentId: string }): Promise<ChatAttachmentOutcome> =>
      extractChatAttachment(deps, attachmentId, whileBeating),
    failChatAttachment: ({ attachmentId, error }: { attachmentId: string; error: string }): Promise<void> =>
      failChatAttachment(deps, attachmentId, error),
  });
}
export type ChatAttachmentActivities = ReturnType<typeof createChatAttachmentActivities>;
