/**
 * Whether a sequence's feed enrols its audience table's new rows (domain/sequences/contact-rules.ts
 * feedsNewRows, asked by services/sequences/contacts.ts feedSequence).
 */
import { describe, expect, it } from 'vitest';
import { feedsNewRows } from '../../domain/sequences/contact-rules.js';

const feed = (over: Partial<{ audience_table_id: string | null; feed_new_rows: boolean; status: string }> = {}) => ({
  audience_table_id: 't1',
  feed_new_rows: true,
  status: 'active',
  ...over,
});

describe('feedsNewRows', () => {
  it('feeds a sequence with an audience table and feed_new_rows on, whatever its status but archived', () => {
    expect(feedsNewRows(feed())).toBe(true);
    expect(feedsNewRows(feed({ status: 'paused' }))).toBe(true);
    expect(feedsNewRows(feed({ status: 'draft' }))).toBe(true);
  });

  it('feeds nothing when the sequence is gone, archived, has no audience table or feed_new_rows is off', () => {
    expect(feedsNewRows(undefined)).toBe(false);
    expect(feedsNewRows(feed({ status: 'archived' }))).toBe(false);
    expect(feedsNewRows(feed({ audience_table_id: null }))).toBe(false);
    expect(feedsNewRows(feed({ feed_new_rows: false }))).toBe(false);
  });
});
