/**
 * A tick of a sender account's own clock (workflows/pnet/sender-account.ts runs it as an activity,
 * activities/pnet/sender-account.ts): the housekeeping reads it schedules and the end of a
 * checkpoint's back-off. The decisions are pure, in domain/pnet/accounts.ts; the statements are
 * store/pnet/sender-account.ts's.
 */
import { commitWith, transaction } from '../../db/sql.js';
import { earliest, housekeepingMayRun, housekeepingTurn, type AccountClock } from '../../domain/pnet/accounts.js';
import type { ActionKind } from '../../domain/pnet/limits.js';
import {
  failingInboxRetrySeconds,
  lastHousekeepingRead,
  queueHousekeepingRead,
  readAccountForTick,
  settleAccountClock,
  takeAccountTickTurn,
  waitingHousekeepingReads,
} from '../../store/pnet/sender-account.js';
import type { StepRow } from '../../store/pnet/steps.js';
import type { ServiceDeps } from '../deps.js';

/** What the tick needs, with the start of a step's workflow handed in by the worker (it is idempotent: a running one is left as it is). */
export type TickDeps = Pick<ServiceDeps, 'sql'> & { startStep: (row: StepRow) => Promise<void> };

/**
 * Ends a back-off that has run out, queues the reads of `housekeeping` that are due (one waiting
 * read of a kind at most, each kind every so many seconds), and starts the waiting reads' step
 * workflows after the commit, so a retry after a lost start makes it good. `now` is the workflow's
 * clock, not the database's: they agree in service, and a time-skipping test moves only the
 * workflow's.
 */
export async function tickSenderAccount(
  { sql, startStep }: TickDeps,
  { accountId, now, housekeeping }: { accountId: string; now: Date; housekeeping: Partial<Record<ActionKind, number>> },
): Promise<AccountClock> {
  // The account's row is locked only by the last statement, sent with the COMMIT: check-ins
  // and claims lock the same row, and a tick's reads are several round trips. Ticks of one
  // account (a retry beside an attempt thought lost) take turns on an advisory lock instead
  // (docs/decisions/013-account-tick-advisory-lock.md).
  const { clock, rows } = await transaction(sql, async (tx) => {
    await takeAccountTickTurn(tx, accountId);
    const account = await readAccountForTick(tx, accountId);
    if (!account)
      return { clock: { connected: false, checkpointUntil: null, nextCheckAt: null, queuedStepIds: [] }, rows: [] };
    const due: StepRow[] = [];
    const upcomingOf: Partial<Record<ActionKind, Date>> = {};
    if (housekeepingMayRun(account, now)) {
      for (const [kind, usual] of Object.entries(housekeeping) as [ActionKind, number][]) {
        const every =
          kind === 'check_inbox' && account.replies_failing ? Math.min(usual, failingInboxRetrySeconds) : usual;
        const turn = housekeepingTurn(await lastHousekeepingRead(tx, accountId, kind), every, now);
        if (turn.queue) due.push(await queueHousekeepingRead(tx, account.workspace_id, accountId, kind));
        upcomingOf[kind] = turn.nextAt;
      }
    }
    const next = earliest(Object.values(upcomingOf));
    // Every waiting read, not only the new ones: a retry after a lost start starts it now.
    const waiting = await waitingHousekeepingReads(tx, accountId, Object.keys(housekeeping));
    // Judged on the row as it is now: a checkpoint reported since the read above has a
    // back-off still to run, and is kept.
    return commitWith(settleAccountClock(tx, accountId, now, upcomingOf), ([ended]) => {
      const clock: AccountClock = {
        connected: account.status === 'connected',
        checkpointUntil: ended?.checkpoint_until?.toISOString() ?? null,
        nextCheckAt: next?.toISOString() ?? null,
        queuedStepIds: due.map((r) => r.id),
      };
      return { clock, rows: waiting };
    });
  });
  for (const row of rows) await startStep(row);
  return clock;
}
