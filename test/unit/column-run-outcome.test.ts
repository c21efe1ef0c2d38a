/**
 * A column run's row outcome and ending, branch by branch, with no database: decideRowOutcome is
 * walked from the run's lock to the row's end, answering the statements it asks for from a table
 * of facts (an unexpected statement fails the case); decideRunEnding is one decision.
 */
import { describe, expect, it } from 'vitest';
import {
  decideRowOutcome,
  decideRunEnding,
  isEmptyInput,
  stopReasons,
  type RowDecision,
  type RowSnapshot,
} from '../../domain/tables/column-run-outcome.js';
import type { ColumnRunStatus } from '../../domain/tables/enrichments.js';
import type { CellValue } from '../../domain/tables/tables.js';

type Answers = Pick<RowSnapshot, 'claimed' | 'inputs' | 'held' | 'result' | 'settled' | 'holdId'>;
const answerOf = {
  claim: 'claimed',
  read_inputs: 'inputs',
  hold: 'held',
  call: 'result',
  store: 'settled',
  read_hold: 'holdId',
} as const;

const inputs = (entries: Record<string, CellValue>) => new Map(Object.entries(entries));
const filled = inputs({ domain: 'example.com', name: 'Ada' });

/** Walks a row to its end; `path` lists the statements (and the provider's call) in order. */
function walk(start: Partial<RowSnapshot>, answers: Answers) {
  let snap: RowSnapshot = { price: 2, required: ['domain'], run: { status: 'running' }, ...start };
  const path: RowDecision[] = [];
  for (let turn = 0; turn < 20; turn++) {
    const d = decideRowOutcome(snap);
    path.push(d);
    if (d.kind === 'end' || d.kind === 'skip' || d.kind === 'unclaim' || d.kind === 'settle')
      return { end: d, path: path.map((p) => p.kind) };
    const key = answerOf[d.kind];
    if (!Object.hasOwn(answers, key))
      throw new Error(`unexpected ${d.kind} after ${path.map((p) => p.kind).join(', ')}`);
    snap = { ...snap, [key]: answers[key] };
  }
  throw new Error('the row never ended');
}

const result = { kind: 'result' as const, values: { email: 'ada@example.com' } };
const empty = { kind: 'empty' as const, reason: 'nothing found' };

describe('decideRowOutcome: before the provider', () => {
  it('starts no row of a run that is cancelling (cancelled) or not running or gone (gone), writing nothing', () => {
    expect(walk({ run: { status: 'cancelling' } }, {})).toEqual({
      end: { kind: 'end', outcome: 'cancelled' },
      path: ['end'],
    });
    for (const status of ['queued', 'completed', 'cancelled', 'failed'] as ColumnRunStatus[]) {
      expect(walk({ run: { status } }, {}).end).toEqual({ kind: 'end', outcome: 'gone' });
    }
    expect(walk({ run: null }, {}).end).toEqual({ kind: 'end', outcome: 'gone' });
  });

  it("answers gone when the claim did not move the row's cell (another run owns it, or it settled)", () => {
    expect(walk({}, { claimed: false })).toEqual({ end: { kind: 'end', outcome: 'gone' }, path: ['claim', 'end'] });
  });

  it('answers gone when the row was deleted', () => {
    expect(walk({}, { claimed: true, inputs: null })).toEqual({
      end: { kind: 'end', outcome: 'gone' },
      path: ['claim', 'read_inputs', 'end'],
    });
  });

  it('skips a row whose required input is empty, naming every one, and holds nothing', () => {
    const r = walk(
      { required: ['domain', 'name', 'city'] },
      { claimed: true, inputs: inputs({ domain: '  ', name: null, city: 'Paris', extra: '' }) },
    );
    expect(r).toEqual({
      end: { kind: 'skip', outcome: 'skipped', error: 'No value for domain, name.' },
      path: ['claim', 'read_inputs', 'skip'],
    });
    // An input left unmapped counts as empty; an optional one never skips the row.
    expect(walk({ required: ['missing'] }, { claimed: true, inputs: filled }).end).toMatchObject({
      kind: 'skip',
      error: 'No value for missing.',
    });
    expect(
      walk({ required: [] }, { claimed: true, inputs: inputs({}), held: true, result, settled: true, holdId: 'h' }).end,
    ).toMatchObject({ outcome: 'done' });
  });

  it('holds the price, and puts the cells back to pending when credits fall short', () => {
    const r = walk({ price: 3 }, { claimed: true, inputs: filled, held: false });
    expect(r).toEqual({
      end: { kind: 'unclaim', outcome: 'no_credits' },
      path: ['claim', 'read_inputs', 'hold', 'unclaim'],
    });
    const claimed: RowSnapshot = { price: 3, required: [], run: { status: 'running' }, claimed: true, inputs: filled };
    expect(decideRowOutcome(claimed)).toEqual({ kind: 'hold', amount: 3 });
    expect(decideRowOutcome({ ...claimed, held: true })).toEqual({ kind: 'call' });
  });

  it('calls a free provider without a hold', () => {
    expect(
      decideRowOutcome({ price: 0, required: [], run: { status: 'running' }, claimed: true, inputs: filled }),
    ).toEqual({ kind: 'call' });
  });
});

describe('decideRowOutcome: after the provider', () => {
  it('stores a result, charges its hold and counts it done with its credits', () => {
    const r = walk(
      { price: 2 },
      { claimed: true, inputs: filled, held: true, result, settled: true, holdId: 'hold-1' },
    );
    expect(r.path).toEqual(['claim', 'read_inputs', 'hold', 'call', 'store', 'read_hold', 'settle']);
    expect(r.end).toEqual({
      kind: 'settle',
      outcome: 'done',
      hold: { id: 'hold-1', action: 'charge', amount: 2 },
      count: { field: 'rows_done', credits: 2 },
    });
    expect(
      decideRowOutcome({
        price: 2,
        required: [],
        run: { status: 'running' },
        claimed: true,
        inputs: filled,
        held: true,
        result,
      }),
    ).toEqual({
      kind: 'store',
      values: result.values,
      cost: 2,
    });
  });

  it('a run an assistant card paid for ahead holds nothing per row but still counts and stores what each result cost', () => {
    const r = walk({ price: 2, prepaid: true }, { claimed: true, inputs: filled, result, settled: true });
    expect(r.path).toEqual(['claim', 'read_inputs', 'call', 'store', 'settle']);
    expect(r.end).toEqual({ kind: 'settle', outcome: 'done', hold: null, count: { field: 'rows_done', credits: 2 } });
    expect(
      decideRowOutcome({
        price: 2,
        prepaid: true,
        required: [],
        run: { status: 'running' },
        claimed: true,
        inputs: filled,
        result,
      }),
    ).toEqual({
      kind: 'store',
      values: result.values,
      cost: 2,
    });
    expect(
      walk({ price: 2, prepaid: true }, { claimed: true, inputs: filled, result: empty, settled: true }).end,
    ).toEqual({
      kind: 'settle',
      outcome: 'empty',
      hold: null,
      count: { field: 'rows_empty', credits: 0 },
    });
  });

  it('stores an empty answer at no cost, returns the hold and counts it empty', () => {
    const r = walk(
      { price: 2 },
      { claimed: true, inputs: filled, held: true, result: empty, settled: true, holdId: 'hold-1' },
    );
    expect(r.end).toEqual({
      kind: 'settle',
      outcome: 'empty',
      hold: { id: 'hold-1', action: 'release', amount: 0 },
      count: { field: 'rows_empty', credits: 0 },
    });
    expect(
      decideRowOutcome({
        price: 2,
        required: [],
        run: { status: 'running' },
        claimed: true,
        inputs: filled,
        held: true,
        result: empty,
      }),
    ).toEqual({
      kind: 'store',
      values: null,
      cost: 0,
    });
  });

  it('answers gone when the store did not move the cell: nothing charged, the hold returned, nothing counted', () => {
    const r = walk(
      { price: 2 },
      { claimed: true, inputs: filled, held: true, result, settled: false, holdId: 'hold-1' },
    );
    expect(r.end).toEqual({
      kind: 'settle',
      outcome: 'gone',
      hold: { id: 'hold-1', action: 'release', amount: 0 },
      count: null,
    });
    expect(
      walk({ price: 2 }, { claimed: true, inputs: filled, held: true, result, settled: false, holdId: null }).end,
    ).toEqual({
      kind: 'settle',
      outcome: 'gone',
      hold: null,
      count: null,
    });
  });

  it("settles a free provider's row without reading any hold", () => {
    const r = walk({ price: 0 }, { claimed: true, inputs: filled, result, settled: true });
    expect(r.path).toEqual(['claim', 'read_inputs', 'call', 'store', 'settle']);
    expect(r.end).toEqual({ kind: 'settle', outcome: 'done', hold: null, count: { field: 'rows_done', credits: 0 } });
  });

  it('counts a result whose hold is no longer there, charging nothing', () => {
    expect(
      walk({ price: 2 }, { claimed: true, inputs: filled, held: true, result, settled: true, holdId: null }).end,
    ).toEqual({
      kind: 'settle',
      outcome: 'done',
      hold: null,
      count: { field: 'rows_done', credits: 2 },
    });
  });

  it('takes only null, undefined and blank strings as empty inputs', () => {
    expect([null, undefined, '', '  '].map(isEmptyInput)).toEqual([true, true, true, true]);
    expect([0, false, 'x', ' x '].map((v) => isEmptyInput(v as CellValue))).toEqual([false, false, false, false]);
  });
});

describe('decideRunEnding', () => {
  const running = { status: 'running' as const, wakes: 4 };

  it('has nothing to end for a gone or finished run (its open holds still go back)', () => {
    expect(decideRunEnding({ run: null, outcome: 'completed', wakes: 0 })).toEqual({ kind: 'over', status: 'gone' });
    for (const status of ['completed', 'cancelled', 'failed'] as const) {
      expect(decideRunEnding({ run: { status, wakes: 4 }, outcome: 'cancelled' })).toEqual({ kind: 'over', status });
    }
  });

  it('completes a running run whose wakes are still those of its last claim', () => {
    expect(decideRunEnding({ run: running, outcome: 'completed', wakes: 4 })).toEqual({
      kind: 'end',
      status: 'completed',
      error: null,
      skipReason: stopReasons.failed,
    });
  });

  it('does not complete a run woken by a row add since its claim, nor one no longer running', () => {
    expect(decideRunEnding({ run: running, outcome: 'completed', wakes: 3 })).toEqual({
      kind: 'not_yet',
      status: 'running',
    });
    expect(decideRunEnding({ run: running, outcome: 'completed' })).toEqual({ kind: 'not_yet', status: 'running' });
    expect(decideRunEnding({ run: { status: 'cancelling', wakes: 4 }, outcome: 'completed', wakes: 4 })).toEqual({
      kind: 'not_yet',
      status: 'cancelling',
    });
    expect(decideRunEnding({ run: { status: 'queued', wakes: 4 }, outcome: 'completed', wakes: 4 })).toEqual({
      kind: 'not_yet',
      status: 'queued',
    });
  });

  it('cancels or fails a run whatever its wakes, the unreached cells saying why', () => {
    expect(decideRunEnding({ run: { status: 'cancelling', wakes: 9 }, outcome: 'cancelled' })).toEqual({
      kind: 'end',
      status: 'cancelled',
      error: null,
      skipReason: 'The run was cancelled before it reached this row.',
    });
    expect(decideRunEnding({ run: running, outcome: 'failed', wakes: 1 })).toEqual({
      kind: 'end',
      status: 'failed',
      error: null,
      skipReason: 'The run stopped before it reached this row.',
    });
  });

  it("records a given reason as the run's error and as what the unreached cells say", () => {
    const reason = 'The workspace ran out of credits.';
    expect(decideRunEnding({ run: running, outcome: 'failed', reason })).toEqual({
      kind: 'end',
      status: 'failed',
      error: reason,
      skipReason: reason,
    });
    // Completing with a reason keeps the reason as the error; cells left pending say the run stopped.
    expect(decideRunEnding({ run: running, outcome: 'completed', wakes: 4, reason })).toEqual({
      kind: 'end',
      status: 'completed',
      error: reason,
      skipReason: stopReasons.failed,
    });
  });
});
