/**
 * Queries the pnet routes used to hold inline (routes hold no SQL). Kept apart from steps.ts and
 * accounts.ts only while those are being reworked; they belong beside their other functions.
 */
import type { Db } from '../../db/sql.js';

/** How a browser of the account last introduced itself, when it has checked in before. */
export async function browserSession(sql: Db, accountId: string, browserId: string) {
  const [session] = await sql<{ browser_label: string; extension_version: string }[]>`
    select browser_label, extension_version from pnet_sessions
    where account_id = ${accountId} and browser_id = ${browserId}`;
  return session;
}

/** The browser acted after all (a late success of a failed step): a retry checks first. */
export async function markStepActed(sql: Db, stepId: string): Promise<void> {
  await sql`update browser_steps set acted_at = coalesce(acted_at, now()), updated_at = now() where id = ${stepId}`;
}

/** The pnet account of a sender profile. */
export async function accountOfSenderProfile(sql: Db, profileId: string) {
  const [account] = await sql<{ id: string; workspace_id: string }[]>`
    select id, workspace_id from pnet_accounts where sender_profile_id = ${profileId}`;
  return account;
}
