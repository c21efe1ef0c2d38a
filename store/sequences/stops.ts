/**
 * Stopping outreach and finding whom to wake: stop rows for people, the live sequence contacts
 * matching a person, and the sequences a table feeds.
 */
import type { Db } from '../../db/sql.js';

/** A sequence contact to signal (services/sequences/sequence-client.ts ContactRef). */
export interface WakeContactRow {
  id: string;
  sequence_id: string;
  workspace_id: string;
  contact_key: string;
}

/** The workspace's active, paused or failed sequence contacts with one of these emails, profile URLs or ids (compared normalized). */
export async function contactsToWake(
  db: Db,
  workspaceId: string,
  who: { emails: string[]; urls: string[]; ids: string[] },
): Promise<WakeContactRow[]> {
  const { emails, urls, ids } = who;
  return db<WakeContactRow[]>`
    select id, sequence_id, workspace_id, contact_key from sequence_contacts
    where workspace_id = ${workspaceId} and status in ('active', 'paused', 'failed') and (
      ${emails.length > 0 ? db`normalize_email(email) in (select normalize_email(x) from unnest(${emails}::text[]) x)` : db`false`}
      or ${urls.length > 0 ? db`normalize_profile_url(profile_url) in (select normalize_profile_url(x) from unnest(${urls}::text[]) x)` : db`false`}
      or ${ids.length > 0 ? db`id = any(${ids}::uuid[])` : db`false`})`;
}

/** One stop row per email, per profile URL and per sequence contact, so their sequences stop at the next check. */
export async function recordContactStops(
  db: Db,
  workspaceId: string,
  who: { emails: string[]; profileUrls: string[]; sequenceContactIds: string[] },
  reason: string,
  createdBy: string | null,
): Promise<void> {
  await db`
      insert into contact_stops (workspace_id, email, profile_url, sequence_contact_id, reason, created_by)
      select ${workspaceId}::uuid, e, null::text, null::uuid, ${reason}::text, ${createdBy}::text from unnest(${who.emails}::text[]) as e
      union all select ${workspaceId}::uuid, null, p, null, ${reason}, ${createdBy} from unnest(${who.profileUrls}::text[]) as p
      union all select ${workspaceId}::uuid, null, null, c, ${reason}, ${createdBy} from unnest(${who.sequenceContactIds}::uuid[]) as c`;
}
