/**
 * Reads one uploaded file's text: one activity extracts it (on a worker thread with a time and
 * memory limit) and writes its pages once; a file that cannot be read is recorded `failed` with
 * the reason, and the workflow answers that outcome instead of failing. Any other failure (the
 * database gone past every retry) is recorded too, then fails the workflow, so no attachment is
 * left `pending` by a workflow that ended.
 */
import { ActivityFailure, ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { ChatAttachmentActivities } from '../../activities/assistant/attachments.js';
import {
  unreadableFileFailure,
  type ChatAttachmentInput,
  type ChatAttachmentOutcome,
} from './chat-attachment.contract.js';

const { extractChatAttachment } = proxyActivities<ChatAttachmentActivities>({
  // The extraction's own deadline (60 s by default) plus time waiting for a free reader thread.
  startToCloseTimeout: '5 minutes',
  // The activity beats every 5 s while it reads: a worker that dies mid-file is retried within 30 s.
  heartbeatTimeout: '30 seconds',
  retry: {
    initialInterval: '1 second',
    maximumInterval: '10 seconds',
    maximumAttempts: 3,
    nonRetryableErrorTypes: [unreadableFileFailure],
  },
});
const { failChatAttachment } = proxyActivities<ChatAttachmentActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 10 },
});

/** The reason a file could not be read, when that is why the activity failed. */
function unreadableReason(error: unknown): string | null {
  if (
    error instanceof ActivityFailure &&
    error.cause instanceof ApplicationFailure &&
    error.cause.type === unreadableFileFailure
  ) {
    return error.cause.message;
  }
  return null;
}

export async function chatAttachmentWorkflow(input: ChatAttachmentInput): Promise<ChatAttachmentOutcome> {
  try {
    return await extractChatAttachment({ attachmentId: input.attachmentId });
  } catch (error) {
    const reason = unreadableReason(error);
    await failChatAttachment({
      attachmentId: input.attachmentId,
      error: reason ?? 'The file could not be read because of an internal error; upload it again.',
    });
    if (reason !== null) return { status: 'failed', error: reason };
    throw error;
  }
}
