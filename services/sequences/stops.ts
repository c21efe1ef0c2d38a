/**
 * Waking sequence contacts after something that stops outreach was recorded (a reply, a bounce,
 * a do-not-contact entry, a stop). Correctness does not depend on this: every send reads
 * contact_stop_reason() in the transaction that records it. Waking only makes pending steps stop
 * now instead of at the contact's next send.
 */
import { contactsToWake } from '../../store/sequences/stops.js';
import type { ServiceDeps } from '../deps.js';
import { wakeContacts, type ContactRef } from './sequence-client.js';

export type SequenceStopDeps = Pick<ServiceDeps, 'sql' | 'temporal'>;

export interface StopTargets {
  emails?: string[];
  profileUrls?: string[];
  sequenceContactIds?: string[];
}

/** Signals every active sequence contact of the workspace matching `who` to re-check now; returns how many were signalled. */
export async function wakeSequenceContacts(
  deps: SequenceStopDeps,
  workspaceId: string,
  who: StopTargets,
): Promise<number> {
  const emails = (who.emails ?? []).filter(Boolean);
  const urls = (who.profileUrls ?? []).filter(Boolean);
  const ids = (who.sequenceContactIds ?? []).filter((id) => /^[0-9a-f-]{36}$/i.test(id));
  if (emails.length + urls.length + ids.length === 0) return 0;
  const { sql } = deps;
  const contacts: ContactRef[] = await contactsToWake(sql, workspaceId, { emails, urls, ids });
  await wakeContacts(deps.temporal, contacts);
  return contacts.length;
}
