/** Starting and signalling column-run workflows from the API. */
import type { Client } from '@temporalio/client';
import type { SignalDefinition } from '@temporalio/common';
import { columnRunWorkflow } from '../../workflows/tables/column-run.js';
import { columnRunWorkflowId, type ColumnRunInput } from '../../workflows/tables/column-run.contract.js';
import { ColumnRunProgressKey, ColumnRunStatusKey, WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';
import { RunRecord } from '../../store/tables/column-runs.js';
import type { TemporalHandle } from '../deps.js';

function runOptions(taskQueue: string, run: RunRecord) {
  const input: ColumnRunInput = {
    runId: run.id,
    workspaceId: run.workspace_id,
    tableId: run.table_id,
    columnId: run.column_id,
  };
  return {
    taskQueue,
    workflowId: columnRunWorkflowId(run.id),
    args: [input] as [ColumnRunInput],
    typedSearchAttributes: [
      { key: WorkspaceIdKey, value: run.workspace_id },
      { key: ColumnRunStatusKey, value: run.status },
      { key: ColumnRunProgressKey, value: 0 },
    ],
  };
}

/** Starts the run's workflow; one already running is left as it is. */
export async function startColumnRun(temporal: TemporalHandle, run: RunRecord): Promise<void> {
  await temporal.client.workflow.start(columnRunWorkflow, {
    ...runOptions(temporal.taskQueue, run),
    workflowIdConflictPolicy: 'USE_EXISTING',
  });
}

/** Signal-with-start: reaches the run's workflow, starting it if its start was lost. */
export async function signalColumnRun(
  client: Client,
  taskQueue: string,
  run: RunRecord,
  signal: SignalDefinition<[]>,
): Promise<void> {
  await client.workflow.signalWithStart(columnRunWorkflow, { ...runOptions(taskQueue, run), signal });
}
