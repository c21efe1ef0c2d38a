/** The sender-account workflow's activity (workflows/pnet/sender-account.ts): a door to services/pnet/tick-sender-account.ts. */
import type { Sql } from '../../db/sql.js';
import type { ActionKind } from '../../domain/pnet/limits.js';
import { tickSenderAccount } from '../../services/pnet/tick-sender-account.js';
import { housekeepingEverySeconds } from '../../store/pnet/sender-account.js';
import type { StepRow } from '../../store/pnet/steps.js';

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
    /** `now` is the workflow's clock. */
    tickSenderAccount: ({ accountId, now }: { accountId: string; now: string }) =>
      tickSenderAccount({ sql, startStep }, { accountId, now: new Date(now), housekeeping }),
  };
}
export type SenderAccountActivities = ReturnType<typeof createSenderAccountActivities>;
