/**
 * Queries of the change log (table_changes, migration 011), which triggers on table_rows and
 * table_cells write in the writing transaction. Ids are global and, within one table, become
 * visible in id order, so "every change of the table after id N" is a complete answer.
 */
import type { Db } from '../../db/sql.js';
import type { TableEventName } from '../../domain/tables/events.js';

/** The channel the triggers notify with a table id, once per transaction and table. */
export const tableChangesChannel = 'table_changes';

/** An empty notification on the channel: a process that hears its own knows its LISTEN connection works. */
export async function pingTableChanges(db: Db) {
  await db`select pg_notify(${tableChangesChannel}, '')`;
}

export interface Change {
  id: number;
  /** The whole server-sent event, ready to write. */
  frame: string;
}

export function eventFrame(id: number, event: TableEventName, data: string, retryMs?: number): string {
  return `${retryMs === undefined ? '' : `retry: ${retryMs}\n`}id: ${id}\nevent: ${event}\ndata: ${data}\n\n`;
}

export interface FeedPosition {
  /** The table's newest change (0: none kept). */
  latest: number;
  /** Retention removed the table's changes up to here. */
  pruned: number;
  /** The newest id handed out for any table: a larger Last-Event-ID was never ours. */
  issued: number;
}

export async function feedPosition(db: Db, tableId: string): Promise<FeedPosition> {
  const [row] = await db<FeedPosition[]>`
    select coalesce((select max(id) from table_changes where table_id = ${tableId}), 0) as latest,
           coalesce((select pruned_through from table_change_horizon where table_id = ${tableId}), 0) as pruned,
           (select case when is_called then last_value else 0 end from table_changes_id_seq) as issued`;
  return row!;
}

/**
 * Up to `limit` changes of the table after `after`, in order, and what retention removed, read
 * in one snapshot: a reader behind `pruned` has lost changes even when the page looks whole.
 */
export async function readChanges(
  db: Db,
  tableId: string,
  after: number,
  limit: number,
): Promise<{ pruned: number; changes: Change[] }> {
  const rows = await db<{ pruned: number; id: number | null; kind: TableEventName | null; data: string | null }[]>`
    select h.pruned, c.id, c.kind, c.data
    from (select coalesce(max(pruned_through), 0) as pruned from table_change_horizon where table_id = ${tableId}) h
    left join lateral (
      select id, kind, data::text as data
      from table_changes where table_id = ${tableId} and id > ${after} order by id limit ${limit}
    ) c on true
    order by c.id`;
  const changes = rows.flatMap((r) => (r.id === null ? [] : [{ id: r.id, frame: eventFrame(r.id, r.kind!, r.data!) }]));
  return { pruned: rows[0]?.pruned ?? 0, changes };
}

/**
 * Deletes changes older than the retention window, a few thousand at a time, and records per
 * table what went in the same statement, so no reader can miss a change without being told.
 */
export async function pruneTableChanges(db: Db, retentionHours: number): Promise<number> {
  const batch = 5000;
  let total = 0;
  for (;;) {
    const [row] = await db<{ n: number }[]>`
      with gone as (
        delete from table_changes c using (
          select table_id, id from table_changes where created_at < now() - make_interval(hours => ${retentionHours}) limit ${batch}
        ) old
        where c.table_id = old.table_id and c.id = old.id
        returning c.table_id, c.id
      ), horizon as (
        insert into table_change_horizon (table_id, pruned_through)
        select table_id, max(id) from gone group by table_id
        on conflict (table_id) do update set pruned_through = greatest(table_change_horizon.pruned_through, excluded.pruned_through)
      )
      select count(*)::int as n from gone`;
    total += row!.n;
    if (row!.n < batch) return total;
  }
}
