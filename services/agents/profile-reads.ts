/**
 * read_pnet_profile, the one research tool that runs as a browser step: the run queues a metered
 * profile_view on one of the workspace's pnet accounts, its workflow waits for the step durably
 * (workflows/agents/agent-run.ts), the step's settling wakes it (wakeAgentRunOfStep) and the
 * settled step becomes the research step's observation. A cancelled run cancels the reads it left
 * open. Every write is once per (run, n): a retry finds the step it queued or recorded.
 */
import {
  argText,
  detailOf,
  profileReadAnswer,
  profileReadUrl,
  type AgentDecision,
  type AgentStepInput,
} from '../../domain/agents/agent-run.js';
import { offeredActions, type AgentStepOutcome } from '../../domain/agents/saved-agents.js';
import { terminalStatuses } from '../../domain/pnet/settle.js';
import { failureType } from '../../domain/shared/errors.js';
import { agentToolEnabled } from '../../store/agents/agent-tools.js';
import {
  findRunStep,
  openProfileReads,
  profileReadAccount,
  profileReadStepOf,
  profileStopReason,
  runWaitingOnStep,
  type RecordedStep,
} from '../../store/agents/agent-runs.js';
import { insertStep as insertBrowserStep } from '../../store/pnet/step-queue.js';
import { findStep, type StepRow } from '../../store/pnet/steps.js';
import { browserStepWorkflowId, cancelStepUpdate } from '../../workflows/pnet/browser-step.contract.js';
import { pnetStepSettledSignal } from '../../workflows/agents/agent-run.contract.js';
import type { ServiceDeps, TemporalHandle } from '../deps.js';
import type { AgentRunDeps } from './agent-run.js';
import { recordStep, runningRun } from './run-steps.js';

/** read_pnet_profile: either the step is recorded already (refused, failed) or a browser step was queued and the run waits for it. */
export type ProfileReadQueued = { state: 'recorded'; step: RecordedStep } | { state: 'waiting'; stepId: string };

/** Cancels a browser step through its workflow's update (named by `updateId`, so a retry is the same update). */
const cancelBrowserStep = (temporal: TemporalHandle, stepId: string, updateId: string) =>
  temporal.client.workflow
    .getHandle(browserStepWorkflowId(stepId))
    .executeUpdate(cancelStepUpdate, { args: [{ errorCode: 'cancelled' }], updateId });

/**
 * Queues a metered profile_view (read_relationship) on one of the workspace's connected accounts,
 * naming this run and step in its params so its settling wakes the run (wakeAgentRunOfStep). The
 * account: one not held at a checkpoint, automatic before manual (a manual one puts it on the
 * Tasks page first), with a browser holding its lease, then the one with the fewest open steps.
 * A retry finds the step it queued.
 */
export async function queueProfileRead(
  { sql, startStep }: Pick<AgentRunDeps, 'sql' | 'startStep'>,
  { runId, n, decision }: AgentStepInput,
): Promise<ProfileReadQueued> {
  const done = await findRunStep(sql, runId, n);
  if (done) return { state: 'recorded', step: done };
  const run = await runningRun(sql, runId);
  const record = (outcome: AgentStepOutcome, observation: string) =>
    recordStep(sql, runId, {
      n,
      action: 'read_pnet_profile',
      detail: detailOf(decision),
      duration_ms: 0,
      observation,
      outcome,
      thought: decision.thought,
    }).then((step) => ({ state: 'recorded' as const, step }));
  const offered = offeredActions(run.agent.reach, run.agent.settings, run.agent.mcp_servers.length);
  if (!offered.includes('read_pnet_profile'))
    return record('refused', `read_pnet_profile is not offered to this agent: its reach is ${run.agent.reach}.`);
  const existing = await profileReadStepOf(sql, run.workspace_id, runId, n);
  if (existing) {
    if (!terminalStatuses.has(existing.status)) await startStep?.(existing);
    return { state: 'waiting', stepId: existing.id };
  }
  const account = await profileReadAccount(sql, run.workspace_id);
  if (!account) return record('refused', 'No pnet account of this workspace is connected to read profiles with.');
  // A tool whose switch in /agent-tools/ is off is refused even when an account is there.
  if (!(await agentToolEnabled(sql, run.workspace_id, 'read_pnet_profile')))
    return record(
      'refused',
      'read_pnet_profile is switched off for this workspace (PATCH /agent-tools/read_pnet_profile/).',
    );
  if (!startStep) return record('refused', 'This worker cannot queue browser steps.');
  const profileUrl = profileReadUrl(argText(decision.args.profile_url));
  if (profileUrl === null)
    return record('failed', 'read_pnet_profile needs "profile_url", an http(s) address of a profile.');
  // A visit shows on the person's side: nobody on the do-not-contact list is visited.
  if ((await profileStopReason(sql, run.workspace_id, profileUrl)) === 'do_not_contact')
    return record('refused', 'This profile is on the workspace’s do-not-contact list; it is not visited.');
  let row: StepRow;
  try {
    // The run's id and step ride along in params (stored as given): the settle hook finds the run by them.
    const params = {
      kind: 'profile_view' as const,
      profile_url: profileUrl,
      read_relationship: true,
      agent_run_id: runId,
      agent_run_step: n,
    };
    row = await insertBrowserStep(
      sql,
      run.workspace_id,
      { account_id: account.id, params, contact_key: null, sequence_id: null, run_before: null, test: false },
      account.run_mode,
    );
  } catch (error) {
    if (failureType(error) === 'insufficient_credits')
      return record('failed', `The profile read could not be queued: ${(error as Error).message}`);
    throw error;
  }
  await startStep(row);
  return { state: 'waiting', stepId: row.id };
}

/** The profile read of step `n` and its browser step; `timedOut` once the run's wait ran out. */
export interface RecordProfileReadInput {
  runId: string;
  n: number;
  stepId: string;
  timedOut: boolean;
  decision: AgentDecision;
}

/**
 * The queued profile read's outcome as the step's observation, once its browser step settled;
 * null while it has not (the run keeps waiting). Past the wait a step still waiting is cancelled
 * (its hold goes back) and the research step fails.
 */
export async function recordProfileRead(
  { sql, temporal }: Pick<ServiceDeps, 'sql' | 'temporal'>,
  { runId, n, stepId, timedOut, decision }: RecordProfileReadInput,
): Promise<RecordedStep | null> {
  const done = await findRunStep(sql, runId, n);
  if (done) return done;
  const read = () => findStep(sql, stepId);
  let step = await read();
  if (step && !terminalStatuses.has(step.status)) {
    if (!timedOut) return null;
    if (['awaiting_approval', 'queued', 'resuming'].includes(step.status)) {
      // Claimed meanwhile, or already settled: read again below.
      await cancelBrowserStep(temporal, stepId, `agent-run-timeout/${stepId}`).catch(() => undefined);
      step = await read();
    }
  }
  const duration = step ? (step.finished_at ?? new Date()).getTime() - step.created_at.getTime() : 0;
  const answer = profileReadAnswer(step, timedOut);
  return recordStep(sql, runId, {
    n,
    action: 'read_pnet_profile',
    detail: detailOf(decision),
    duration_ms: duration,
    observation: answer.observation,
    outcome: answer.outcome,
    thought: decision.thought,
  });
}

/** After a run is cancelled (committed): the profile reads it left open are cancelled too. */
export async function cancelOpenProfileReads(
  { sql, temporal }: Pick<ServiceDeps, 'sql' | 'temporal'>,
  workspaceId: string,
  runId: string,
): Promise<void> {
  const open = await openProfileReads(sql, workspaceId, runId);
  for (const s of open) {
    // Claimed meanwhile: the browser finishes it.
    await cancelBrowserStep(temporal, s.id, `agent-run-cancel/${s.id}`).catch(() => undefined);
  }
}

/**
 * Signals the run waiting on this browser step that it settled (the run waits without polling;
 * its own timeout covers a lost signal). A step no run waits on, or a closed run, wakes nothing.
 */
export async function wakeAgentRunOfStep(
  { sql, temporal }: Pick<ServiceDeps, 'sql' | 'temporal'>,
  stepId: string,
): Promise<void> {
  const workflowId = await runWaitingOnStep(sql, stepId);
  if (!workflowId) return;
  // A closed run has nothing to wake.
  await temporal.client.workflow
    .getHandle(workflowId)
    .signal(pnetStepSettledSignal, { stepId })
    .catch(() => undefined);
}
