/**
 * Waking sequence contacts after something that stops outreach was recorded (a reply, a bounce,
 * a do-not-contact entry, a stop). Correctness does not depend on this: every send reads
 * contact_stop_reason() in the transaction that records it. Waking only makes pending steps stop
 * now instead of at the contact's next send.
 */
import type { Client } from '@temporalio/client';
import type { Sql } from '../../db/sql.js';
import { wakeContacts, type ContactRef } from './sequence-client.js';

export interface SequenceStopDeps {
  sql: Sql;
  temporal: { client: Client; taskQueue: string };
}

export interface StopTargets {
  emails?: string[];
  profileUrls?: string[];
  sequenceContactIds?: string[];
}

/** Signals every active sequence contact of the workspace matching `who` to re-check now; returns how many were signalled. */
export async function wakeSequenceContacts(deps: SequenceStopDeps, workspaceId: string, who: StopTargets): Promise<number> {
  const emails = (who.emails ?? []).filter(Boolean);
  const urls = (who.profileUrls ?? []).filter(Boolean);
  const ids = (who.sequenceContactIds ?? []).filter((id) => /^[0-9a-f-]{36}$/i.test(id));
  if (emails.length + urls.length + ids.length === 0) return 0;
  const { sql } = deps;
  const contacts = await sql<ContactRef[]>`
    select id, sequence_id, workspace_id, contact_key from sequence_contacts
    where workspace_id = ${workspaceId} and status in ('active', 'paused', 'failed') and (
      ${emails.length > 0 ? sql`normalize_email(email) in (select normalize_email(x) from unnest(${emails}::text[]) x)` : sql`false`}
      or ${urls.length > 0 ? sql`normalize_profile_url(profile_url) in (select normalize_profile_url(x) from unnest(${urls}::text[]) x)` : sql`false`}
      or ${ids.length > 0 ? sql`id = any(${ids}::uuid[])` : sql`false`})`;
  await wakeContacts(deps.temporal.client, deps.temporal.taskQueue, contacts);
  return contacts.length;
}
