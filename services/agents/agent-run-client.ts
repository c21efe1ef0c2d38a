/** Starting saved-agent research runs and training runs from the API. */
import { WithStartWorkflowOperation, type Client } from '@temporalio/client';
import type { FastifyBaseLogger } from 'fastify';
import type { AgentSuppliers } from '../../integrations/agent-tools/index.js';
import type { Sql } from '../../db/sql.js';
import type { AgentRunStatus } from '../../domain/agents/saved-agents.js';
import { agentRunWorkflow, agentTrainingWorkflow } from '../../workflows/agents/agent-run.js';
import {
  agentRunWorkflowIds,
  agentTrainingWorkflowId,
  cancelAgentRunUpdate,
  type AgentTrainingInput,
} from '../../workflows/agents/agent-run.contract.js';
import { WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';
import { queueNewRowRuns } from '../../store/agents/saved-agents.js';
import type { TemporalHandle } from '../deps.js';

/** Starts each run's workflow; a run whose workflow is already going is left as it is. */
export async function startAgentRuns(
  client: Client,
  taskQueue: string,
  workspaceId: string,
  runs: { id: string; workflow_id: string }[],
): Promise<void> {
  for (const run of runs) {
    await client.workflow.start(agentRunWorkflow, {
      taskQueue,
      workflowId: run.workflow_id,
      args: [{ runId: run.id, workspaceId }],
      workflowIdConflictPolicy: 'USE_EXISTING',
      typedSearchAttributes: [{ key: WorkspaceIdKey, value: workspaceId }],
    });
  }
}

export async function startAgentTraining(temporal: TemporalHandle, input: AgentTrainingInput): Promise<void> {
  await temporal.client.workflow.start(agentTrainingWorkflow, {
    taskQueue: temporal.taskQueue,
    workflowId: agentTrainingWorkflowId(input.trainingRunId),
    args: [input],
    workflowIdConflictPolicy: 'USE_EXISTING',
    typedSearchAttributes: [{ key: WorkspaceIdKey, value: input.workspaceId }],
  });
}

/**
 * Cancels one going run through its workflow (update-with-start, so a run whose start was lost is
 * still reached) and answers its status after: `cancelled`, or how it had ended first.
 */
export async function cancelAgentRun(
  client: Client,
  taskQueue: string,
  workspaceId: string,
  run: { id: string; workflow_id: string },
): Promise<AgentRunStatus | 'gone'> {
  const startWorkflowOperation = new WithStartWorkflowOperation(agentRunWorkflow, {
    taskQueue,
    workflowId: run.workflow_id,
    args: [{ runId: run.id, workspaceId }],
    workflowIdConflictPolicy: 'USE_EXISTING',
    typedSearchAttributes: [{ key: WorkspaceIdKey, value: workspaceId }],
  });
  const status = await client.workflow.executeUpdateWithStart(cancelAgentRunUpdate, {
    startWorkflowOperation,
    updateId: `cancel/${run.id}`,
  });
  // The row's workflow id is reused by its next run: let this one close (it only tidies up now),
  // so a run asked for right after the answer starts afresh instead of joining the closing one.
  if (status === 'cancelled') {
    const closed = client.workflow
      .getHandle(run.workflow_id)
      .result()
      .catch(() => undefined);
    await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 10_000).unref())]);
  }
  return status;
}

/**
 * auto_run for agent columns, beside runNewRows for enrichment columns: rows were added, so each
 * agent column of an auto_run table runs them (each run holds its price when it starts, charged
 * only with an answer). Without a chat model nothing is queued, as an enrichment column whose
 * provider is absent is not run. The rows are committed already, so a failure is logged, never answered.
 */
export async function runNewAgentRows(
  deps: {
    sql: Sql;
    temporal: TemporalHandle;
    agentSuppliers?: AgentSuppliers;
    log: FastifyBaseLogger;
  },
  workspaceId: string,
  tableId: string,
  added: number,
): Promise<void> {
  if (added <= 0 || !deps.agentSuppliers?.chatModel) return;
  try {
    const runs = await queueNewRowRuns(deps.sql, workspaceId, tableId, added, agentRunWorkflowIds);
    await startAgentRuns(deps.temporal.client, deps.temporal.taskQueue, workspaceId, runs);
  } catch (err) {
    deps.log.warn({ err, tableId }, 'auto_run could not start agent runs');
  }
}
