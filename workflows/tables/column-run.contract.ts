/** The column-run workflow's contract (workflows/tables/column-run.ts): its id, input, view, signals and query. */
import { defineQuery, defineSignal } from '@temporalio/workflow';
import type { ColumnRunStatus } from '../../domain/tables/enrichments.js';

export const columnRunWorkflowId = (runId: string) => `column-run/${runId}`;

export interface ColumnRunInput {
  runId: string;
  workspaceId: string;
  tableId: string;
  columnId: string;
  /** Rows claimed at a time. */
  batchSize?: number;
  /** History length at which the run continues as new, checked between batches. */
  historyLimit?: number;
  /** Executions before this one (continue-as-new). A cancel is never carried: Postgres holds it. */
  continued?: number;
}

/** Why a run stops starting rows before it has reached them all. */
export type ColumnRunStopReason = 'cancelled' | 'out_of_credits' | 'gone';

export interface ColumnRunView {
  runId: string;
  status: ColumnRunStatus | 'starting' | 'gone';
  /** Rows started by this execution (it restarts at 0 after continue-as-new). */
  rowsStarted: number;
  inFlight: number;
  batches: number;
  continued: number;
  /** Row adds that reached the run while it went (Postgres counts them too; see `wakes`). */
  rowsAddedSignals: number;
  stopping: ColumnRunStopReason | null;
  progress: number;
}

/** Sent by the cancel route after it marked the run `cancelling` in Postgres. */
export const cancelColumnRunSignal = defineSignal('cancelColumnRun');
/** Sent by a row add on a table with auto_run (signal-with-start); the run picks the rows up before it finishes. */
export const rowsAddedSignal = defineSignal('rowsAdded');
export const columnRunStateQuery = defineQuery<ColumnRunView>('columnRunState');
