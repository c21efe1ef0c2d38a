/** The step-signal sweeper's contract (workflows/pnet/step-signals.ts). */

/** One per task queue of step workflows: it starts the workflows it signals on that queue. */
export const stepSignalSweeperWorkflowId = (taskQueue: string) => `pnet-step-signals/${taskQueue}`;

/**
 * The sweeper's own task queue beside the steps' queue, polled by a worker of its own in the same
 * process: after a worker outage the steps' queue holds the outage's backlog, and a sweeper turn
 * queued behind it (4.5 minutes in a chaos run) lapsed nothing while claims waited.
 */
export const stepSignalSweeperQueue = (taskQueue: string) => `${taskQueue}.sweeper`;

export interface StepSignalSweeperInput {
  /** A change unread this long had its signal lost; signalled again. */
  graceSeconds: number;
  /** Between turns when nothing was due. */
  everySeconds: number;
  /** The step workflows' task queue, where it starts those it signals; its own queue when absent. */
  stepTaskQueue?: string;
}

export const defaultStepSignalSweeper: StepSignalSweeperInput = { graceSeconds: 5, everySeconds: 5 };
