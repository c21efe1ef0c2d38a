/**
 * The pure parts of an assistant turn (domain/assistant/turn.ts) that services/assistant/answer.ts
 * and propose-card.ts apply: the system prompt, the parts that open and close a model step, a
 * tool call's arguments, what the model reads back of a card, and read_attachment's page window.
 */
import { describe, expect, it } from 'vitest';
import {
  attachmentPageWindow,
  cardToolResult,
  parseArguments,
  stepClosing,
  stepOpening,
  stepTextId,
  systemPrompt,
} from '../../domain/assistant/turn.js';

describe('systemPrompt', () => {
  it('says when the workspace has no tables or sequences, and lists no files or business context', () => {
    const prompt = systemPrompt({ tables: [], sequences: [] }, []);
    expect(prompt).toContain('- no tables yet\n- no sequences yet');
    expect(prompt).not.toContain('read_attachment');
    expect(prompt).not.toContain('What this workspace sells');
  });

  it('names tables, sequences and attached files (pages for a pdf, rows otherwise, the status until ready)', () => {
    const prompt = systemPrompt(
      {
        tables: [{ id: 't1', name: 'Leads', row_count: 3 }],
        sequences: [{ id: 's1', name: 'Intro', status: 'active' }],
      },
      [
        { id: 'a1', filename: 'deck.pdf', kind: 'pdf', status: 'ready', page_count: 12 },
        { id: 'a2', filename: 'list.csv', kind: 'csv', status: 'ready', page_count: 40 },
        { id: 'a3', filename: 'big.xlsx', kind: 'xlsx', status: 'pending', page_count: null },
      ],
    );
    expect(prompt).toContain('- table "Leads" (t1), 3 rows');
    expect(prompt).toContain('- sequence "Intro" (s1), active');
    expect(prompt).toContain('Files attached to this conversation (read them with read_attachment):');
    expect(prompt).toContain('- "deck.pdf" (a1), pdf, 12 pages');
    expect(prompt).toContain('- "list.csv" (a2), csv, 40 rows');
    expect(prompt).toContain('- "big.xlsx" (a3), xlsx, pending');
  });

  it('ends with the business context after a blank line', () => {
    const prompt = systemPrompt({ tables: [], sequences: [] }, [], [{ title: 'Pricing', summary: 'Per seat.' }]);
    expect(prompt).toMatch(/- no sequences yet\n\nWhat this workspace sells[^\n]*\n### Pricing\nPer seat\.$/);
  });
});

describe('parseArguments', () => {
  it('reads JSON, takes empty arguments as {}, and answers undefined for what is not JSON', () => {
    expect(parseArguments('{"a":1}')).toEqual({ a: 1 });
    expect(parseArguments('  ')).toEqual({});
    expect(parseArguments('{oops')).toBeUndefined();
  });
});

describe("a step's parts", () => {
  it('a first attempt opens with start-step alone', () => {
    expect(stepOpening(1, ['text-0-1'])).toEqual([{ type: 'start-step' }]);
  });

  it('a retried attempt closes the open blocks and says the step is asked again, then starts it', () => {
    expect(stepOpening(2, ['text-0-1'])).toEqual([
      { type: 'text-end', id: 'text-0-1' },
      {
        type: 'data-notice',
        data: { code: 'step_restarted', text: 'The answer was interrupted; this step is asked again.' },
      },
      { type: 'start-step' },
    ]);
  });

  it("names each attempt's text block apart", () => {
    expect(stepTextId(3, 2)).toBe('text-3-2');
  });

  it('closes the text block it wrote, then each tool call with its parsed input, then finish-step', () => {
    expect(
      stepClosing('text-0-1', true, [
        { id: 'c1', name: 'add_column', arguments: '{"table_id":"t"}' },
        { id: 'c2', name: 'find_operations', arguments: '' },
      ]),
    ).toEqual([
      { type: 'text-end', id: 'text-0-1' },
      { type: 'tool-input-available', toolCallId: 'c1', toolName: 'add_column', input: { table_id: 't' } },
      { type: 'tool-input-available', toolCallId: 'c2', toolName: 'find_operations', input: {} },
      { type: 'finish-step' },
    ]);
    expect(stepClosing('text-0-1', false, [])).toEqual([{ type: 'finish-step' }]);
  });
});

describe('cardToolResult', () => {
  const card = { id: 'p1', status: 'pending' as const, summary: 'Add a column', price_label: '5 credits', error: null };

  it('says whether the card runs now under a grant or waits for the person', () => {
    expect(cardToolResult(card, true)).toBe(
      'Card p1 proposed: Add a column (5 credits). It runs now under a standing grant.',
    );
    expect(cardToolResult(card, false)).toBe(
      'Card p1 proposed: Add a column (5 credits). It waits for the person to approve it.',
    );
  });

  it('says why a card could not be prepared', () => {
    expect(cardToolResult({ ...card, status: 'failed', error: 'name taken' }, false)).toBe(
      'The card could not be prepared: name taken',
    );
    expect(cardToolResult({ ...card, status: 'failed' }, false)).toBe('The card could not be prepared: unknown reason');
  });
});

describe('attachmentPageWindow', () => {
  it('reads from the start, 10 pages, by default', () => {
    expect(attachmentPageWindow({})).toEqual({ offset: 0, limit: 10 });
  });

  it('truncates numbers and keeps the offset at least 0 and the limit within 1 to 10', () => {
    expect(attachmentPageWindow({ offset: '4.7', limit: 3.9 })).toEqual({ offset: 4, limit: 3 });
    expect(attachmentPageWindow({ offset: -3, limit: 50 })).toEqual({ offset: 0, limit: 10 });
    expect(attachmentPageWindow({ offset: 'x', limit: -2 })).toEqual({ offset: 0, limit: 1 });
    expect(attachmentPageWindow({ limit: 0 })).toEqual({ offset: 0, limit: 10 });
  });
});
