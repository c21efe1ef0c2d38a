/** The step-signal sweeper's contract (workflows/pnet/step-signals.ts). */

/** One per task queue: it starts the workflows it signals on its own queue. */
export const stepSignalSweeperWorkflowId = (taskQueue: string) => `pnet-step-signals/${taskQueue}`;

export interface StepSignalSweeperInput {
  /** A change unread this long had its signal lost; signalled again. */
  graceSeconds: number;
  /** Between turns when nothing was due. */
  everySeconds: number;
}

export const defaultStepSignalSweeper: StepSignalSweeperInput = { graceSeconds: 5, everySeconds: 5 };
