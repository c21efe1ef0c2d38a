/** What the worker bundles: every workflow of the service. */
export { creditHoldWorkflow } from './credit-hold.js';
export { browserStepWorkflow } from './browser-step.js';
export { senderAccountWorkflow } from './sender-account.js';
export { columnRunWorkflow } from './column-run.js';
