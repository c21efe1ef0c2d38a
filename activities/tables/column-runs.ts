/**
 * A column run's activities, each a door to its step of the run's work in
 * services/tables/column-runs.ts (guarded statements, so a retried activity changes nothing twice;
 * credits held per row as it starts, charged with its result, returned otherwise). Their names and
 * arguments are what the run's workflow calls.
 */
import { Context } from '@temporalio/activity';
import type { Sql } from '../../db/sql.js';
import type { RunEnding } from '../../domain/tables/column-run-outcome.js';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import * as runs from '../../services/tables/column-runs.js';
import { withActivityFailures } from '../shared/failures.js';

export interface ColumnRunActivityDeps {
  sql: Sql;
  enrichmentProviders: EnrichmentProviders;
}

/** The activity's cancellation, so a provider call stops when Temporal gives up on it. */
export function activitySignal(): AbortSignal {
  try {
    return Context.current().cancellationSignal;
  } catch {
    return new AbortController().signal;
  }
}

export function createColumnRunActivities(deps: ColumnRunActivityDeps) {
  return withActivityFailures({
    /** queued -> running, and what the workflow needs to pace the rows; a finished run says so. */
    beginColumnRun: async ({ runId }: { runId: string }) => runs.beginColumnRun(deps, runId),
    /** The next rows, in row order: the run's scope by a cursor, then the rows added while it went. */
    claimRunBatch: async (input: { runId: string; limit: number }) => runs.claimRunBatch(deps, input),
    /** One row: hold, call the provider, store the result and settle the hold. Provider failures throw (the workflow's retry policy decides). */
    runEnrichmentCell: async (input: { runId: string; rowId: string }) =>
      runs.runEnrichmentCell(deps, input, activitySignal),
    /** A row whose provider failed for good (retries spent, or refused): the cell errs and its credits go back. */
    failEnrichmentCell: async (input: { runId: string; workspaceId: string; rowId: string; error: string }) =>
      runs.failEnrichmentCell(deps, input),
    /** Ends the run: `completed` only while no row add woke it since its last claim (`wakes`). */
    finishColumnRun: async (input: {
      runId: string;
      workspaceId: string;
      outcome: RunEnding;
      wakes?: number;
      reason?: string;
    }) => runs.finishColumnRun(deps, input),
  });
}

export type ColumnRunActivities = ReturnType<typeof createColumnRunActivities>;
