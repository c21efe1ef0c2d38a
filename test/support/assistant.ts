/** Assistant fixtures written as the service would write them, for tests of routes that need them. */
import type { Sql } from '../../db/sql.js';
import type { ChatModelScript, ChatModelServerRequest } from '../../sim/chat-model-server.js';

/** A conversation of the workspace (its first member's unless one is named), inserted with SQL. */
export async function insertConversation(
  sql: Sql,
  workspaceId: string,
  options: { memberId?: string; title?: string } = {},
): Promise<string> {
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

/** A part of the assistant's stream, as a front-end parses it. */
export interface Part {
  type: string;
  [k: string]: unknown;
}

/** The SSE body as a front-end reads it: ids and parts, and whether it ended with [DONE]. */
export function readStream(body: string): { ids: number[]; parts: Part[]; done: boolean } {
  const ids: number[] = [];
  const parts: Part[] = [];
  let done = false;
  for (const event of body.split('\n\n')) {
    const data = event
      .split('\n')
      .find((l) => l.startsWith('data: '))
      ?.slice(6);
    const id = event
      .split('\n')
      .find((l) => l.startsWith('id: '))
      ?.slice(4);
    if (data === '[DONE]') done = true;
    else if (data) {
      parts.push(JSON.parse(data) as Part);
      ids.push(Number(id));
    }
  }
  return { ids, parts, done };
}

/** A script of the local chat model: the tool `calls` first, then, once a tool has answered, `words`. */
export function callsThenWords(
  calls: { name: string; arguments: unknown }[],
  words = 'Done.',
): (request: ChatModelServerRequest) => ChatModelScript {
  return (request) => (request.messages.some((m) => m.role === 'tool') ? { content: words } : { toolCalls: calls });
}

/** The assistant's call adding a `Site title` column: the web page reader on the table's url column. */
export function addSiteTitleColumn(tableId: string, urlColumnId: string) {
  return {
    name: 'add_column',
    arguments: {
      table_id: tableId,
      column: {
        kind: 'enrichment',
        name: 'Site title',
        provider: 'web_page_reader',
        input_mappings: { url: urlColumnId },
        output_fields: ['title'],
      },
    },
  };
}
