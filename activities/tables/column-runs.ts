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
import {
    EnrichmentError,
    type ColumnRunStatus,
    type EnrichmentOutcome
} from '../../domain/tables/enrichments.js';
import { ApiError } from '../../domain/shared/errors.js';
import type { CellValue } from '../../domain/tables/tables.js';
import { chargeHold, holdCredits, releaseHold } from '../../store/platform/credits.js';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import { RunEnding, ColumnRunPlan, RunRecord, RunBatch, CellOutcome, runCauseKey, terminal, settleCells, releaseRowHold, recomputeReaders, readInputs, percentOf, loadContext, isEmpty, holdOf, brief, count } from '../../store/tables/column-runs.js';

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

export const stopReasons: Record<Exclude<RunEnding, 'completed'>, string> = {
  cancelled: 'The run was cancelled before it reached this row.',
  failed: 'The run stopped before it reached this row.',
};

export function createColumnRunActivities({ sql, enrichmentProviders }: ColumnRunActivityDeps) {
  return {
    /** queued -> running, and what the workflow needs to pace the rows; a finished run says so. */
    async beginColumnRun({ runId }: { runId: string }): Promise<ColumnRunPlan> {
      const [started] = await sql<RunRecord[]>`
        update column_runs set status = 'running', started_at = coalesce(started_at, now())
        where id = ${runId} and status = 'queued' returning *`;
      const run = started ?? (await sql<RunRecord[]>`select * from column_runs where id = ${runId}`)[0];
      if (!run) return { state: 'finished', status: 'gone' };
      if (terminal.has(run.status)) return { state: 'finished', status: run.status };
      const provider = enrichmentProviders.get(run.provider);
      if (!provider) {
        // The worker's environment lost the provider (a key removed): nothing can be computed.
        const [failed] = await sql<RunRecord[]>`
          update column_runs set status = 'failed', error = ${`The provider ${run.provider} is not available in this environment.`}, finished_at = now()
          where id = ${runId} and status in ('queued', 'running', 'cancelling') returning *`;
        return { state: 'finished', status: failed?.status ?? run.status };
      }
      return { state: 'running', status: run.status, provider: run.provider, concurrency: provider.info.concurrency, timeoutSeconds: provider.info.timeout_seconds };
    },

    /**
     * The next rows, in row order: first a pass over the run's scope by a cursor, then (when rows
     * were added while it went) the rows with no cell yet. Rows whose result is kept are counted
     * and left alone; the others' cells become pending for this run.
     */
    async claimRunBatch({ runId, limit }: { runId: string; limit: number }): Promise<RunBatch> {
      return sql.begin(async (tx): Promise<RunBatch> => {
        const [run] = await tx<RunRecord[]>`select * from column_runs where id = ${runId} for update`;
        if (!run || terminal.has(run.status)) return { rowIds: [], exhausted: true, wakes: 0, progress: 0, stop: 'gone' };
        const [table] = await tx<{ deleted: boolean }[]>`select deleted_at is not null as deleted from tables where id = ${run.table_id}`;
        if (!table || table.deleted) {
          await tx`update column_runs set status = 'cancelling', error = 'The table was deleted.', cancel_requested_at = now() where id = ${runId}`;
          return { rowIds: [], exhausted: true, wakes: run.wakes, progress: percentOf(run), stop: 'cancelled' };
        }
        if (run.status === 'cancelling') return { rowIds: [], exhausted: true, wakes: run.wakes, progress: percentOf(run), stop: 'cancelled' };

        type Picked = { id: string; seq: number; state: string | null; has_value: boolean };
        let picked: Picked[];
        let cursor = run.cursor_seq;
        let cursorDone = run.cursor_done;
        let exhausted: boolean;
        if (!cursorDone) {
          picked = await tx<Picked[]>`
            select r.id, r.seq, c.state, c.value is not null and c.value <> 'null'::jsonb as has_value
            from table_rows r left join table_cells c on c.column_id = ${run.column_id} and c.row_id = r.id
            where r.table_id = ${run.table_id} and r.seq > ${cursor}
              ${run.scope === 'rows' ? tx`and r.id = any(${run.row_ids ?? []}::uuid[])` : tx``}
            order by r.seq limit ${limit}`;
          if (picked.length > 0) cursor = picked[picked.length - 1]!.seq;
          cursorDone = picked.length < limit;
          exhausted = cursorDone && !run.sweep_new_rows;
        } else if (run.sweep_new_rows) {
          picked = await tx<Picked[]>`
            select r.id, r.seq, null as state, false as has_value from table_rows r
            where r.table_id = ${run.table_id}
              and not exists (select 1 from table_cells c where c.column_id = ${run.column_id} and c.row_id = r.id)
            order by r.seq limit ${limit}`;
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
          // What a settled cell held is kept aside, so a run that stops before the row puts it back.
          await tx`
            insert into table_cells (column_id, row_id, state, value, error, cost, run_id)
            select g.id, r.id, 'pending', null, null, 0, ${runId}
            from unnest(${ctx.group}::uuid[]) as g (id) cross join unnest(${toRun}::uuid[]) as r (id)
            on conflict (column_id, row_id) do update set
              previous = case when table_cells.state in ('done', 'error', 'skipped')
                then jsonb_build_object('state', table_cells.state, 'value', table_cells.value, 'error', table_cells.error, 'cost', table_cells.cost)
                else table_cells.previous end,
              state = 'pending', value = null, error = null, cost = 0, run_id = excluded.run_id, updated_at = now()`;
        }
        const [updated] = await tx<RunRecord[]>`
          update column_runs set cursor_seq = ${cursor}, cursor_done = ${cursorDone},
            rows_claimed = rows_claimed + ${picked.length}, rows_kept = rows_kept + ${kept.length},
            rows_total = greatest(rows_total, rows_claimed + ${picked.length})
          where id = ${runId} returning *`;
        return { rowIds: toRun, exhausted, wakes: updated!.wakes, progress: percentOf(updated!), stop: null };
      });
    },

    /** One row: hold, call the provider, store the result and settle the hold. Provider failures throw (the workflow's retry policy decides). */
    async runEnrichmentCell({ runId, rowId }: { runId: string; rowId: string }): Promise<CellOutcome> {
      const ctx = await loadContext(sql, runId);
      if (!ctx) return 'gone';
      const provider = enrichmentProviders.get(ctx.run.provider);
      if (!provider) throw ApplicationFailure.nonRetryable(`The provider ${ctx.run.provider} is not available in this environment.`, 'provider_unavailable');
      const price = provider.info.price_credits;
      const workspaceId = ctx.run.workspace_id;
      const causeKey = runCauseKey(runId, rowId);

      type Start = { next: 'call'; inputs: Map<string, CellValue> } | { next: CellOutcome };
      const start = await sql.begin(async (tx): Promise<Start> => {
        // The run row first, then cells: the order every run transaction takes its locks in (the
        // change feed's triggers lock the table when a cell is written).
        const [run] = await tx<{ status: ColumnRunStatus }[]>`select status from column_runs where id = ${runId} for update`;
        // A cancelled run starts no more rows; the cell stays pending and the run's end puts it back.
        if (!run || run.status !== 'running') return { next: run?.status === 'cancelling' ? 'cancelled' : 'gone' };
        const moved = await tx<{ column_id: string }[]>`
          update table_cells set state = 'running', updated_at = now()
          where column_id = any(${ctx.group}::uuid[]) and row_id = ${rowId} and run_id = ${runId} and state in ('pending', 'running')
          returning column_id`;
        if (!moved.some((m) => m.column_id === ctx.run.column_id)) return { next: 'gone' };
        const read = await readInputs(tx, ctx, rowId);
        if (!read) return { next: 'gone' };
        const missing = provider.info.inputs.filter((f) => f.required && isEmpty(read.inputs.get(f.name))).map((f) => f.name);
        if (missing.length > 0) {
          await settleCells(tx, ctx, rowId, ['running'], { state: 'skipped', values: null, error: `No value for ${missing.join(', ')}.`, cost: 0 });
          await count(tx, runId, 'rows_skipped');
          await recomputeReaders(tx, ctx, rowId);
          return { next: 'skipped' };
        }
        if (price > 0) {
          try {
            // Settled by this run (charge, release, or its end), so the hold need not lapse on its own soon.
            await holdCredits(tx, { workspaceId, amount: price, causeKey, ttlSeconds: 7 * 86_400 });
          } catch (error) {
            if (!(error instanceof ApiError && error.code === 'insufficient_credits')) throw error;
            await tx`
              update table_cells set state = 'pending', updated_at = now()
              where column_id = any(${ctx.group}::uuid[]) and row_id = ${rowId} and run_id = ${runId} and state = 'running'`;
            return { next: 'no_credits' };
          }
        }
        return { next: 'call', inputs: read.inputs };
      });
      if (start.next !== 'call') return start.next;

      let outcome: EnrichmentOutcome;
      try {
        outcome = await provider.run({ inputs: start.inputs, options: new Map(Object.entries(ctx.config.options)) }, activitySignal());
      } catch (error) {
        const failure = error instanceof EnrichmentError ? error : new EnrichmentError(brief((error as Error).message ?? String(error)), true);
        if (!failure.retryable) throw ApplicationFailure.nonRetryable(brief(failure.message), 'provider_refused');
        throw ApplicationFailure.retryable(brief(failure.message), 'provider_failed');
      }

      return sql.begin(async (tx): Promise<CellOutcome> => {
        await tx`select 1 from column_runs where id = ${runId} for update`;
        const values = outcome.kind === 'result' ? outcome.values : null;
        const cost = values ? price : 0;
        const moved = await settleCells(tx, ctx, rowId, ['running'], { state: 'done', values, error: null, cost });
        const holdId = price > 0 ? await holdOf(tx, workspaceId, causeKey) : undefined;
        if (!moved) {
          // Someone else owns the cell now (a newer run, a deleted row): nothing delivered, nothing charged.
          if (holdId) await releaseHold(tx, holdId);
          return 'gone';
        }
        if (holdId) await (values ? chargeHold(tx, holdId, price) : releaseHold(tx, holdId));
        await count(tx, runId, values ? 'rows_done' : 'rows_empty', cost);
        await recomputeReaders(tx, ctx, rowId);
        return values ? 'done' : 'empty';
      });
    },

    /** A row whose provider failed for good (retries spent, or refused): the cell errs and its credits go back. */
    async failEnrichmentCell({ runId, workspaceId, rowId, error }: { runId: string; workspaceId: string; rowId: string; error: string }): Promise<void> {
      const ctx = await loadContext(sql, runId);
      await sql.begin(async (tx) => {
        await tx`select 1 from column_runs where id = ${runId} for update`;
        if (ctx && (await settleCells(tx, ctx, rowId, ['pending', 'running'], { state: 'error', values: null, error: brief(error), cost: 0 }))) {
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
    async finishColumnRun(input: { runId: string; workspaceId: string; outcome: RunEnding; wakes?: number; reason?: string }): Promise<{
      finished: boolean;
      status: ColumnRunStatus | 'gone';
    }> {
      return sql.begin(async (tx) => {
        const [run] = await tx<RunRecord[]>`select * from column_runs where id = ${input.runId} for update`;
        let status: ColumnRunStatus | 'gone' = run?.status ?? 'gone';
        if (run && !terminal.has(run.status)) {
          if (input.outcome === 'completed' && (run.status !== 'running' || run.wakes !== input.wakes)) return { finished: false, status: run.status };
          status = input.outcome;
          await tx`
            update column_runs set status = ${status}, error = coalesce(${input.reason ?? null}, error), finished_at = now(),
              rows_total = case when ${status} = 'completed' then rows_claimed else rows_total end
            where id = ${input.runId}`;
          const ctx = await loadContext(tx, input.runId);
          if (ctx) {
            await tx`
              update table_cells set state = previous ->> 'state', value = nullif(previous -> 'value', 'null'::jsonb), error = previous ->> 'error',
                cost = coalesce((previous ->> 'cost')::int, 0), previous = null, updated_at = now()
              where column_id = any(${ctx.group}::uuid[]) and run_id = ${input.runId} and state = 'pending' and previous is not null`;
            const why = input.outcome === 'completed' ? stopReasons.failed : (input.reason ?? stopReasons[input.outcome]);
            await tx`
              update table_cells set state = 'skipped', error = ${why}, updated_at = now()
              where column_id = any(${ctx.group}::uuid[]) and run_id = ${input.runId} and state = 'pending'`;
            await tx`
              update table_cells set state = 'error', error = 'The run ended while this row was running.', updated_at = now()
              where column_id = any(${ctx.group}::uuid[]) and run_id = ${input.runId} and state = 'running'`;
          }
        }
        const open = await tx<{ id: string }[]>`
          select id from credit_holds
          where workspace_id = ${input.workspaceId} and status = 'held' and cause_key like ${`column-run:${input.runId}:%`}`;
        for (const hold of open) await releaseHold(tx, hold.id);
        return { finished: true, status };
      });
    },
  };
}

export type ColumnRunActivities = ReturnType<typeof createColumnRunActivities>;
