/**
 * A column run's decisions, apart from the guarded statements that apply them
 * (store/tables/column-runs.ts): where a batch of rows comes from and which of them run
 * (`batchSource`, `afterBatch`, `splitBatch`), how one row's activity ends (`decideRowOutcome`)
 * and how the run ends (`decideRunEnding`). Pure; unit-tested in
 * test/unit/column-run-outcome.test.ts and test/unit/column-run-batch.test.ts.
 *
 * A row goes through two transactions with the provider's call between them. Its snapshot grows
 * as they go: the run's status under its lock, whether the claim of the row's cells moved the
 * enrichment cell, the row's inputs, whether the credit hold was taken, then the provider's
 * answer, whether storing it moved the cell, and the row's hold. While the decision needs a fact
 * the snapshot lacks it answers the statement that gets it (a guarded write whose answer is the
 * fact, or a read). What only a statement can decide on its own snapshot stays in SQL: the claim
 * and the settle are compare-and-sets on the cell's state and on the run that owns it
 * (table_cells.run_id), and a hold takes credits only when the balance has them.
 */
import type { ColumnRunStatus, EnrichmentOutcome, EnrichmentValue } from './enrichments.js';
import type { CellValue } from './tables.js';

/** How a row's activity ended. `no_credits` and `cancelled` leave the cell pending for the run's end. */
export type CellOutcome = 'done' | 'empty' | 'skipped' | 'gone' | 'no_credits' | 'cancelled';

export type RunEnding = 'completed' | 'cancelled' | 'failed';

export const terminalRunStatuses: ReadonlySet<ColumnRunStatus> = new Set(['completed', 'cancelled', 'failed']);

/** What a cell the run never reached says, by how the run ended. */
export const stopReasons: Record<Exclude<RunEnding, 'completed'>, string> = {
  cancelled: 'The run was cancelled before it reached this row.',
  failed: 'The run stopped before it reached this row.',
};

export const isEmptyInput = (v: CellValue | undefined) =>
  v === null || v === undefined || (typeof v === 'string' && v.trim() === '');

// ---------------------------------------------------------------------------------------------
// A batch

/** The run's reading position (column_runs.cursor_seq, cursor_done) and whether it sweeps rows added while it goes. */
export interface RunCursor {
  cursor_seq: number;
  cursor_done: boolean;
  sweep_new_rows: boolean;
}

/**
 * Where the next batch comes from: the run's scope after its cursor until that pass is done, then
 * (when rows were added while it went) the rows with no cell yet; else nowhere.
 */
export function batchSource(run: RunCursor): 'scope' | 'new_rows' | 'none' {
  if (!run.cursor_done) return 'scope';
  return run.sweep_new_rows ? 'new_rows' : 'none';
}

/**
 * The cursor after a batch of at most `limit` rows picked from `source`, and whether no row is
 * left to claim. A short pass over the scope ends it; only the scope pass moves the cursor.
 */
export function afterBatch(
  run: RunCursor,
  source: 'scope' | 'new_rows' | 'none',
  picked: readonly { seq: number }[],
  limit: number,
): { cursor: number; cursorDone: boolean; exhausted: boolean } {
  switch (source) {
    case 'scope': {
      const cursorDone = picked.length < limit;
      return {
        cursor: picked.length > 0 ? picked[picked.length - 1]!.seq : run.cursor_seq,
        cursorDone,
        exhausted: cursorDone && !run.sweep_new_rows,
      };
    }
    case 'new_rows':
      return { cursor: run.cursor_seq, cursorDone: run.cursor_done, exhausted: picked.length < limit };
    case 'none':
      return { cursor: run.cursor_seq, cursorDone: run.cursor_done, exhausted: true };
  }
}

/**
 * The picked rows whose result is kept (keep_existing_results: a done cell with a value, counted
 * and left alone) and the ids of the rows the batch runs, in row order.
 */
export function splitBatch<R extends { id: string; state: string | null; has_value: boolean }>(
  picked: readonly R[],
  keepExistingResults: boolean,
): { kept: R[]; toRun: string[] } {
  const kept = keepExistingResults ? picked.filter((p) => p.state === 'done' && p.has_value) : [];
  return { kept, toRun: picked.filter((p) => !kept.includes(p)).map((p) => p.id) };
}

// ---------------------------------------------------------------------------------------------
// A row

export interface RowSnapshot {
  /** The provider's price per result, in credits. */
  price: number;
  /** Paid for ahead (an assistant card's hold): the row holds nothing of its own but still counts its cost. */
  prepaid?: boolean;
  /** The provider's required input names. */
  required: readonly string[];
  /** The run's status under its row lock; null: the run is gone. */
  run: { status: ColumnRunStatus } | null;
  /** The claim (pending or running -> running, this run's cells only) moved the enrichment cell. */
  claimed?: boolean;
  /** The row's inputs by name; null: the row is gone. */
  inputs?: ReadonlyMap<string, CellValue> | null;
  /** The row's credit hold was taken (false: the balance fell short). Asked only at a price. */
  held?: boolean;
  /** What the provider answered. */
  result?: EnrichmentOutcome;
  /** Storing the result (running -> done, this run's cells only) moved the enrichment cell. */
  settled?: boolean;
  /** The row's credit hold, read after the store; null when there is none. Asked only at a price. */
  holdId?: string | null;
}

export type RowStep =
  /** Move the row's cells to running for this run. */
  | { kind: 'claim' }
  | { kind: 'read_inputs' }
  /** Hold the price for the row. */
  | { kind: 'hold'; amount: number }
  /** Commit, then call the provider. */
  | { kind: 'call' }
  /** Store the provider's answer in the row's cells. */
  | { kind: 'store'; values: Record<string, EnrichmentValue> | null; cost: number }
  | { kind: 'read_hold' };

export type RowEnd =
  /** Nothing of the row is this run's now (or the run stopped): nothing written. */
  | { kind: 'end'; outcome: 'gone' | 'cancelled' }
  /** A required input is empty: the cells are skipped with this error, nothing held. */
  | { kind: 'skip'; outcome: 'skipped'; error: string }
  /** Too few credits: the cells go back to pending, for the run's end. */
  | { kind: 'unclaim'; outcome: 'no_credits' }
  /** The stored result's end: the hold charged or released, the run's count. */
  | {
      kind: 'settle';
      outcome: 'done' | 'empty' | 'gone';
      hold: { id: string; action: 'charge' | 'release'; amount: number } | null;
      /** The counter of the run, with the credits charged; null: nothing to count. */
      count: { field: 'rows_done' | 'rows_empty'; credits: number } | null;
    };

export type RowDecision = RowStep | RowEnd;

/** The next statement of a row's activity, or how the row ends; pure. */
export function decideRowOutcome(s: RowSnapshot): RowDecision {
  // A cancelled run starts no more rows; the cell stays pending and the run's end puts it back.
  if (!s.run || s.run.status !== 'running')
    return { kind: 'end', outcome: s.run?.status === 'cancelling' ? 'cancelled' : 'gone' };
  if (s.claimed === undefined) return { kind: 'claim' };
  if (!s.claimed) return { kind: 'end', outcome: 'gone' };
  if (s.inputs === undefined) return { kind: 'read_inputs' };
  if (s.inputs === null) return { kind: 'end', outcome: 'gone' };
  const inputs = s.inputs;
  const missing = s.required.filter((name) => isEmptyInput(inputs.get(name)));
  if (missing.length > 0) return { kind: 'skip', outcome: 'skipped', error: `No value for ${missing.join(', ')}.` };
  const holds = s.price > 0 && !s.prepaid;
  if (holds) {
    if (s.held === undefined) return { kind: 'hold', amount: s.price };
    if (!s.held) return { kind: 'unclaim', outcome: 'no_credits' };
  }
  if (s.result === undefined) return { kind: 'call' };

  const values = s.result.kind === 'result' ? s.result.values : null;
  if (s.settled === undefined) return { kind: 'store', values, cost: values ? s.price : 0 };
  if (holds && s.holdId === undefined) return { kind: 'read_hold' };
  const holdId = holds ? s.holdId : null;
  if (!s.settled) {
    // Someone else owns the cell now (a newer run, a deleted row): nothing delivered, nothing charged.
    return {
      kind: 'settle',
      outcome: 'gone',
      hold: holdId ? { id: holdId, action: 'release', amount: 0 } : null,
      count: null,
    };
  }
  return {
    kind: 'settle',
    outcome: values ? 'done' : 'empty',
    hold: holdId ? { id: holdId, action: values ? 'charge' : 'release', amount: values ? s.price : 0 } : null,
    count: values ? { field: 'rows_done', credits: s.price } : { field: 'rows_empty', credits: 0 },
  };
}

// ---------------------------------------------------------------------------------------------
// The run

export interface RunEndingSnapshot {
  /** The run under its row lock; null: gone. */
  run: { status: ColumnRunStatus; wakes: number } | null;
  /** How the workflow asks the run to end. */
  outcome: RunEnding;
  /** The run's `wakes` at the workflow's last claim (asked with `completed`). */
  wakes?: number | undefined;
  reason?: string | undefined;
}

export type RunEndingDecision =
  /** Gone or over already: nothing to end; the run's holds still open are returned. */
  | { kind: 'over'; status: ColumnRunStatus | 'gone' }
  /** Rows were added since the last claim (or the run no longer runs): not finished, claim again. */
  | { kind: 'not_yet'; status: ColumnRunStatus }
  /**
   * The run ends with `status`: `error` is kept unless a reason is given; pending cells get back
   * what they held, or are skipped saying `skipReason`; running cells err; open holds are returned.
   */
  | { kind: 'end'; status: RunEnding; error: string | null; skipReason: string };

/**
 * How the run ends. `completed` only while no row add woke it since its last claim (`wakes`);
 * otherwise it is not finished and the workflow claims again.
 */
export function decideRunEnding(s: RunEndingSnapshot): RunEndingDecision {
  if (!s.run) return { kind: 'over', status: 'gone' };
  if (terminalRunStatuses.has(s.run.status)) return { kind: 'over', status: s.run.status };
  if (s.outcome === 'completed' && (s.run.status !== 'running' || s.run.wakes !== s.wakes))
    return { kind: 'not_yet', status: s.run.status };
  return {
    kind: 'end',
    status: s.outcome,
    error: s.reason ?? null,
    skipReason: s.outcome === 'completed' ? stopReasons.failed : (s.reason ?? stopReasons[s.outcome]),
  };
}
