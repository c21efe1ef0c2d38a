/** The agent tools' switches per workspace, and what their availability reads. */
import type { Db } from '../../db/sql.js';
import type { AgentToolKey } from '../../domain/pnet/agent.js';

/** Whether a pnet account of the workspace is connected (a browser to read profiles with). */
export async function hasConnectedPnetAccount(sql: Db, workspaceId: string): Promise<boolean> {
  const [connected] =
    await sql`select 1 from pnet_accounts where workspace_id = ${workspaceId} and status = 'connected' limit 1`;
  return connected !== undefined;
}

/** The switches a workspace has set; a tool without a row is off. */
export function agentToolSwitches(sql: Db, workspaceId: string) {
  return sql<
    { key: AgentToolKey; enabled: boolean }[]
  >`select key, enabled from agent_tools where workspace_id = ${workspaceId}`;
}

export async function setAgentToolEnabled(
  sql: Db,
  workspaceId: string,
  key: AgentToolKey,
  enabled: boolean,
): Promise<void> {
  await sql`
    insert into agent_tools (workspace_id, key, enabled) values (${workspaceId}, ${key}, ${enabled})
    on conflict (workspace_id, key) do update set enabled = excluded.enabled, updated_at = now()`;
}

/** Whether the workspace switched this tool on; a tool without a row is off. */
export async function agentToolEnabled(sql: Db, workspaceId: string, key: AgentToolKey): Promise<boolean> {
  const [row] = await sql<
    { enabled: boolean }[]
  >`select enabled from agent_tools where workspace_id = ${workspaceId} and key = ${key}`;
  return row?.enabled ?? false;
}
