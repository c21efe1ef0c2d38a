/** Design-partner applications: applied by a member, accepted or declined by an operator. */
import type { Db } from '../../db/sql.js';

export type DesignPartnerStatus = 'pending' | 'accepted' | 'declined' | 'ended';

export interface DesignPartnerRow {
  workspace_id: string;
  status: DesignPartnerStatus;
  company_website: string;
  use_case: string;
  team_size: number;
  decided_at: Date | null;
  decision_note: string | null;
  created_at: Date;
  updated_at: Date;
}

const columns = (db: Db) =>
  db`workspace_id, status, company_website, use_case, team_size, decided_at, decision_note, created_at, updated_at`;

export async function readDesignPartner(db: Db, workspaceId: string): Promise<DesignPartnerRow | undefined> {
  const [row] = await db<
    DesignPartnerRow[]
  >`select ${columns(db)} from design_partner_applications where workspace_id = ${workspaceId}`;
  return row;
}

/**
 * Applies, or applies again after a decline or an end; undefined while an application is pending
 * or accepted (the caller answers 409).
 */
export async function applyDesignPartner(
  db: Db,
  a: { workspaceId: string; memberId: string | null; companyWebsite: string; useCase: string; teamSize: number },
): Promise<DesignPartnerRow | undefined> {
  const [row] = await db<DesignPartnerRow[]>`
    insert into design_partner_applications (workspace_id, company_website, use_case, team_size, applied_by)
    values (${a.workspaceId}, ${a.companyWebsite}, ${a.useCase}, ${a.teamSize}, ${a.memberId})
    on conflict (workspace_id) do update set status = 'pending', company_website = excluded.company_website, use_case = excluded.use_case,
      team_size = excluded.team_size, applied_by = excluded.applied_by, decided_at = null, decision_note = null, created_at = now(), updated_at = now()
    where design_partner_applications.status in ('declined', 'ended')
    returning ${columns(db)}`;
  return row;
}

/**
 * An operator's decision: accept or decline a pending application, or end an accepted one.
 * Compare-and-set on the status; undefined when the application is not in a state to take it.
 */
export async function decideDesignPartner(
  db: Db,
  workspaceId: string,
  decision: 'accepted' | 'declined' | 'ended',
  note: string | null,
): Promise<DesignPartnerRow | undefined> {
  const from = decision === 'ended' ? 'accepted' : 'pending';
  const [row] = await db<DesignPartnerRow[]>`
    update design_partner_applications set status = ${decision}, decided_at = now(), decision_note = ${note}, updated_at = now()
    where workspace_id = ${workspaceId} and status = ${from}
    returning ${columns(db)}`;
  return row;
}
