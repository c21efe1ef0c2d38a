/**
 * The assistant's settings (interface spec: Assistant settings) and the grants people gave from
 * cards, per workspace.
 */
import type { Db } from '../../db/sql.js';
import {
  defaultThresholdCredits,
  type AssistantSettings,
  type AssistantSettingsUpdate,
  type Grant,
  type GrantScope,
} from '../../domain/assistant/assistant.js';

/** The settings; a workspace that never changed them reads the defaults. */
export async function readSettings(db: Db, workspaceId: string): Promise<AssistantSettings> {
  const [row] = await db<AssistantSettings[]>`
    select approval_threshold_credits, default_granted_verbs from assistant_settings where workspace_id = ${workspaceId}`;
  return row ?? { approval_threshold_credits: defaultThresholdCredits, default_granted_verbs: [] };
}

/** A field left out keeps its value. */
export async function updateSettings(
  db: Db,
  workspaceId: string,
  patch: AssistantSettingsUpdate,
): Promise<AssistantSettings> {
  const [row] = await db<AssistantSettings[]>`
    insert into assistant_settings (workspace_id, approval_threshold_credits, default_granted_verbs)
    values (${workspaceId}, ${patch.approval_threshold_credits ?? defaultThresholdCredits}, ${patch.default_granted_verbs ?? []}::text[])
    on conflict (workspace_id) do update set
      approval_threshold_credits = coalesce(${patch.approval_threshold_credits ?? null}::int, assistant_settings.approval_threshold_credits),
      default_granted_verbs = coalesce(${patch.default_granted_verbs ?? null}::text[], assistant_settings.default_granted_verbs),
      updated_at = now()
    returning approval_threshold_credits, default_granted_verbs`;
  return row!;
}

interface GrantRow {
  id: string;
  verb: string;
  scope: GrantScope;
  conversation_id: string | null;
  member_id: string | null;
  granted_by_display_name: string | null;
  proposal_id: string | null;
  created_at: Date;
}

const toGrant = (r: GrantRow): Grant => ({ ...r, created_at: r.created_at.toISOString() });

/** Live grants of the workspace, oldest first. */
export async function listGrants(db: Db, workspaceId: string): Promise<Grant[]> {
  const rows = await db<GrantRow[]>`
    select g.id, g.verb, g.scope, g.conversation_id, g.member_id, m.display_name as granted_by_display_name, g.proposal_id, g.created_at
    from assistant_grants g left join members m on m.id = g.granted_by_member_id
    where g.workspace_id = ${workspaceId} and g.revoked_at is null
    order by g.created_at, g.id`;
  return rows.map(toGrant);
}

/** A grant from a card; the same grant given twice is one grant. */
export async function insertGrant(
  db: Db,
  g: {
    workspaceId: string;
    verb: string;
    scope: GrantScope;
    conversationId: string | null;
    memberId: string | null;
    grantedBy: string | null;
    proposalId: string;
  },
): Promise<void> {
  await db`
    insert into assistant_grants (workspace_id, verb, scope, conversation_id, member_id, granted_by_member_id, proposal_id)
    values (${g.workspaceId}, ${g.verb}, ${g.scope},
      ${g.scope === 'thread' ? g.conversationId : null}, ${g.scope === 'project_me' ? g.memberId : null}, ${g.grantedBy}, ${g.proposalId})
    on conflict do nothing`;
}

/** Revokes a live grant; false when there is none by that id in the workspace. */
export async function revokeGrant(db: Db, workspaceId: string, grantId: string): Promise<boolean> {
  const rows = await db`
    update assistant_grants set revoked_at = now()
    where id = ${grantId} and workspace_id = ${workspaceId} and revoked_at is null returning id`;
  return rows.length === 1;
}
