/** The pure rules of a business-context document's run (domain/documents/documents.ts, run by services/documents/document-run.ts). */
import { describe, expect, it } from 'vitest';
import {
  chunkChars,
  chunkStepDetail,
  extractStepDetail,
  keepsEditedSummary,
} from '../../domain/documents/documents.js';

describe('the steps’ details', () => {
  it('says what was read and how many characters it gave', () => {
    expect(extractStepDetail('PDF, 3 pages', 12_345)).toBe('PDF, 3 pages, 12,345 characters');
    expect(extractStepDetail('the text kept from the last read', 7)).toBe(
      'the text kept from the last read, 7 characters',
    );
  });

  it('counts the chunks and their size', () => {
    expect(chunkStepDetail(1)).toBe(`1 chunk of at most ${chunkChars.toLocaleString('en-US')} characters`);
    expect(chunkStepDetail(3, 8_000)).toBe('3 chunks of at most 8,000 characters');
  });
});

describe('keepsEditedSummary', () => {
  it('keeps a summary edited by hand unless the re-read asked for a new one', () => {
    expect(keepsEditedSummary({ summary_edited: true, regenerate_summary: false })).toBe(true);
    expect(keepsEditedSummary({ summary_edited: true, regenerate_summary: true })).toBe(false);
    expect(keepsEditedSummary({ summary_edited: false, regenerate_summary: false })).toBe(false);
    expect(keepsEditedSummary({ summary_edited: false, regenerate_summary: true })).toBe(false);
  });
});
