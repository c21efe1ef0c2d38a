/**
 * What a browser says about the step it is running, besides its result: leave to commit (the
 * point of no return), attempts cut off or given back, and waits inside the page. None of these
 * changes the step's status, so they are guarded SQL, not workflow transitions.
 */
import type { Sql } from '../../db/sql.js';
import { sendingStopped } from './agent-sending.js';
import type { StepRow } from './steps.js';
import { ApiError } from '../../domain/shared/errors.js';
import { messageKinds } from '../../domain/pnet/limits.js';

/**
 * Grants leave to press the irreversible button, only while the claim is current and nothing has
 * stopped the step since it was handed out (a paused contact or sequence, paused sending, a failing
 * inbox read). A second ask under the same claim answers the same grant.
 */
export async function grantCommit(sql: Sql, stepId: string, claimedAt: string): Promise<{ commit_granted_at: string }> {
  return sql.begin(async (tx) => {
    const [step] = await tx<(StepRow & { replies_failing: boolean })[]>`
      select s.*, a.replies_failing from browser_steps s join pnet_accounts a on a.id = s.account_id
      where s.id = ${stepId} and s.status = 'claimed' and s.claimed_at = ${claimedAt} for update of s`;
    if (!step)
      throw new ApiError('conflict', 'The step is no longer claimed under that claim; stop it without acting.');
    if (step.commit_granted_at) return { commit_granted_at: step.commit_granted_at.toISOString() };
    if (step.held)
      throw new ApiError(
        'conflict',
        'The contact or sequence was paused; release the step (`reopen_paused`) without acting.',
      );
    if (step.metered && (await sendingStopped(tx, step.workspace_id)))
      throw new ApiError('conflict', 'Unattended sending was paused; release the step without acting.');
    if (step.replies_failing && messageKinds.has(step.kind))
      throw new ApiError(
        'conflict',
        'The inbox read is failing and a reply may be unseen; release the step without acting.',
      );
    const [granted] = await tx<{ commit_granted_at: Date }[]>`
      update browser_steps set commit_granted_at = date_trunc('milliseconds', now()), updated_at = now()
      where id = ${stepId} returning commit_granted_at`;
    return { commit_granted_at: granted!.commit_granted_at.toISOString() };
  });
}

interface AttemptRow {
  claimed_at: Date;
  reason: 'cut_off' | 'verified_absent' | 'reopen_paused';
  detail: string | null;
  created_at: Date;
}
const toAttempt = (r: AttemptRow) => ({
  ...r,
  claimed_at: r.claimed_at.toISOString(),
  created_at: r.created_at.toISOString(),
});

/** Records an attempt (once per claim and reason); it never counts against the step. */
export async function recordAttempt(
  sql: Sql,
  stepId: string,
  attempt: { claimed_at: string; reason: AttemptRow['reason']; detail: string | null },
) {
  await sql`
    insert into pnet_step_attempts (step_id, claimed_at, reason, detail)
    values (${stepId}, ${attempt.claimed_at}, ${attempt.reason}, ${attempt.detail}) on conflict do nothing`;
  const [row] = await sql<AttemptRow[]>`
    select claimed_at, reason, detail, created_at from pnet_step_attempts
    where step_id = ${stepId} and claimed_at = ${attempt.claimed_at} and reason = ${attempt.reason}`;
  return toAttempt(row!);
}

export async function listAttempts(sql: Sql, stepId: string) {
  const rows = await sql<AttemptRow[]>`
    select claimed_at, reason, detail, created_at from pnet_step_attempts where step_id = ${stepId} order by id`;
  return rows.map(toAttempt);
}

/** Keeps the latest wait of the running step for the operator; `lost` when the claim is not current. */
export async function recordRunningWait(
  sql: Sql,
  stepId: string,
  wait: {
    claimed_at: string | null;
    site: string;
    awake_seconds: number;
    tab_discarded: boolean | null;
    tab_frozen: boolean | null;
    tab_status: string | null;
  },
): Promise<{ claimedAt: string | null }> {
  const { claimed_at: claimedAt, ...report } = wait;
  const [row] = await sql<{ claimed_at: Date }[]>`
    update browser_steps set running_wait = ${sql.json({ ...report, reported_at: new Date().toISOString() })}, lease_renewed_at = now()
    where id = ${stepId} and status = 'claimed' ${claimedAt ? sql`and claimed_at = ${claimedAt}` : sql``}
    returning claimed_at`;
  return { claimedAt: row ? row.claimed_at.toISOString() : null };
}
