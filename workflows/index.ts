/** What the worker bundles: every workflow of the service. */
export { creditHoldWorkflow } from './credit-hold.js';
export { browserStepWorkflow } from './browser-step.js';
export { senderAccountWorkflow } from './sender-account.js';
export { columnRunWorkflow } from './column-run.js';
export { trainingSessionWorkflow } from './training-session.js';
export { agentRunWorkflow, agentTrainingWorkflow } from './agent-run.js';
export { sequenceContactWorkflow, sequenceFeedWorkflow } from './sequence-contact.js';
export { mailboxPollWorkflow } from './mailbox-poll.js';
