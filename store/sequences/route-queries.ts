/**
 * Queries the sequence routes used to hold inline (routes hold no SQL). Kept apart from
 * sequences.ts only while that file is being reworked; they belong beside its other functions.
 */
import type { Db, Sql } from '../../db/sql.js';

/** What a contact's workflow is addressed by. */
export interface ContactKeyRow {
  id: string;
  sequence_id: string;
  workspace_id: string;
  contact_key: string;
}

/** The contacts of a sequence that a transition wakes: active, paused or failed. */
export function liveContactsOf(sql: Db, sequenceId: string) {
  return sql<ContactKeyRow[]>`
    select id, sequence_id, workspace_id, contact_key from sequence_contacts
    where sequence_id = ${sequenceId} and status in ('active', 'paused', 'failed')`;
}

export async function contactKeyOf(sql: Db, contactId: string): Promise<ContactKeyRow | undefined> {
  const [c] = await sql<ContactKeyRow[]>`select id, sequence_id, workspace_id, contact_key from sequence_contacts where id = ${contactId}`;
  return c;
}

/** The outbound agent of the sequence (set by the outbound-agent routes), when the column exists. */
export async function outboundAgentOf(sql: Db, sequenceId: string): Promise<string | null> {
  const [row] = await sql<{ agent: string | null }[]>`select to_jsonb(s)->>'outbound_agent_id' as agent from sequences s where id = ${sequenceId}`;
  return row?.agent ?? null;
}

/**
 * A contact's cancelled (or vanished) pnet step is let go, so a retry queues a new one: the
 * contact no longer points at it, and its send goes back to approved.
 */
export async function releaseCancelledStep(sql: Sql, contactId: string, stepId: string): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`update sequence_contacts set browser_step_id = null where id = ${contactId} and browser_step_id = ${stepId}`;
    await tx`update sequence_sends set status = 'approved', browser_step_id = null, updated_at = now() where browser_step_id = ${stepId} and status = 'sent'`;
  });
}

/** The first open of a sent email, by its pixel's token; unknown tokens change nothing. */
export async function recordEmailOpen(sql: Db, openToken: string): Promise<void> {
  await sql`update sequence_sends set opened_at = now(), updated_at = now() where open_token = ${openToken} and opened_at is null and status = 'sent'`;
}
