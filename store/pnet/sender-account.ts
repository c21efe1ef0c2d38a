/**
 * The sender account's own clock, run by its workflow: the housekeeping reads it schedules
 * (inbox, connections, sent invitations) and the end of a checkpoint's back-off. Ceilings,
 * warm-up and the lease lapse are read from the clock when asked, so they need no timer here.
 */
import { type Db } from '../../db/sql.js';
import type { ActionKind } from '../../domain/pnet/limits.js';

/** How often each read runs; the claim still paces them within working hours and their ceilings. */
export const housekeepingEverySeconds: Partial<Record<ActionKind, number>> = {
  check_inbox: 30 * 60,
  check_connections: 4 * 60 * 60,
  check_sent_invitations: 24 * 60 * 60,
};

/**
 * A failing inbox read holds every message of the account back (a reply may have come in unseen),
 * so it is tried again this soon instead of at the usual half hour.
 */
export const failingInboxRetrySeconds = 5 * 60;

/** A checkpoint holds the account for longer each time it comes back. */
export const checkpointBackOffSeconds = [60 * 60, 4 * 60 * 60, 24 * 60 * 60, 72 * 60 * 60];

/** Called in the settling transaction when the browser reports a checkpoint. */
export async function holdAtCheckpoint(tx: Db, accountId: string): Promise<void> {
  await tx`
    update pnet_accounts set checkpoint_status = 'checkpoint', checkpoints_reported = checkpoints_reported + 1,
      checkpoint_until = now() + (${checkpointBackOffSeconds}::int[])[least(checkpoints_reported + 1, ${checkpointBackOffSeconds.length})]
        * interval '1 second',
      updated_at = now()
    where id = ${accountId}`;
}

