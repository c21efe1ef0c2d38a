/** Running a chat attachment's workflow from the API: the upload waits for its text to be read. */
import type { Client } from '@temporalio/client';
import { chatAttachmentWorkflow } from '../../workflows/assistant/chat-attachment.js';
import {
  chatAttachmentWorkflowId,
  type ChatAttachmentInput,
  type ChatAttachmentOutcome,
} from '../../workflows/assistant/chat-attachment.contract.js';
import { WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';

/** Reads the attachment's file on the worker and answers how it went; a retried upload reaches the same run. */
export function readAttachment(
  client: Client,
  taskQueue: string,
  attachment: { id: string; workspace_id: string },
): Promise<ChatAttachmentOutcome> {
  const input: ChatAttachmentInput = { attachmentId: attachment.id, workspaceId: attachment.workspace_id };
  return client.workflow.execute(chatAttachmentWorkflow, {
    taskQueue,
    workflowId: chatAttachmentWorkflowId(attachment.id),
    args: [input],
    workflowIdConflictPolicy: 'USE_EXISTING',
    typedSearchAttributes: [{ key: WorkspaceIdKey, value: attachment.workspace_id }],
  });
}
