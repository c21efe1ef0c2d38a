/**
 * What the worker bundles: every workflow of the service, and nothing else (every function
 * exported here is a workflow type; test/integration/workflow-determinism.test.ts checks each is
 * bundled and has a recorded history). Each workflow's ids, signals, updates, queries and
 * payload types are in the `<name>.contract.ts` beside it, which is what other layers import.
 */
export { creditHoldWorkflow } from './platform/credit-hold.js';
export { browserStepWorkflow } from './pnet/browser-step.js';
export { senderAccountWorkflow } from './pnet/sender-account.js';
export { stepSignalSweeperWorkflow } from './pnet/step-signals.js';
export { columnRunWorkflow } from './tables/column-run.js';
export { trainingSessionWorkflow } from './agents/training-session.js';
export { agentRunWorkflow, agentTrainingWorkflow } from './agents/agent-run.js';
export { sequenceContactWorkflow, sequenceFeedWorkflow } from './sequences/sequence-contact.js';
export { mailboxPollWorkflow } from './inbox/mailbox-poll.js';
export { assistantTurnWorkflow } from './assistant/assistant-turn.js';
export { chatAttachmentWorkflow } from './assistant/chat-attachment.js';
export { documentWorkflow } from './documents/document.js';
export { workspaceBillingWorkflow } from './billing/workspace-billing.js';
export { commissionMaturationWorkflow } from './affiliates/commission-maturation.js';
export { leadSearchWorkflow } from './sourcing/lead-search.js';
export { importRunWorkflow, writeBackWorkflow } from './sourcing/imports.js';
export { subdomainDiscoveryWorkflow } from './sourcing/subdomains.js';
export { affiliatePayoutCycleWorkflow } from './affiliates/payout-cycle.js';
export {
  notificationBatchWorkflow,
  notificationDigestWorkflow,
  notificationReplayWorkflow,
} from './notifications/notification-event.js';
