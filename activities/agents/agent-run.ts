/**
 * A research run's activities (workflows/agents/agent-run.ts): thin doors, each handing its call
 * to its use case in services/agents/ (agent-run.ts, agent-tools.ts, profile-reads.ts), with the
 * running activity's cancellation, attempt and Temporal client. Their names, inputs and answers
 * are what the workflow calls.
 */
import { Context } from '@temporalio/activity';
import type { Sql } from '../../db/sql.js';
import type { AgentStepInput } from '../../domain/agents/agent-run.js';
import {
  beginAgentRun,
  cancelAgentRun,
  decideAgentStep,
  failAgentRun,
  finishAgentRun,
  scoreTrainingRun,
  type AgentRunDeps,
} from '../../services/agents/agent-run.js';
import { runAgentTool } from '../../services/agents/agent-tools.js';
import {
  queueProfileRead,
  recordProfileRead,
  wakeAgentRunOfStep,
  type RecordProfileReadInput,
} from '../../services/agents/profile-reads.js';
import type { TemporalHandle } from '../../services/deps.js';
import { afterStepTransitions } from '../pnet/steps.js';
import { withActivityFailures } from '../shared/failures.js';

export type AgentRunActivityDeps = AgentRunDeps;
export type { AgentDecision, AgentRunPlan } from '../../domain/agents/agent-run.js';
export type { ProfileReadQueued } from '../../services/agents/profile-reads.js';
// The workflow mirrors this wait (a workflow imports no values from activities).
export { profileReadWaitMinutes } from '../../domain/agents/agent-run.js';

/** The activity's cancellation, so a model or supplier call stops when Temporal gives up on it (none outside an activity). */
function activitySignal(): AbortSignal {
  try {
    return Context.current().cancellationSignal;
  } catch {
    return new AbortController().signal;
  }
}
function attempt(): number {
  try {
    return Context.current().info.attempt;
  } catch {
    return 1;
  }
}

/** The running activity's client and task queue, read only when a service uses them (a test calls finishAgentRun outside an activity). */
const activityTemporal: TemporalHandle = {
  get client() {
    return Context.current().client;
  },
  get taskQueue() {
    return Context.current().info.taskQueue;
  },
};

export function createAgentRunActivities(deps: AgentRunActivityDeps) {
  const { sql } = deps;
  const withTemporal = { sql, temporal: activityTemporal };
  return withActivityFailures({
    beginAgentRun: async (input: { runId: string }) => beginAgentRun(deps, input, activitySignal()),
    decideAgentStep: async (input: { runId: string; n: number }) => decideAgentStep(deps, input, activitySignal()),
    /** Supplier failures are retried (3 attempts), then recorded as a failed step. */
    runAgentTool: async (input: AgentStepInput) =>
      runAgentTool(deps, input, { signal: activitySignal(), attempt: attempt() }),
    finishAgentRun: async (input: AgentStepInput) => finishAgentRun(deps, input),
    failAgentRun: async (input: { runId: string; workspaceId: string; error: string }) => failAgentRun(deps, input),
    queueProfileRead: async (input: AgentStepInput) => queueProfileRead(deps, input),
    recordProfileRead: async (input: RecordProfileReadInput) => recordProfileRead(withTemporal, input),
    cancelAgentRun: async (input: { runId: string; workspaceId: string }) => cancelAgentRun(withTemporal, input),
    scoreTrainingRun: async (input: { trainingRunId: string }) => scoreTrainingRun(deps, input),
  });
}

export type AgentRunActivities = ReturnType<typeof createAgentRunActivities>;

/**
 * Wraps the pnet step activities so a profile read a research run queued wakes that run's
 * workflow once its step settles (the run waits for it without polling; its own timeout covers a
 * lost signal). Same shape as withSequenceWake; the two compose.
 */
export function withAgentRunWake<T extends object>(activities: T, sql: Sql): T {
  return afterStepTransitions(
    activities,
    ['readStepChange', 'expireClaim', 'missWindow', 'rejectStep', 'cancelStep'],
    async (stepId, step) => {
      // A transition that answers the record shows whether a run queued the step: most did not,
      // and the look-up is a round trip that every settle would wait for.
      if (step && step.params.agent_run_id === undefined) return;
      await wakeAgentRunOfStep({ sql, temporal: activityTemporal }, stepId).catch(() => undefined);
    },
  );
}
