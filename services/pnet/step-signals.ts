/**
 * How a step's workflow hears of the changes the API committed without it
 * (docs/decisions/046-browser-transitions-in-postgres.md): the row's `signal_due_at` is the outbox.
 * The workflow reads and clears it when signalled (readStepChange); the sweeper
 * (workflows/pnet/step-signals.ts) signals again every step whose mark outlived its grace
 * (resendStepSignals). Both run as the workflows' local activities (activities/pnet/steps.ts).
 */
import { terminalStatuses } from '../../domain/pnet/settle.js';
import { nonRetryable } from '../../domain/shared/errors.js';
import {
  findStep,
  iso,
  markSignalsResent,
  overdueClaims,
  stepsWithSignalDue,
  takeStepChange,
  toBrowserStep,
} from '../../store/pnet/steps.js';
import type { ServiceDeps } from '../deps.js';
import { signalStepWorkflow } from './browser-step-client.js';
import { expireClaimAt } from './step-transitions.js';

/**
 * What the step's workflow learns after the API committed a browser's claim, result or release:
 * the row's status and current claim, its `signal_due_at` cleared in the same statement. A settled
 * step carries its record, for the wakes of whatever waits on it (afterStepTransitions in
 * activities/pnet/steps.ts reads `step` and `wakes`).
 */
export async function readStepChange({ sql }: Pick<ServiceDeps, 'sql'>, { stepId }: { stepId: string }) {
  const row = await takeStepChange(sql, stepId);
  if (!row) throw nonRetryable('Step not found.', 'not_found');
  const settled = terminalStatuses.has(row.status);
  return {
    status: row.status,
    claimedAt: row.status === 'claimed' ? iso(row.claimed_at) : null,
    errorCode: row.error_code,
    ...(settled ? { step: toBrowserStep(row) } : {}),
    wakes: settled,
  };
}

/**
 * The sweeper's turn, at the sweeper's clock `at`:
 * - claims whose lease ended more than `graceSeconds` ago are lapsed here, as their own lease
 *   timer would (expireClaimAt), because that timer is late (its worker was down and is
 *   catching up) or was never set (the claim's signal was lost);
 * - then every step's workflow that has not read a change for `graceSeconds` (its signal lost
 *   with its API process, or Temporal unreachable), and every one lapsed here, is signalled on
 *   `temporal.taskQueue`, started if it is not running. Each is marked anew, so a workflow slow
 *   to read is signalled once per grace, not on every turn.
 * Answers how many steps it lapsed or signalled.
 */
export async function resendStepSignals(
  { sql, temporal }: Pick<ServiceDeps, 'sql' | 'temporal'>,
  { graceSeconds, limit, at }: { graceSeconds: number; limit: number; at: Date },
): Promise<number> {
  const lapsed: string[] = [];
  for (const claim of await overdueClaims(sql, at, graceSeconds, limit)) {
    const look = await expireClaimAt(sql, {
      stepId: claim.id,
      claimedAt: claim.claimed_at.toISOString(),
      now: at,
      tell: true,
    });
    if (look.status !== 'claimed') lapsed.push(claim.id);
  }
  const due = await stepsWithSignalDue(sql, graceSeconds, limit);
  const told = new Set(due.map((row) => row.id));
  const rows = [
    ...due,
    ...(await Promise.all(lapsed.filter((id) => !told.has(id)).map((id) => findStep(sql, id)))).filter(
      (row) => row !== undefined,
    ),
  ];
  if (rows.length === 0) return 0;
  await Promise.all(rows.map((row) => signalStepWorkflow(temporal, row)));
  await markSignalsResent(
    sql,
    rows.map((r) => r.id),
  );
  return rows.length;
}
