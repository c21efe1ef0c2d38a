/** What the assistant's verbs read of the rest of the workspace, beyond the other stores' functions. */
import type { Db } from '../../db/sql.js';

/** The table's rows a card covers, in grid order, at most `limit`. */
export async function tableRowIds(db: Db, tableId: string, limit: number): Promise<string[]> {
  const rows = await db<
    { id: string }[]
  >`select id from table_rows where table_id = ${tableId} order by seq limit ${limit}`;
  return rows.map((r) => r.id);
}

/** Of `rowIds`, those the table has. */
export async function rowsOfTable(db: Db, tableId: string, rowIds: string[]): Promise<string[]> {
  const rows = await db<
    { id: string }[]
  >`select id from table_rows where table_id = ${tableId} and id = any(${rowIds}::uuid[])`;
  const found = new Set(rows.map((r) => r.id));
  return rowIds.filter((id) => found.has(id));
}

/** A column the card made, found again by name when the card's record of it was lost to a crash. */
export async function columnMadeSince(
  db: Db,
  tableId: string,
  name: string,
  since: Date,
): Promise<{ id: string; kind: string } | undefined> {
  const [row] = await db<{ id: string; kind: string }[]>`
    select id, kind from table_columns where table_id = ${tableId} and lower(name) = lower(${name}) and parent_column_id is null and created_at >= ${since}`;
  return row;
}

export async function setPreparedColumn(db: Db, proposalId: string, prepared: object): Promise<void> {
  await db`update assistant_proposals set prepared_column = ${db.json(prepared as never)}, runs_column_id = ${(prepared as { column_id: string }).column_id}
    where id = ${proposalId}`;
}

/** The run a card's hold paid for. */
export async function runFundedBy(db: Db, holdId: string) {
  const [row] = await db<
    {
      id: string;
      table_id: string;
      column_id: string;
      status: string;
      rows_done: number;
      credits_charged: number;
      error: string | null;
    }[]
  >`
    select id, table_id, column_id, status, rows_done, credits_charged, error from column_runs where funding_hold_id = ${holdId}`;
  return row;
}

/** The workspace in brief for the model: its tables and sequences, newest first. */
export async function workspaceBrief(db: Db, workspaceId: string) {
  const tables = await db<{ id: string; name: string; row_count: number }[]>`
    select id, name, row_count from tables where workspace_id = ${workspaceId} and deleted_at is null order by created_at desc limit 20`;
  const sequences = await db<{ id: string; name: string; status: string }[]>`
    select id, name, status from sequences where workspace_id = ${workspaceId} order by created_at desc limit 20`;
  return { tables, sequences };
}
