/**
 * The sender account's own clock, run by its workflow: the housekeeping reads it schedules
 * (inbox, connections, sent invitations) and the end of a checkpoint's back-off. Ceilings,
 * warm-up and the lease lapse are read from the clock when asked, so they need no timer here.
 */
import { type Db } from '../../db/sql.js';
import type { ActionKind } from '../../domain/pnet/limits.js';
import type { StepRow } from './steps.js';
import { recordWorkspaceEvent } from '../notifications/outbox.js';

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
  const [held] = await tx<{ workspace_id: string; sender_profile_id: string | null; checkpoint_until: Date | null }[]>`
    update pnet_accounts set checkpoint_status = 'checkpoint', checkpoints_reported = checkpoints_reported + 1,
      checkpoint_until = now() + (${checkpointBackOffSeconds}::int[])[least(checkpoints_reported + 1, ${checkpointBackOffSeconds.length})]
        * interval '1 second',
      updated_at = now()
    where id = ${accountId}
    returning workspace_id, sender_profile_id, checkpoint_until`;
  if (held) {
    await recordWorkspaceEvent(tx, {
      workspaceId: held.workspace_id,
      type: 'account.checkpoint',
      payload: {
        account_id: accountId,
        sender_profile_id: held.sender_profile_id,
        checkpoint_until: held.checkpoint_until?.toISOString() ?? null,
      },
    });
  }
}

// ---------------------------------------------------------------------------------------------
// The account's tick (services/pnet/tick-sender-account.ts). The account row is locked only by the
// tick's last statement, sent with the COMMIT; its reads take turns on an advisory lock instead.

/** Ticks of one account (a retry beside an attempt thought lost) take turns on this lock. */
export async function takeAccountTickTurn(db: Db, accountId: string): Promise<void> {
  await db`select pg_advisory_xact_lock(hashtext('account-tick:' || ${accountId}))`;
}

export interface AccountTickRow {
  workspace_id: string;
  status: string;
  checkpoint_status: string;
  checkpoint_until: Date | null;
  replies_failing: boolean;
}

/** The account's columns the tick reads, without locking its row. */
export async function readAccountForTick(db: Db, accountId: string): Promise<AccountTickRow | undefined> {
  const [account] = await db<AccountTickRow[]>`
    select workspace_id, status, checkpoint_status, checkpoint_until, replies_failing from pnet_accounts where id = ${accountId}`;
  return account;
}

/** Whether a read of the kind is waiting, and when the last one was queued. */
export async function lastHousekeepingRead(
  db: Db,
  accountId: string,
  kind: ActionKind,
): Promise<{ waiting: boolean; last_at: Date | null } | undefined> {
  const [last] = await db<{ waiting: boolean; last_at: Date | null }[]>`
    select bool_or(status in ('queued', 'resuming', 'claimed')) as waiting, max(created_at) as last_at
    from browser_steps where account_id = ${accountId} and kind = ${kind}`;
  return last;
}

/** Queues a housekeeping read of the account. */
export async function queueHousekeepingRead(
  db: Db,
  workspaceId: string,
  accountId: string,
  kind: ActionKind,
): Promise<StepRow> {
  const [row] = await db<StepRow[]>`
    insert into browser_steps (workspace_id, account_id, kind, params, status, metered, queued_at)
    values (${workspaceId}, ${accountId}, ${kind}, ${db.json({ kind })}, 'queued', true, now())
    returning *`;
  return row!;
}

/** Every waiting read of the given kinds, not only new ones: a retry after a lost start starts it now. */
export async function waitingHousekeepingReads(db: Db, accountId: string, kinds: string[]): Promise<StepRow[]> {
  return db<StepRow[]>`
    select * from browser_steps where account_id = ${accountId}
      and kind = any(${kinds}::text[]) and status in ('queued', 'resuming')`;
}

/**
 * Ends a back-off run out by `now` and sets the next checks: the statement to send with the
 * COMMIT (returned unawaited, for commitWith), the only one that locks the account row. Judged
 * on the row as it is now: a checkpoint reported since the tick's read has a back-off still to
 * run, and is kept.
 */
export function settleAccountClock(
  db: Db,
  accountId: string,
  now: Date,
  next: { check_connections?: Date | undefined; check_inbox?: Date | undefined },
) {
  return db<{ checkpoint_until: Date | null }[]>`
    update pnet_accounts set
      checkpoint_status = case when checkpoint_status = 'checkpoint' and checkpoint_until <= ${now} then 'ok' else checkpoint_status end,
      checkpoint_until = case when checkpoint_until <= ${now} then null else checkpoint_until end,
      connections_next_check_at = coalesce(${next.check_connections ?? null}, connections_next_check_at),
      inbox_next_check_at = coalesce(${next.check_inbox ?? null}, inbox_next_check_at)
    where id = ${accountId} returning checkpoint_until`;
}
