/**
 * A saved agent's research run on one row or one training example (`agent-run/<column>/<row>/<run>`,
 * `agent-run/<training run>/<example>`): the chat model picks the next action among the tools
 * its reach offers, each tool call is an activity with its own timeout and retries, and every step
 * is recorded in Postgres. The loop is bounded by the agent's effort; `finish` writes the answer
 * and charges the held credits, anything that ends it otherwise returns them.
 *
 * read_pnet_profile queues a browser step and waits for it durably (a timer, no polling): the
 * step's settling signals `pnetStepSettled` here; past ten minutes the research step fails.
 * A person cancels with the `cancelAgentRun` update: the run's record, cells and hold move in one
 * transaction, then the research in flight is cancelled where it stands.
 *
 * A training run (`agent-training/<training run id>`) runs the agent on each example as a child
 * and scores the answers against the expected ones.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  ParentClosePolicy,
  TimeoutFailure,
  allHandlersFinished,
  condition,
  executeChild,
  isCancellation,
  proxyActivities,
  setHandler,
} from '@temporalio/workflow';
import type { AgentDecision, AgentRunActivities } from '../../activities/agents/agent-run.js';
import type { AgentRunStatus } from '../../domain/agents/saved-agents.js';
import { msUntil, workflowNow } from '../shared/clock.js';
import {
  agentRunStateQuery,
  cancelAgentRunUpdate,
  pnetStepSettledSignal,
  type AgentRunInput,
  type AgentRunView,
  type AgentRunViewStatus,
  type AgentTrainingInput,
} from './agent-run.contract.js';

/** Mirrors profileReadWaitMinutes in activities/agents/agent-run.ts (a workflow imports no values from activities). */
const profileReadWaitMs = 10 * 60 * 1000;

const records = proxyActivities<AgentRunActivities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});
// One model call; retried for timeouts and 5xx, not for a refusal.
const model = proxyActivities<AgentRunActivities>({
  startToCloseTimeout: '2 minutes',
  retry: {
    initialInterval: '2 seconds',
    backoffCoefficient: 2,
    maximumAttempts: 3,
    nonRetryableErrorTypes: ['agent_model_refused', 'agent_unavailable', 'agent_run_gone'],
  },
});
// One tool call (a crawl reads a few pages); the activity records a failed step itself on its last attempt.
const tools = proxyActivities<AgentRunActivities>({
  startToCloseTimeout: '2 minutes',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumAttempts: 3,
    nonRetryableErrorTypes: ['agent_run_gone'],
  },
});

function failureMessage(error: unknown): string {
  if (error instanceof ActivityFailure) {
    if (error.cause instanceof TimeoutFailure) return 'The model did not answer in time.';
    if (error.cause instanceof ApplicationFailure && error.cause.message) return error.cause.message;
    return error.cause?.message ?? error.message;
  }
  return error instanceof Error ? error.message : String(error);
}

const viewStatus = (status: AgentRunStatus | 'gone'): AgentRunViewStatus =>
  status === 'gone' || status === 'completed' || status === 'cancelled' ? status : 'failed';

export async function agentRunWorkflow(input: AgentRunInput): Promise<AgentRunView> {
  const view: AgentRunView = { runId: input.runId, status: 'starting', steps: [], maxSteps: 0, error: null };
  const settledSteps = new Set<string>();
  const research = new CancellationScope();
  setHandler(agentRunStateQuery, () => view);
  setHandler(pnetStepSettledSignal, ({ stepId }) => void settledSteps.add(stepId));
  setHandler(cancelAgentRunUpdate, async () => {
    const status = await records.cancelAgentRun({ runId: input.runId, workspaceId: input.workspaceId });
    if (status === 'cancelled') {
      view.status = 'cancelled';
      view.error = 'cancelled';
      research.cancel();
    }
    return status;
  });

  try {
    await research.run(() => researchLoop(input, view, settledSteps));
  } catch (error) {
    if (!isCancellation(error)) throw error;
    // The update moved the record already; asking again answers how the run really ended (a finish may have won).
    const status = await CancellationScope.nonCancellable(() =>
      records.cancelAgentRun({ runId: input.runId, workspaceId: input.workspaceId }),
    );
    view.status = viewStatus(status);
  }
  await condition(allHandlersFinished);
  return view;
}

async function researchLoop(input: AgentRunInput, view: AgentRunView, settledSteps: Set<string>): Promise<void> {
  const plan = await records.beginAgentRun({ runId: input.runId });
  if (plan.state === 'finished') {
    view.status = viewStatus(plan.status);
    return;
  }
  const fail = async (error: string) => {
    view.error = error;
    view.status = viewStatus(await records.failAgentRun({ runId: input.runId, workspaceId: input.workspaceId, error }));
  };
  if (plan.state === 'refused') return fail(plan.reason);

  view.status = 'researching';
  view.maxSteps = plan.maxSteps;
  // Every step is numbered, refused and failed ones included; the last number left is for finish.
  for (let n = 0; n < plan.maxSteps + 2; n += 1) {
    let decision: AgentDecision;
    try {
      decision = await model.decideAgentStep({ runId: input.runId, n });
    } catch (error) {
      if (isCancellation(error)) throw error;
      return fail(failureMessage(error));
    }
    if (decision.problem) {
      view.steps.push({ n, action: 'finish', outcome: 'failed' });
      continue;
    }
    if (decision.action === 'finish') {
      const status = await records.finishAgentRun({ runId: input.runId, n, decision });
      // A run whose record went with its row or column has nothing to write: its hold goes back.
      if (status === 'gone') return fail('The row or the column was deleted.');
      if (status === 'completed') view.steps.push({ n, action: 'finish', outcome: 'completed' });
      view.status = viewStatus(status);
      return;
    }
    // The step bound: past it no tool runs; the model gets one more turn, to finish.
    if (view.steps.length >= plan.maxSteps) break;
    try {
      if (decision.action === 'read_pnet_profile')
        view.steps.push(await readProfile(input.runId, n, decision, settledSteps));
      else view.steps.push(await tools.runAgentTool({ runId: input.runId, n, decision }));
    } catch (error) {
      if (isCancellation(error)) throw error;
      return fail(failureMessage(error));
    }
  }
  return fail(`The agent did not finish within ${plan.maxSteps} steps.`);
}

/** Queues the browser step, then waits (durably) until it settles or the wait runs out. */
async function readProfile(runId: string, n: number, decision: AgentDecision, settledSteps: Set<string>) {
  const queued = await tools.queueProfileRead({ runId, n, decision });
  if (queued.state === 'recorded') return queued.step;
  const until = new Date(workflowNow().getTime() + profileReadWaitMs).toISOString();
  for (;;) {
    const woke = await condition(() => settledSteps.has(queued.stepId), Math.max(1, msUntil(until)));
    settledSteps.delete(queued.stepId);
    const step = await records.recordProfileRead({ runId, n, stepId: queued.stepId, timedOut: !woke, decision });
    if (step) return step;
  }
}

/** Examples run a few at a time. */
const trainingLanes = 4;

export async function agentTrainingWorkflow(input: AgentTrainingInput): Promise<{ finished: number }> {
  const queue = [...input.runs];
  let finished = 0;
  await Promise.all(
    Array.from({ length: Math.min(trainingLanes, queue.length) }, async () => {
      while (queue.length > 0) {
        const next = queue.shift()!;
        try {
          await executeChild(agentRunWorkflow, {
            workflowId: next.workflowId,
            args: [{ runId: next.runId, workspaceId: input.workspaceId }],
            parentClosePolicy: ParentClosePolicy.TERMINATE,
          });
        } catch {
          // The child's run record says how it ended; a crashed child is failed by the score below.
          await records.failAgentRun({
            runId: next.runId,
            workspaceId: input.workspaceId,
            error: 'The run ended without an answer.',
          });
        }
        finished += 1;
      }
    }),
  );
  await records.scoreTrainingRun({ trainingRunId: input.trainingRunId });
  return { finished };
}
