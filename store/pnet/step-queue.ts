/** Queries of browser steps for the person-side routes; transitions go through the workflow. */
import type { Db, Sql } from '../../db/sql.js';
import type { StepQueue, StepStatus, StoredStepStatus } from '../../domain/pnet/steps.js';
import { randomUUID } from 'node:crypto';
import { holdCtes, insufficientCredits } from '../platform/credits.js';
import { stepHold, toBrowserStep, toTask, type StepRow } from './steps.js';

/** The stored statuses a spec status covers: a cancelled step reads as failed. */
const storedFor: Record<StepStatus, StoredStepStatus[]> = {
  queued: ['queued'],
  resuming: ['resuming'],
  claimed: ['claimed'],
  succeeded: ['succeeded'],
  failed: ['failed', 'cancelled'],
  rejected: ['rejected'],
  skipped: ['skipped'],
};

export async function accountRunMode(db: Db, workspaceId: string, accountId: string) {
  const [row] = await db<{ run_mode: 'manual' | 'automatic' }[]>`
    select run_mode from pnet_accounts where id = ${accountId} and workspace_id = ${workspaceId}`;
  return row?.run_mode;
}

/** Records the run a start created (or found), so later Updates name it (migration 022); null forgets it. */
export async function recordStepRun(db: Db, stepId: string, runId: string | null): Promise<void> {
  await db`update browser_steps set workflow_run_id = ${runId} where id = ${stepId} and workflow_run_id is distinct from ${runId}`;
}

/**
 * Manual mode puts a step on the Tasks page first; automatic mode and operator tests queue it,
 * with its price set aside. One auto-committed statement writes the step, its hold, the balance
 * and the ledger (or nothing, when the credits fall short): every queue and settle of a workspace
 * locks its balance row, and a transaction would hold that lock across a round trip to this
 * process and back.
 */
export async function insertStep(
  sql: Sql,
  workspaceId: string,
  input: StepQueue,
  runMode: 'manual' | 'automatic',
): Promise<StepRow> {
  const awaiting = runMode === 'manual' && !input.test;
  const id = randomUUID();
  const hold = awaiting
    ? null
    : stepHold({ id, workspace_id: workspaceId, kind: input.params.kind, credit_round: 0 }, randomUUID());
  const [row] = await sql<StepRow[]>`
    with ${hold ? sql`${holdCtes(sql, hold)},` : sql``} step as (
      insert into browser_steps (id, workspace_id, account_id, kind, params, contact_key, sequence_id, run_before, status, metered, queued_at, held, credit_hold_id)
      select ${id}, ${workspaceId}, ${input.account_id}, ${input.params.kind}, ${sql.json(input.params)}, ${input.contact_key},
        ${input.sequence_id}, ${input.run_before}, ${awaiting ? 'awaiting_approval' : 'queued'}, ${!input.test}, ${awaiting ? null : sql`now()`},
        pnet_step_held(${workspaceId}, ${input.contact_key}, ${input.sequence_id}), ${hold?.id ?? null}::uuid
      ${hold ? sql`where exists (select 1 from created)` : sql``}
      returning *
    )
    select * from step`;
  if (!row) throw await insufficientCredits(sql, workspaceId, hold!.amount);
  return row;
}

export async function listSteps(
  db: Db,
  workspaceId: string,
  q: { status?: StepStatus; kind?: string; account_id?: string; held?: boolean; limit: number; before?: string },
) {
  const rows = await db<StepRow[]>`
    select * from browser_steps
    where workspace_id = ${workspaceId} and status <> 'awaiting_approval'
      ${q.status ? db`and status in ${db(storedFor[q.status])}` : db``}
      ${q.kind ? db`and kind = ${q.kind}` : db``}
      ${q.account_id ? db`and account_id = ${q.account_id}` : db``}
      ${q.held !== undefined ? db`and held = ${q.held}` : db``}
      ${q.before ? db`and created_at < ${q.before}` : db``}
    order by created_at desc, id desc limit ${q.limit + 1}`;
  const page = rows.slice(0, q.limit);
  return {
    steps: page.map(toBrowserStep),
    next_before: rows.length > q.limit ? page[page.length - 1]!.created_at.toISOString() : null,
  };
}

/** The Tasks page: steps waiting for a person, less those a paused sequence or contact holds. */
export async function listTasks(db: Db, workspaceId: string) {
  const rows = await db<StepRow[]>`
    select * from browser_steps where workspace_id = ${workspaceId} and status = 'awaiting_approval' and not held
    order by created_at, id`;
  return rows.map(toTask);
}
