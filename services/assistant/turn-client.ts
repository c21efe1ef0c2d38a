/** Starting an assistant turn and sending it people's decisions. */
import { WorkflowNotFoundError } from '@temporalio/client';
import { ApiError } from '../../domain/shared/errors.js';
import { assistantTurnWorkflow } from '../../workflows/assistant/assistant-turn.js';
import {
  assistantTurnWorkflowId,
  decideCardsUpdate,
  type AssistantTurnInput,
  type CardDecided,
  type DecideCardsRequest,
} from '../../workflows/assistant/assistant-turn.contract.js';
import { WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';
import type { TemporalHandle } from '../deps.js';

export async function startTurn(temporal: TemporalHandle, input: AssistantTurnInput): Promise<void> {
  await temporal.client.workflow.start(assistantTurnWorkflow, {
    taskQueue: temporal.taskQueue,
    workflowId: assistantTurnWorkflowId(input.messageId),
    args: [input],
    workflowIdConflictPolicy: 'USE_EXISTING',
    typedSearchAttributes: [{ key: WorkspaceIdKey, value: input.workspaceId }],
  });
}

/**
 * Decides cards of one answer. The update id is the request's key and the cards, so a retried
 * HTTP request is answered once by Temporal. A turn that has ended (its cards expired) decides
 * nothing more: 409.
 */
export async function decideCards(
  temporal: TemporalHandle,
  messageId: string,
  request: DecideCardsRequest,
): Promise<CardDecided[]> {
  const handle = temporal.client.workflow.getHandle(assistantTurnWorkflowId(messageId));
  try {
    return await handle.executeUpdate(decideCardsUpdate, {
      args: [request],
      updateId: `${request.decision}:${request.key}:${request.cardIds.join(',')}`.slice(0, 900),
    });
  } catch (error) {
    if (error instanceof WorkflowNotFoundError || /already completed/i.test((error as Error).message ?? '')) {
      throw new ApiError('conflict', 'This card can no longer be decided: its answer has ended and the card expired.');
    }
    throw error;
  }
}
