/** What the worker bundles: every workflow of the service. */
export { creditHoldWorkflow } from './credit-hold.js';
