/**
 * Waking sequence contacts after something that stops outreach was recorded (a reply, a bounce,
 * a do-not-contact entry, a stop). Correctness does not depend on this: every send reads
 * contact_stop_reason() in the transaction that records it. Waking only makes pending steps stop
 * now instead of at the contact's next send.
 */
import type { Client } from '@temporalio/client';
import type { Sql } from '../db/sql.js';

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
  // Sequences (migration 015) fill this in; until they exist there is no contact to wake.
  void deps;
  void workspaceId;
  void who;
  return 0;
}
