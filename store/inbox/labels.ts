/** The workspace's inbox labels and which threads carry them. */
import type { Db } from '../../db/sql.js';
import type { Label } from '../../domain/inbox/inbox.js';

export interface LabelRow {
  id: string;
  name: string;
  color: string | null;
  created_at: Date;
}

export const toLabel = (r: LabelRow): Label => ({
  id: r.id,
  name: r.name,
  color: r.color,
  created_at: r.created_at.toISOString(),
});

export async function listLabels(db: Db, workspaceId: string): Promise<Label[]> {
  return (
    await db<LabelRow[]>`select * from inbox_labels where workspace_id = ${workspaceId} order by lower(name), id`
  ).map(toLabel);
}

export async function getLabel(db: Db, workspaceId: string, labelId: string): Promise<Label | null> {
  const [row] = await db<
    LabelRow[]
  >`select * from inbox_labels where id = ${labelId} and workspace_id = ${workspaceId}`;
  return row ? toLabel(row) : null;
}

/** null when the name is taken. */
export async function createLabel(
  db: Db,
  workspaceId: string,
  input: { name: string; color: string | null },
): Promise<Label | null> {
  const [row] = await db<LabelRow[]>`
    insert into inbox_labels (workspace_id, name, color) values (${workspaceId}, ${input.name}, ${input.color})
    on conflict (workspace_id, name) do nothing returning *`;
  return row ? toLabel(row) : null;
}

/** Whether another label of the workspace already has this name. */
export async function labelNameTaken(
  db: Db,
  workspaceId: string,
  name: string,
  exceptLabelId: string,
): Promise<boolean> {
  const [taken] =
    await db`select 1 from inbox_labels where workspace_id = ${workspaceId} and name = ${name} and id <> ${exceptLabelId}`;
  return taken !== undefined;
}

export async function setLabel(db: Db, labelId: string, name: string, color: string | null): Promise<Label> {
  const [row] = await db<
    LabelRow[]
  >`update inbox_labels set name = ${name}, color = ${color} where id = ${labelId} returning *`;
  return toLabel(row!);
}

export async function deleteLabel(db: Db, workspaceId: string, labelId: string): Promise<boolean> {
  return (
    (await db`delete from inbox_labels where id = ${labelId} and workspace_id = ${workspaceId} returning id`).length ===
    1
  );
}

export async function labelThread(db: Db, threadId: string, labelId: string, on: boolean) {
  if (on)
    await db`insert into inbox_thread_labels (thread_id, label_id) values (${threadId}, ${labelId}) on conflict do nothing`;
  else await db`delete from inbox_thread_labels where thread_id = ${threadId} and label_id = ${labelId}`;
}
