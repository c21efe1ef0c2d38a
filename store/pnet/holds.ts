/**
 * Holds by paused contact or sequence. A hold and the `held` flag of the steps it covers change
 * in one transaction, so a browser's line never sees one without the other; a step covered by
 * two holds stays held until both are gone.
 */
import type { Db, Sql } from '../../db/sql.js';
import type { StepHoldCreate } from '../../domain/pnet/holds.js';

interface HoldRow {
  id: string;
  contact_key: string | null;
  sequence_id: string | null;
  reason: string | null;
  created_at: Date;
  held_steps: number;
}

const toHold = (r: HoldRow) => ({ ...r, created_at: r.created_at.toISOString() });

/** Steps not settled yet: a running one finishes, but if it comes back in line it is held. */
const open = ['awaiting_approval', 'queued', 'resuming', 'claimed'];

const withCounts = (db: Db, workspaceId: string) => db`
  select h.id, h.contact_key, h.sequence_id, h.reason, h.created_at,
    (select count(*)::int from browser_steps s
      where s.workspace_id = h.workspace_id and s.held and s.status in ${db(open)}
        and (s.contact_key = h.contact_key or s.sequence_id = h.sequence_id)) as held_steps
  from pnet_step_holds h where h.workspace_id = ${workspaceId}`;

/** Pauses a contact or a sequence; pausing one already paused answers the hold as it is. */
export async function createHold(
  sql: Sql,
  workspaceId: string,
  input: StepHoldCreate,
): Promise<{ created: boolean; hold: ReturnType<typeof toHold> }> {
  const contact = 'contact_key' in input ? input.contact_key : null;
  const sequence = 'sequence_id' in input ? input.sequence_id : null;
  return sql.begin(async (tx) => {
    const inserted = await tx<{ id: string }[]>`
      insert into pnet_step_holds (workspace_id, contact_key, sequence_id, reason)
      values (${workspaceId}, ${contact}, ${sequence}, ${input.reason}) on conflict do nothing returning id`;
    await tx`
      update browser_steps set held = true, updated_at = now()
      where workspace_id = ${workspaceId} and status in ${tx(open)} and not held
        and ${contact === null ? tx`sequence_id = ${sequence}` : tx`contact_key = ${contact}`}`;
    const [hold] = await tx<HoldRow[]>`
      select * from (${withCounts(tx, workspaceId)}) h
      where ${contact === null ? tx`h.sequence_id = ${sequence}` : tx`h.contact_key = ${contact}`}`;
    return { created: inserted.length === 1, hold: toHold(hold!) };
  });
}

export async function listHolds(db: Db, workspaceId: string) {
  const rows = await db<HoldRow[]>`select * from (${withCounts(db, workspaceId)}) h order by created_at, id`;
  return rows.map(toHold);
}

/** Resumes: the hold goes, and its steps go back in line unless another hold still covers them. */
export async function releaseHold(
  sql: Sql,
  workspaceId: string,
  holdId: string,
): Promise<{ resumed_steps: number } | undefined> {
  return sql.begin(async (tx) => {
    const [hold] = await tx<{ contact_key: string | null; sequence_id: string | null }[]>`
      delete from pnet_step_holds where id = ${holdId} and workspace_id = ${workspaceId} returning contact_key, sequence_id`;
    if (!hold) return undefined;
    const resumed = await tx`
      update browser_steps set held = false, updated_at = now()
      where workspace_id = ${workspaceId} and held and status in ${tx(open)}
        and ${hold.contact_key === null ? tx`sequence_id = ${hold.sequence_id}` : tx`contact_key = ${hold.contact_key}`}
        and not pnet_step_held(workspace_id, contact_key, sequence_id)
      returning id`;
    return { resumed_steps: resumed.length };
  });
}
