/**
 * The sequence feed's statements: enrolling an audience table's new rows as they come. The cursor
 * (the last table row seq read) moves only after the enrolment, which is idempotent per row.
 */
import type { Db } from '../../db/sql.js';

export interface FeedState {
  workspace_id: string;
  audience_table_id: string | null;
  feed_new_rows: boolean;
  status: string;
  feed_cursor: number;
}

/** The sequence's feed settings and cursor, or undefined when it is gone. */
export async function readFeed(db: Db, sequenceId: string): Promise<FeedState | undefined> {
  const [seq] = await db<FeedState[]>`
    select workspace_id, audience_table_id, feed_new_rows, status, feed_cursor from sequences where id = ${sequenceId}`;
  return seq;
}

/** The audience rows after the cursor, oldest first, at most `batch`. */
export async function audienceRowsAfter(
  db: Db,
  tableId: string,
  cursor: number,
  batch: number,
): Promise<{ id: string; seq: number }[]> {
  return db<{ id: string; seq: number }[]>`
    select id, seq from table_rows where table_id = ${tableId} and seq > ${cursor} order by seq limit ${batch}`;
}

/** Moves the cursor forward only (a late retry never moves it back). */
export async function advanceFeedCursor(db: Db, sequenceId: string, seq: number): Promise<void> {
  await db`update sequences set feed_cursor = greatest(feed_cursor, ${seq}) where id = ${sequenceId}`;
}

/** The live sequences that enrol the new rows of this table. */
export async function sequencesFedBy(
  db: Db,
  workspaceId: string,
  tableId: string,
): Promise<{ id: string; workspace_id: string }[]> {
  return db<{ id: string; workspace_id: string }[]>`
    select id, workspace_id from sequences
    where audience_table_id = ${tableId} and workspace_id = ${workspaceId} and feed_new_rows and status <> 'archived'`;
}
