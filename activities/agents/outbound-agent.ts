/**
 * The outbound agent's activity for the sequence contact workflow (workflows/sequences/sequence-contact.ts):
 * a thin door handing the write of a step's message to writeStepMessage in
 * services/agents/outbound-agent.ts (idempotent per contact key and slot key; credits held before
 * the model is asked and charged with the stored message).
 */
import {
  writeStepMessage,
  type OutboundAgentDeps,
  type WriteStepMessageInput,
} from '../../services/agents/outbound-agent.js';
import type { WriteStepMessageResult } from '../../domain/agents/outbound-writing.js';
import { withActivityFailures } from '../shared/failures.js';

export type { OutboundAgentDeps, WriteStepMessageInput, WriteStepMessageResult };

export function createOutboundAgentActivities(deps: OutboundAgentDeps) {
  return withActivityFailures({
    /**
     * Writes the message of one agent-written sequence step. A retry (same contact key and slot)
     * answers the stored message and charges nothing more; a failed write is tried afresh.
     */
    writeStepMessage: (input: WriteStepMessageInput): Promise<WriteStepMessageResult> => writeStepMessage(deps, input),
  });
}
export type OutboundAgentActivities = ReturnType<typeof createOutboundAgentActivities>;
