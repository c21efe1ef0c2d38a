/**
 * A column run's side effects, each a guarded statement so a retried activity changes nothing
 * twice. Cells move pending -> running -> done/error/skipped by compare-and-set on their state and
 * on the run that claimed them (table_cells.run_id), so a cancelled or superseded run can never
 * write over a newer one. Credits: a hold per row as it starts (cause key unique per run and row),
 * charged in the transaction that stores a result, returned for an empty result or a failure.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { writeFormulaCells } from '../../store/tables/cells.js';
import { loadColumns } from '../../store/tables/columns.js';
import type { Db, Sql } from '../../db/sql.js';
import {
  EnrichmentError,
  type ColumnRunStatus,
  type EnrichmentOutcome,
  type EnrichmentValue,
  type StoredEnrichmentConfig,
} from '../../domain/tables/enrichments.js';
import { ApiError } from '../../domain/shared/errors.js';
import { dependentsOf } from '../../domain/tables/formula.js';
import type { CellValue, Cells } from '../../domain/tables/tables.js';
import { chargeHold, holdCredits, releaseHold } from '../../store/platform/credits.js';
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';

export interface ColumnRunActivityDeps {
  sql: Sql;
  enrichmentProviders: EnrichmentProviders;
}

export interface RunRecord {
  id: string;
  workspace_id: string;
  table_id: string;
  column_id: string;
  provider: string;
  status: ColumnRunStatus;
  trigger: 'manual' | 'auto';
  scope: 'all' | 'rows' | 'new_rows';
  row_ids: string[] | null;
  keep_existing_results: boolean;
  sweep_new_rows: boolean;
  wakes: number;
  cursor_seq: number;
  cursor_done: boolean;
  rows_total: number;
  rows_claimed: number;
  rows_done: number;
  rows_empty: number;
  rows_failed: number;
  rows_skipped: number;
  rows_kept: number;
  credits_charged: number;
  error: string | null;
  created_at: Date;
  started_at: Date | null;
  cancel_requested_at: Date | null;
  finished_at: Date | null;
}

export type ColumnRunPlan =
  | { state: 'finished'; status: ColumnRunStatus | 'gone' }
  | { state: 'running'; status: ColumnRunStatus; provider: string; concurrency: number; timeoutSeconds: number };

export interface RunBatch {
  /** Rows to run now; their cells are pending, owned by this run. */
  rowIds: string[];
  /** No row is left to claim: with no rows, the run may finish (if `wakes` is still the count). */
  exhausted: boolean;
  wakes: number;
  /** Rows processed out of the rows known, in percent. */
  progress: number;
  /** The run was asked to stop (cancel, table deleted) or its record is gone. */
  stop: 'cancelled' | 'gone' | null;
}

/** How a row's activity ended. `no_credits` and `cancelled` leave the cell pending for the run's end. */
export type CellOutcome = 'done' | 'empty' | 'skipped' | 'gone' | 'no_credits' | 'cancelled';

export type RunEnding = 'completed' | 'cancelled' | 'failed';

const terminal: ReadonlySet<ColumnRunStatus> = new Set(['completed', 'cancelled', 'failed']);
export const runCauseKey = (runId: string, rowId: string) => `column-run:${runId}:${rowId}`;

export const processedOf = (r: Pick<RunRecord, 'rows_done' | 'rows_empty' | 'rows_failed' | 'rows_skipped' | 'rows_kept'>) =>
  r.rows_done + r.rows_empty + r.rows_failed + r.rows_skipped + r.rows_kept;
const percentOf = (r: RunRecord) => Math.min(100, Math.floor((processedOf(r) * 100) / Math.max(1, r.rows_total)));

interface RunContext {
  run: RunRecord;
  config: StoredEnrichmentConfig;
  /** The enrichment column first, then its output columns. */
  group: string[];
  outputOf: Map<string, string>;
}

async function loadContext(db: Db, runId: string): Promise<RunContext | null> {
  const [run] = await db<RunRecord[]>`select * from column_runs where id = ${runId}`;
  if (!run) return null;
  const columns = await db<{ id: string; parent_column_id: string | null; config: StoredEnrichmentConfig & { output?: string } }[]>`
    select id, parent_column_id, config from table_columns where id = ${run.column_id} or parent_column_id = ${run.column_id} order by position`;
  const parent = columns.find((c) => c.id === run.column_id);
  if (!parent) return null;
  const children = columns.filter((c) => c.parent_column_id === run.column_id && typeof c.config.output === 'string');
  return {
    run,
    config: { provider: parent.config.provider, inputs: parent.config.inputs ?? {}, outputs: parent.config.outputs ?? [], options: parent.config.options ?? {} },
    group: [parent.id, ...children.map((c) => c.id)],
    outputOf: new Map(children.map((c) => [c.id, c.config.output!])),
  };
}

const isEmpty = (v: CellValue | undefined) => v === null || v === undefined || (typeof v === 'string' && v.trim() === '');
const brief = (text: string) => (text.length > 1000 ? `${text.slice(0, 997)}...` : text);

/** Each mapped input's value: an input column's from the row, a computed column's once done. */
async function readInputs(db: Db, ctx: RunContext, rowId: string): Promise<{ cells: Cells; inputs: Map<string, CellValue> } | null> {
  const [row] = await db<{ cells: Cells }[]>`select cells from table_rows where id = ${rowId}`;
  if (!row) return null;
  const mapped = Object.entries(ctx.config.inputs);
  const computedIds = mapped.map(([, id]) => id).filter((id) => !Object.hasOwn(row.cells, id));
  const computed = new Map<string, CellValue>();
  if (computedIds.length > 0) {
    const done = await db<{ column_id: string; value: CellValue }[]>`
      select column_id, value from table_cells where column_id = any(${computedIds}::uuid[]) and row_id = ${rowId} and state = 'done'`;
    for (const c of done) computed.set(c.column_id, c.value);
  }
  const value = (id: string): CellValue => (Object.hasOwn(row.cells, id) ? (row.cells[id] ?? null) : (computed.get(id) ?? null));
  return { cells: row.cells, inputs: new Map(mapped.map(([name, id]) => [name, value(id)])) };
}

/** Formulas that read the enrichment's cells follow them. */
async function recomputeReaders(db: Db, ctx: RunContext, rowId: string) {
  const columns = await loadColumns(db, ctx.run.table_id);
  if (columns.plan.order.length === 0) return;
  const affected = dependentsOf(columns.plan, ctx.group);
  if (![...affected].some((id) => columns.byId.get(id)?.kind === 'formula')) return;
  const [row] = await db<{ id: string; cells: Cells }[]>`select id, cells from table_rows where id = ${rowId}`;
  if (row) await writeFormulaCells(db, columns, [row], affected);
}

async function count(db: Db, runId: string, field: 'rows_done' | 'rows_empty' | 'rows_failed' | 'rows_skipped', credits = 0) {
  await db`update column_runs set ${db(field)} = ${db(field)} + 1, credits_charged = credits_charged + ${credits} where id = ${runId}`;
}

async function holdOf(db: Db, workspaceId: string, causeKey: string): Promise<string | undefined> {
  const [hold] = await db<{ id: string }[]>`select id from credit_holds where workspace_id = ${workspaceId} and cause_key = ${causeKey}`;
  return hold?.id;
}

async function releaseRowHold(db: Db, workspaceId: string, runId: string, rowId: string) {
  const holdId = await holdOf(db, workspaceId, runCauseKey(runId, rowId));
  if (holdId) await releaseHold(db, holdId);
}

/** The cells of one row in the group, moved from `from` to a settled state; true when the enrichment cell moved. */
async function settleCells(
  db: Db,
  ctx: RunContext,
  rowId: string,
  from: string[],
  to: { state: 'done' | 'error' | 'skipped'; values: Record<string, EnrichmentValue> | null; error: string | null; cost: number },
): Promise<boolean> {
  const [parentId] = ctx.group;
  const field = (values: Record<string, EnrichmentValue>, name: string) => (Object.hasOwn(values, name) ? values[name]! : null);
  const parentValue = to.values ? Object.fromEntries(ctx.config.outputs.map((name) => [name, field(to.values!, name)])) : null;
  const writes = ctx.group.map((id) => ({
    column_id: id,
    value: id === parentId ? parentValue : to.values ? field(to.values, ctx.outputOf.get(id)!) : null,
    cost: id === parentId ? to.cost : 0,
  }));
  const moved = await db<{ column_id: string }[]>`
    update table_cells c set state = ${to.state}, value = x.value, error = ${to.error}, cost = x.cost, previous = null, updated_at = now()
    from jsonb_to_recordset(${db.json(writes as never)}) as x (column_id uuid, value jsonb, cost int)
    where c.column_id = x.column_id and c.row_id = ${rowId} and c.run_id = ${ctx.run.id} and c.state = any(${from}::text[])
    returning c.column_id`;
  return moved.some((m) => m.column_id === parentId);
}

/** The activity's cancellation, so a provider call stops when Temporal gives up on it. */
function activitySignal(): AbortSignal {
  try {
    return Context.current().cancellationSignal;
  } catch {
    return new AbortController().signal;
  }
}

const stopReasons: Record<Exclude<RunEnding, 'completed'>, string> = {
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
