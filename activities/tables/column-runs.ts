/**
 * A column run's side effects, each a guarded statement so a retried activity changes nothing
 * twice. Cells move pending -> running -> done/error/skipped by compare-and-set on their state and
 * on the run that claimed them (table_cells.run_id), so a cancelled or superseded run can never
 * write over a newer one. Credits: a hold per row as it starts (cause key unique per run and row),
 * charged in the transaction that stores a result, returned for an empty result or a failure.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Sql } from '../../db/sql.js';
import { EnrichmentError, type ColumnRunStatus, type EnrichmentOutcome } from '../../domain/tables/enrichments.js';
import {
  decideRowOutcome,
  decideRunEnding,
  type CellOutcome,
  type RowSnapshot,
  type RunEnding,
} from '../../domain/tables/column-run-outcome.js';
import type { CellValue } from '../../domain/tables/tables.js';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import {
  advanceRunCursor,
  beginRun,
  brief,
  cancelRunForDeletedTable,
  claimRowCells,
  count,
  endRun,
  failGoingRun,
  findRun,
  findTableDeleted,
  holdOf,
  holdRowCredits,
  loadContext,
  lockRun,
  lockRunRecord,
  lockRunRow,
  pendRowCells,
  percentOf,
  pickNewRows,
  pickScopeRows,
  readInputs,
  recomputeReaders,
  releaseRowHold,
  releaseRunHolds,
  runCauseKey,
  settleCells,
  settleRow,
  skipRow,
  terminal,
  unclaimRowCells,
  type ColumnRunPlan,
  type PickedRow,
  type RunBatch,
} from '../../store/tables/column-runs.js';

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

export function createColumnRunActivities({ sql, enrichmentProviders }: ColumnRunActivityDeps) {
  return {
    /** queued -> running, and what the workflow needs to pace the rows; a finished run says so. */
    async beginColumnRun({ runId }: { runId: string }): Promise<ColumnRunPlan> {
      const started = await beginRun(sql, runId);
      const run = started ?? (await findRun(sql, runId));
      if (!run) return { state: 'finished', status: 'gone' };
      if (terminal.has(run.status)) return { state: 'finished', status: run.status };
      const provider = enrichmentProviders.get(run.provider);
      if (!provider) {
        // The worker's environment lost the provider (a key removed): nothing can be computed.
        const failed = await failGoingRun(
          sql,
          runId,
          `The provider ${run.provider} is not available in this environment.`,
        );
        return { state: 'finished', status: failed?.status ?? run.status };
      }
      return {
        state: 'running',
        status: run.status,
        provider: run.provider,
        concurrency: provider.info.concurrency,
        timeoutSeconds: provider.info.timeout_seconds,
      };
    },

    /**
     * The next rows, in row order: first a pass over the run's scope by a cursor, then (when rows
     * were added while it went) the rows with no cell yet. Rows whose result is kept are counted
     * and left alone; the others' cells become pending for this run.
     */
    async claimRunBatch({ runId, limit }: { runId: string; limit: number }): Promise<RunBatch> {
      return sql.begin(async (tx): Promise<RunBatch> => {
        const run = await lockRunRecord(tx, runId);
        if (!run || terminal.has(run.status))
          return { rowIds: [], exhausted: true, wakes: 0, progress: 0, stop: 'gone' };
        const table = await findTableDeleted(tx, run.table_id);
        if (!table || table.deleted) {
          await cancelRunForDeletedTable(tx, runId);
          return { rowIds: [], exhausted: true, wakes: run.wakes, progress: percentOf(run), stop: 'cancelled' };
        }
        if (run.status === 'cancelling')
          return { rowIds: [], exhausted: true, wakes: run.wakes, progress: percentOf(run), stop: 'cancelled' };

        let picked: PickedRow[];
        let cursor = run.cursor_seq;
        let cursorDone = run.cursor_done;
        let exhausted: boolean;
        if (!cursorDone) {
          picked = await pickScopeRows(tx, run, cursor, limit);
          if (picked.length > 0) cursor = picked[picked.length - 1]!.seq;
          cursorDone = picked.length < limit;
          exhausted = cursorDone && !run.sweep_new_rows;
        } else if (run.sweep_new_rows) {
          picked = await pickNewRows(tx, run, limit);
          exhausted = picked.length < limit;
        } else {
          picked = [];
          exhausted = true;
        }

        const kept = run.keep_existing_results ? picked.filter((p) => p.state === 'done' && p.has_value) : [];
        const toRun = picked.filter((p) => !kept.includes(p)).map((p) => p.id);
        if (toRun.length > 0) {
          const ctx = await loadContext(tx, runId);
          if (!ctx) return { rowIds: [], exhausted: true, wakes: run.wakes, progress: 0, stop: 'gone' };
          await pendRowCells(tx, runId, ctx.group, toRun);
        }
        const updated = await advanceRunCursor(tx, runId, {
          cursor,
          cursorDone,
          picked: picked.length,
          kept: kept.length,
        });
        return { rowIds: toRun, exhausted, wakes: updated.wakes, progress: percentOf(updated), stop: null };
      });
    },

    /** One row: hold, call the provider, store the result and settle the hold. Provider failures throw (the workflow's retry policy decides). */
    async runEnrichmentCell({ runId, rowId }: { runId: string; rowId: string }): Promise<CellOutcome> {
      const ctx = await loadContext(sql, runId);
      if (!ctx) return 'gone';
      const provider = enrichmentProviders.get(ctx.run.provider);
      if (!provider)
        throw ApplicationFailure.nonRetryable(
          `The provider ${ctx.run.provider} is not available in this environment.`,
          'provider_unavailable',
        );
      const workspaceId = ctx.run.workspace_id;
      const causeKey = runCauseKey(runId, rowId);
      const required = provider.info.inputs.filter((f) => f.required).map((f) => f.name);

      type Started = { snap: RowSnapshot; inputs: Map<string, CellValue> } | { outcome: CellOutcome };
      const started = await sql.begin(async (tx): Promise<Started> => {
        // The run row first, then cells: the order every run transaction takes its locks in (the
        // change feed's triggers lock the table when a cell is written).
        let snap: RowSnapshot = {
          price: provider.info.price_credits,
          prepaid: ctx.run.funding_hold_id !== null,
          required,
          run: (await lockRun(tx, runId)) ?? null,
        };
        let inputs = new Map<string, CellValue>();
        for (;;) {
          const d = decideRowOutcome(snap);
          switch (d.kind) {
            case 'claim':
              snap = { ...snap, claimed: await claimRowCells(tx, ctx, rowId) };
              continue;
            case 'read_inputs': {
              const read = await readInputs(tx, ctx, rowId);
              if (read) inputs = read.inputs;
              snap = { ...snap, inputs: read?.inputs ?? null };
              continue;
            }
            case 'hold':
              snap = { ...snap, held: await holdRowCredits(tx, workspaceId, d.amount, causeKey) };
              continue;
            case 'call':
              return { snap, inputs };
            case 'skip':
              await skipRow(tx, ctx, rowId, d);
              return { outcome: d.outcome };
            case 'unclaim':
              await unclaimRowCells(tx, ctx, rowId);
              return { outcome: d.outcome };
            case 'end':
              return { outcome: d.outcome };
            default:
              throw new Error(`Unexpected ${d.kind} before the provider's call`);
          }
        }
      });
      if ('outcome' in started) return started.outcome;

      let result: EnrichmentOutcome;
      try {
        result = await provider.run(
          { inputs: started.inputs, options: new Map(Object.entries(ctx.config.options)) },
          activitySignal(),
        );
      } catch (error) {
        const failure =
          error instanceof EnrichmentError
            ? error
            : new EnrichmentError(brief((error as Error).message ?? String(error)), true);
        if (!failure.retryable) throw ApplicationFailure.nonRetryable(brief(failure.message), 'provider_refused');
        throw ApplicationFailure.retryable(brief(failure.message), 'provider_failed');
      }

      return sql.begin(async (tx): Promise<CellOutcome> => {
        await lockRunRow(tx, runId);
        let snap: RowSnapshot = { ...started.snap, result };
        for (;;) {
          const d = decideRowOutcome(snap);
          switch (d.kind) {
            case 'store':
              snap = {
                ...snap,
                settled: await settleCells(tx, ctx, rowId, ['running'], {
                  state: 'done',
                  values: d.values,
                  error: null,
                  cost: d.cost,
                }),
              };
              continue;
            case 'read_hold':
              snap = { ...snap, holdId: (await holdOf(tx, workspaceId, causeKey)) ?? null };
              continue;
            case 'settle':
              await settleRow(tx, ctx, rowId, d);
              return d.outcome;
            default:
              throw new Error(`Unexpected ${d.kind} after the provider's call`);
          }
        }
      });
    },

    /** A row whose provider failed for good (retries spent, or refused): the cell errs and its credits go back. */
    async failEnrichmentCell({
      runId,
      workspaceId,
      rowId,
      error,
    }: {
      runId: string;
      workspaceId: string;
      rowId: string;
      error: string;
    }): Promise<void> {
      const ctx = await loadContext(sql, runId);
      await sql.begin(async (tx) => {
        await lockRunRow(tx, runId);
        if (
          ctx &&
          (await settleCells(tx, ctx, rowId, ['pending', 'running'], {
            state: 'error',
            values: null,
            error: brief(error),
            cost: 0,
          }))
        ) {
          await count(tx, runId, 'rows_failed');
          await recomputeReaders(tx, ctx, rowId);
        }
        await releaseRowHold(tx, workspaceId, runId, rowId);
      });
    },

    /**
     * Ends the run. `completed` only while no row add woke it since its last claim (`wakes`);
     * otherwise it answers not finished and the workflow claims again. Cells the run never reached
     * get back what they held (or say why they hold nothing), and any hold of the run still open
     * is returned.
     */
    async finishColumnRun(input: {
      runId: string;
      workspaceId: string;
      outcome: RunEnding;
      wakes?: number;
      reason?: string;
    }): Promise<{
      finished: boolean;
      status: ColumnRunStatus | 'gone';
    }> {
      return sql.begin(async (tx) => {
        const run = await lockRunRecord(tx, input.runId);
        const decision = decideRunEnding({
          run: run ?? null,
          outcome: input.outcome,
          wakes: input.wakes,
          reason: input.reason,
        });
        if (decision.kind === 'not_yet') return { finished: false, status: decision.status };
        if (decision.kind === 'end') await endRun(tx, input.runId, decision);
        await releaseRunHolds(tx, input.workspaceId, input.runId);
        return { finished: true, status: decision.status };
      });
    },
  };
}

export type ColumnRunActivities = ReturnType<typeof createColumnRunActivities>;
