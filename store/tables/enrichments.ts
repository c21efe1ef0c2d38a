/** The columns of an enrichment: the enrichment column with its provider settings, and its output columns. */
import type { Db } from '../../db/sql.js';
import type { StoredEnrichmentConfig } from '../../domain/tables/enrichments.js';

/** The enrichment column at `position`; its id. */
export async function insertEnrichmentColumn(
  db: Db,
  column: { workspaceId: string; tableId: string; name: string; position: number; config: StoredEnrichmentConfig },
): Promise<string> {
  const [parent] = await db<{ id: string }[]>`
        insert into table_columns (workspace_id, table_id, name, kind, position, config)
        values (${column.workspaceId}, ${column.tableId}, ${column.name}, 'enrichment', ${column.position}, ${db.json(column.config as never)})
        returning id`;
  return parent!.id;
}

/** The enrichment's output columns, each holding its output field; their ids in position order. */
export async function insertEnrichmentOutputColumns(
  db: Db,
  target: { workspaceId: string; tableId: string; parentId: string },
  children: { name: string; position: number; config: { output: string } }[],
): Promise<string[]> {
  if (children.length === 0) return [];
  const inserted = await db<{ id: string; position: number }[]>`
            insert into table_columns (workspace_id, table_id, name, kind, position, config, parent_column_id)
            select ${target.workspaceId}, ${target.tableId}, x.name, 'enrichment', x.position, x.config, ${target.parentId}
            from jsonb_to_recordset(${db.json(children)}) as x (name text, position int, config jsonb)
            order by x.position
            returning id, position`;
  return [...inserted].sort((a, b) => a.position - b.position).map((c) => c.id);
}
