/** The provider's events as received: one row per event id, which is what makes handling happen once. */
import type { Db } from '../../db/sql.js';

/** Records an event; false when its id was recorded before (a redelivery), in which case nothing else may change. */
export async function recordBillingEvent(
  tx: Db,
  e: { id: string; type: string; workspaceId: string | null; occurredAt: Date },
): Promise<boolean> {
  const rows = await tx`
    insert into billing_events (event_id, type, workspace_id, occurred_at, outcome)
    values (${e.id}, ${e.type}, ${e.workspaceId}, ${e.occurredAt}, 'received')
    on conflict (event_id) do nothing returning 1`;
  return rows.length === 1;
}

export async function setBillingEventOutcome(tx: Db, eventId: string, outcome: string): Promise<void> {
  await tx`update billing_events set outcome = ${outcome} where event_id = ${eventId}`;
}

export async function billingEventOutcome(db: Db, eventId: string): Promise<string | undefined> {
  const [row] = await db<{ outcome: string }[]>`select outcome from billing_events where event_id = ${eventId}`;
  return row?.outcome;
}
