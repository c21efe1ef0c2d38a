/** The chat-attachment workflow's contract (workflows/assistant/chat-attachment.ts): its id, input and outcome. */

export const chatAttachmentWorkflowId = (attachmentId: string) => `chat-attachment/${attachmentId}`;

export interface ChatAttachmentInput {
  attachmentId: string;
  workspaceId: string;
}

/** How reading the file ended: its pages are stored, or why it could not be read (answered 422). */
export type ChatAttachmentOutcome = { status: 'ready'; pageCount: number } | { status: 'failed'; error: string };

/** The ApplicationFailure type of a file that cannot be read: never retried. */
export const unreadableFileFailure = 'unprocessable';
