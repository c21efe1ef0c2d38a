/**
 * The agent-run and agent-training workflows' contract (workflows/agents/agent-run.ts): their
 * ids, inputs, view, and the signal, Update and query the activities and the API address them with.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { AgentRunStatus, AgentRunWorkflowIds, AgentStep } from '../../domain/agents/saved-agents.js';

// Each run its own id (a row's next run never joins the one still closing), readable by column and row.
export const agentCellRunWorkflowId = (columnId: string, rowId: string, runId: string) =>
  `agent-run/${columnId}/${rowId}/${runId}`;
export const agentExampleRunWorkflowId = (trainingRunId: string, exampleId: string) =>
  `agent-run/${trainingRunId}/${exampleId}`;
export const agentTrainingWorkflowId = (trainingRunId: string) => `agent-training/${trainingRunId}`;
/** The three above, as the store takes them to name the runs it records. */
export const agentRunWorkflowIds: AgentRunWorkflowIds = {
  cellRun: agentCellRunWorkflowId,
  exampleRun: agentExampleRunWorkflowId,
  training: agentTrainingWorkflowId,
};

export interface AgentRunInput {
  runId: string;
  workspaceId: string;
}

/** How a run ended, or where it stands (`gone`: its record went with its row or column). */
export type AgentRunViewStatus = 'starting' | 'researching' | Exclude<AgentRunStatus, 'queued' | 'running'> | 'gone';

export interface AgentRunView {
  runId: string;
  status: AgentRunViewStatus;
  steps: Pick<AgentStep, 'n' | 'action' | 'outcome'>[];
  maxSteps: number;
  error: string | null;
}

export interface AgentTrainingInput {
  trainingRunId: string;
  workspaceId: string;
  /** Each example's run and the id its workflow runs under (agentExampleRunWorkflowId). */
  runs: { runId: string; workflowId: string }[];
}

export const agentRunStateQuery = defineQuery<AgentRunView>('agentRunState');
/** A person cancels the run; answers the run's status after (`cancelled`, or how it had already ended). */
export const cancelAgentRunUpdate = defineUpdate<AgentRunStatus | 'gone'>('cancelAgentRun');
/** A browser step this run queued (read_pnet_profile) settled. */
export const pnetStepSettledSignal = defineSignal<[{ stepId: string }]>('pnetStepSettled');
