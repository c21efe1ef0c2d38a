/** Assistant fixtures written as the service would write them, for tests of routes that need them. */
import type { Sql } from '../../db/sql.js';

/** A conversation of the workspace (its first member's unless one is named), inserted with SQL. */
export async function insertConversation(sql: Sql, workspaceId: string, options: { memberId?: string; title?: string } = {}): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    insert into assistant_conversations (workspace_id, member_id, title)
    values (
      ${workspaceId},
      coalesce(${options.memberId ?? null}::uuid, (select id from members where workspace_id = ${workspaceId} order by created_at limit 1)),
      ${options.title ?? 'Test conversation'}
    )
    returning id`;
  return row!.id;
}
