/**
 * Where a column run's next batch comes from and which of its rows run
 * (domain/tables/column-run-outcome.ts batchSource, afterBatch, splitBatch), as
 * services/tables/column-runs.ts claimRunBatch applies them: the scope by a cursor, then the rows
 * added while the run went, and the results kept.
 */
import { describe, expect, it } from 'vitest';
import { afterBatch, batchSource, splitBatch, type RunCursor } from '../../domain/tables/column-run-outcome.js';

const run = (over: Partial<RunCursor> = {}): RunCursor => ({
  cursor_seq: 10,
  cursor_done: false,
  sweep_new_rows: false,
  ...over,
});
const rows = (...seqs: number[]) => seqs.map((seq) => ({ seq }));

describe('batchSource', () => {
  it('reads the scope until its pass is done, then the new rows when the run sweeps them, else nothing', () => {
    expect(batchSource(run())).toBe('scope');
    expect(batchSource(run({ sweep_new_rows: true }))).toBe('scope');
    expect(batchSource(run({ cursor_done: true, sweep_new_rows: true }))).toBe('new_rows');
    expect(batchSource(run({ cursor_done: true }))).toBe('none');
  });
});

describe('afterBatch', () => {
  it('a full scope batch moves the cursor to its last row and leaves the pass open', () => {
    expect(afterBatch(run(), 'scope', rows(11, 12, 15), 3)).toEqual({
      cursor: 15,
      cursorDone: false,
      exhausted: false,
    });
  });

  it('a short scope batch ends the pass; the run is exhausted unless it sweeps new rows', () => {
    expect(afterBatch(run(), 'scope', rows(11), 3)).toEqual({ cursor: 11, cursorDone: true, exhausted: true });
    expect(afterBatch(run({ sweep_new_rows: true }), 'scope', rows(11), 3)).toEqual({
      cursor: 11,
      cursorDone: true,
      exhausted: false,
    });
  });

  it('an empty scope batch keeps the cursor where it was', () => {
    expect(afterBatch(run(), 'scope', [], 3)).toEqual({ cursor: 10, cursorDone: true, exhausted: true });
  });

  it('new rows never move the cursor; a short batch of them is the last', () => {
    const swept = run({ cursor_done: true, sweep_new_rows: true });
    expect(afterBatch(swept, 'new_rows', rows(3, 4), 2)).toEqual({ cursor: 10, cursorDone: true, exhausted: false });
    expect(afterBatch(swept, 'new_rows', rows(3), 2)).toEqual({ cursor: 10, cursorDone: true, exhausted: true });
  });

  it('nothing to read is exhausted', () => {
    expect(afterBatch(run({ cursor_done: true }), 'none', [], 2)).toEqual({
      cursor: 10,
      cursorDone: true,
      exhausted: true,
    });
  });
});

describe('splitBatch', () => {
  const picked = [
    { id: 'a', state: 'done', has_value: true },
    { id: 'b', state: 'done', has_value: false },
    { id: 'c', state: null, has_value: false },
    { id: 'd', state: 'error', has_value: false },
  ];

  it('keeps the done cells with a value when the run keeps existing results, and runs the rest in order', () => {
    const { kept, toRun } = splitBatch(picked, true);
    expect(kept.map((p) => p.id)).toEqual(['a']);
    expect(toRun).toEqual(['b', 'c', 'd']);
  });

  it('runs every row otherwise', () => {
    expect(splitBatch(picked, false)).toEqual({ kept: [], toRun: ['a', 'b', 'c', 'd'] });
  });
});
