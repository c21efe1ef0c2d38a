import { commitWith, transaction, type Sql } from '../../db/sql.js';
import type { ActionKind } from '../../domain/pnet/limits.js';
import {
  housekeepingEverySeconds,
  failingInboxRetrySeconds,
  lastHousekeepingRead,
  queueHousekeepingRead,
  readAccountForTick,
  settleAccountClock,
  takeAccountTickTurn,
  waitingHousekeepingReads,
} from '../../store/pnet/sender-account.js';
import type { StepRow } from '../../store/pnet/steps.js';
import type { AccountClock } from '../../domain/pnet/accounts.js';

export function createSenderAccountActivities({
  sql,
  startStep,
  housekeeping = housekeepingEverySeconds,
}: {
  sql: Sql;
  startStep: (row: StepRow) => Promise<void>;
  /** The reads the account schedules and how often (tests that drive the line by hand pass none). */
  housekeeping?: Partial<Record<ActionKind, number>>;
}) {
  return {
    /**
     * Ends a back-off that has run out, queues the reads that are due (one waiting read of a kind
     * at most), and starts the waiting reads' step workflows (a running one is left as it is), so
     * a retry after a lost start makes it good.
     */
    async tickSenderAccount({ accountId, now: nowIso }: { accountId: string; now: string }): Promise<AccountClock> {
      // The workflow's clock, not the database's: they agree in service, and a time-skipping test
      // moves only the workflow's.
      const now = new Date(nowIso);
      // The account's row is locked only by the last statement, sent with the COMMIT: check-ins
      // and claims lock the same row, and a tick's reads are several round trips. Ticks of one
      // account (a retry beside an attempt thought lost) take turns on an advisory lock instead.
      const { clock, rows } = await transaction(sql, async (tx) => {
        await takeAccountTickTurn(tx, accountId);
        const account = await readAccountForTick(tx, accountId);
        if (!account)
          return { clock: { connected: false, checkpointUntil: null, nextCheckAt: null, queuedStepIds: [] }, rows: [] };
        const connected = account.status === 'connected';
        const backOffOver = account.checkpoint_until !== null && account.checkpoint_until <= now;
        const due: StepRow[] = [];
        const upcomingOf: Partial<Record<ActionKind, Date>> = {};
        if (
          connected &&
          (account.checkpoint_status === 'ok' || (account.checkpoint_status === 'checkpoint' && backOffOver))
        ) {
          for (const [kind, usual] of Object.entries(housekeeping) as [ActionKind, number][]) {
            const every =
              kind === 'check_inbox' && account.replies_failing ? Math.min(usual, failingInboxRetrySeconds) : usual;
            const last = await lastHousekeepingRead(tx, accountId, kind);
            const dueAt = last?.last_at ? new Date(last.last_at.getTime() + every * 1000) : new Date(0);
            if (!last?.waiting && dueAt <= now) {
              due.push(await queueHousekeepingRead(tx, account.workspace_id, accountId, kind));
            }
            upcomingOf[kind] = last?.waiting || dueAt <= now ? new Date(now.getTime() + every * 1000) : dueAt;
          }
        }
        const next = Object.values(upcomingOf).reduce<Date | null>((a, b) => (a && a <= b ? a : b), null);
        // Every waiting read, not only the new ones: a retry after a lost start starts it now.
        const waiting = await waitingHousekeepingReads(tx, accountId, Object.keys(housekeeping));
        // Judged on the row as it is now: a checkpoint reported since the read above has a
        // back-off still to run, and is kept.
        return commitWith(settleAccountClock(tx, accountId, now, upcomingOf), ([ended]) => {
          const clock: AccountClock = {
            connected,
            checkpointUntil: ended?.checkpoint_until?.toISOString() ?? null,
            nextCheckAt: next?.toISOString() ?? null,
            queuedStepIds: due.map((r) => r.id),
          };
          return { clock, rows: waiting };
        });
      });
      for (const row of rows) await startStep(row);
      return clock;
    },
  };
}
export type SenderAccountActivities = ReturnType<typeof createSenderAccountActivities>;
