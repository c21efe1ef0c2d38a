/** The agent sending switch: per workspace, and the operator's switch for every workspace. */
import type { Db, Sql } from '../../db/sql.js';
import type { AgentSending } from '../../domain/pnet/agent.js';

export async function pausedEverywhere(db: Db): Promise<boolean> {
  const [row] = await db<{ value: string }[]>`select value from service_settings where key = 'paused_everywhere'`;
  return row?.value === 'true';
}

export async function setPausedEverywhere(sql: Sql, paused: boolean): Promise<void> {
  await sql`
    insert into service_settings (key, value) values ('paused_everywhere', ${String(paused)})
    on conflict (key) do update set value = excluded.value`;
}

export async function readAgentSending(db: Db, workspaceId: string): Promise<AgentSending> {
  const [row] = await db<{ paused: boolean; changed_by: string | null; changed_at: Date | null }[]>`
    select paused, changed_by, changed_at from agent_sending where workspace_id = ${workspaceId}`;
  return {
    paused: row?.paused ?? false,
    paused_everywhere: await pausedEverywhere(db),
    changed_by: row?.changed_by ?? null,
    changed_at: row?.changed_at?.toISOString() ?? null,
  };
}

/** Whether unattended (metered) sending of this workspace is stopped now, by either switch. */
export async function sendingStopped(db: Db, workspaceId: string): Promise<boolean> {
  const state = await readAgentSending(db, workspaceId);
  return state.paused || state.paused_everywhere;
}

export async function updateAgentSending(
  sql: Sql,
  workspaceId: string,
  change: { paused: boolean; reason: string | null; changedBy: string | null },
): Promise<AgentSending> {
  await sql.begin(async (tx) => {
    await tx`
      insert into agent_sending (workspace_id, paused, changed_by, changed_at)
      values (${workspaceId}, ${change.paused}, ${change.changedBy}, now())
      on conflict (workspace_id) do update set paused = excluded.paused, changed_by = excluded.changed_by, changed_at = now()`;
    await tx`
      insert into agent_sending_history (workspace_id, paused, reason, changed_by)
      values (${workspaceId}, ${change.paused}, ${change.reason}, ${change.changedBy})`;
  });
  return readAgentSending(sql, workspaceId);
}

export async function agentSendingHistory(db: Db, workspaceId: string) {
  const rows = await db<{ paused: boolean; reason: string | null; changed_by: string | null; changed_at: Date }[]>`
    select paused, reason, changed_by, changed_at from agent_sending_history where workspace_id = ${workspaceId}
    order by id desc limit 200`;
  return rows.map((r) => ({ ...r, changed_at: r.changed_at.toISOString() }));
}
