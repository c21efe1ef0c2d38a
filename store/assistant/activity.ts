/** The assistant's activity log: every decision and every outcome of a card, each written once. */
import type { Db } from '../../db/sql.js';
import type { Activity, ActorKind, Decision, Outcome } from '../../domain/assistant/assistant.js';

export interface ActivityEntry {
  workspaceId: string;
  conversationId: string | null;
  proposalId: string | null;
  verb: string;
  decision: Decision;
  outcome: Outcome | null;
  actorKind: ActorKind;
  actorMemberId: string | null;
  actorDisplayName: string | null;
  note?: string | null;
  /** One row per cause (a card's decision, a card's outcome), whatever retries happen. */
  causeKey: string;
}

export async function recordActivity(db: Db, e: ActivityEntry): Promise<void> {
  await db`
    insert into assistant_activity (workspace_id, conversation_id, proposal_id, verb, decision, outcome, actor_kind,
      actor_member_id, actor_display_name, note, cause_key)
    values (${e.workspaceId}, ${e.conversationId}, ${e.proposalId}, ${e.verb}, ${e.decision}, ${e.outcome}, ${e.actorKind},
      ${e.actorMemberId}, ${e.actorDisplayName}, ${e.note ?? null}, ${e.causeKey})
    on conflict (workspace_id, cause_key) do nothing`;
}

interface ActivityRow extends Omit<Activity, 'created_at'> {
  created_at: Date;
  total_count: number;
}

export async function listActivity(
  db: Db,
  workspaceId: string,
  q: { conversationId?: string | undefined; limit: number; offset: number },
): Promise<{ activity: Activity[]; total_count: number }> {
  const rows = await db<ActivityRow[]>`
    select id, conversation_id, proposal_id, verb, decision, outcome, actor_kind, actor_display_name, note, created_at,
      count(*) over () as total_count
    from assistant_activity
    where workspace_id = ${workspaceId} ${q.conversationId ? db`and conversation_id = ${q.conversationId}` : db``}
    order by position desc
    limit ${q.limit} offset ${q.offset}`;
  const total = rows[0]?.total_count ?? (q.offset > 0 ? await countActivity(db, workspaceId, q.conversationId) : 0);
  return {
    activity: rows.map(({ total_count: _, ...r }) => ({ ...r, created_at: r.created_at.toISOString() })),
    total_count: total,
  };
}

async function countActivity(db: Db, workspaceId: string, conversationId: string | undefined): Promise<number> {
  const [row] = await db<{ n: number }[]>`
    select count(*)::int as n from assistant_activity
    where workspace_id = ${workspaceId} ${conversationId ? db`and conversation_id = ${conversationId}` : db``}`;
  return row?.n ?? 0;
}
