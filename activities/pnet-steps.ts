/**
 * Browser steps in Postgres: every transition is one guarded UPDATE (compare-and-set on status),
 * so a retried activity or a second writer changes nothing. Refusals are non-retryable
 * ApplicationFailures typed from the error table, which the API maps to 409.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { Db, Sql } from '../db/sql.js';
import type { ActionKind, BrowserStep, StepErrorCode, StoredStepStatus } from '../domain/pnet.js';
import { recordStatus } from '../domain/pnet.js';

export interface StepRow {
  id: string;
  workspace_id: string;
  account_id: string;
  kind: ActionKind;
  params: Record<string, unknown>;
  contact_key: string | null;
  status: StoredStepStatus;
  metered: boolean;
  held: boolean;
  reject_reason: string | null;
  created_at: Date;
  queued_at: Date | null;
  claimed_at: Date | null;
  finished_at: Date | null;
  duration_ms: number | null;
  error_code: StepErrorCode | null;
  error_message: string | null;
  outcome: Record<string, unknown> | null;
  acted_at: Date | null;
}

export const terminalStatuses: ReadonlySet<StoredStepStatus> = new Set(['succeeded', 'failed', 'rejected', 'skipped', 'cancelled']);

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** The 2.2 record of a step that has left the Tasks page. */
export function toBrowserStep(row: StepRow): BrowserStep {
  if (row.status === 'awaiting_approval') throw new Error(`step ${row.id} is a task awaiting approval, not a step record`);
  return {
    id: row.id,
    account_id: row.account_id,
    kind: row.kind,
    params: row.params,
    status: recordStatus(row.status),
    contact_key: row.contact_key,
    queued_at: iso(row.queued_at),
    claimed_at: iso(row.claimed_at),
    finished_at: iso(row.finished_at),
    duration_ms: row.duration_ms,
    error_code: row.error_code,
    error_message: row.error_message,
    outcome: row.outcome,
    acted_at: iso(row.acted_at),
    approved_at: iso(row.queued_at),
    held: row.held,
    hold: null,
    metered: row.metered,
    requires_approval: false,
  };
}

export function toTask(row: StepRow) {
  return {
    id: row.id,
    account_id: row.account_id,
    kind: row.kind,
    params: row.params,
    contact_key: row.contact_key,
    created_at: row.created_at.toISOString(),
    held: row.held,
  };
}

export async function findStep(db: Db, id: string, workspaceId?: string): Promise<StepRow | undefined> {
  const [row] = await db<StepRow[]>`
    select * from browser_steps where id = ${id} ${workspaceId ? db`and workspace_id = ${workspaceId}` : db``}`;
  return row;
}

function refusal(row: StepRow | undefined, wanted: string): ApplicationFailure {
  if (!row) return ApplicationFailure.nonRetryable('Step not found.', 'not_found');
  const shown = row.status === 'awaiting_approval' ? 'awaiting approval' : row.status;
  return ApplicationFailure.nonRetryable(`The step is ${shown}; it can be ${wanted} only ${wantedFrom[wanted]}.`, 'conflict');
}

const wantedFrom: Record<string, string> = {
  approved: 'while it awaits approval',
  rejected: 'while it awaits approval',
  cancelled: 'before a browser claims it',
};

/** The record after a transition: a step record, or the task it still is. */
export type StepTransitionResult = { step: BrowserStep };

async function transition(
  sql: Sql,
  stepId: string,
  wanted: keyof typeof wantedFrom,
  run: (tx: Db) => Promise<StepRow[]>,
): Promise<StepTransitionResult> {
  const [row] = await run(sql);
  if (row) return { step: toBrowserStep(row) };
  throw refusal(await findStep(sql, stepId), wanted);
}

export function createPnetStepActivities({ sql }: { sql: Sql }) {
  return {
    async approveStep({ stepId }: { stepId: string }) {
      return transition(sql, stepId, 'approved', (db) => db<StepRow[]>`
        update browser_steps set status = 'queued', queued_at = now(), updated_at = now()
        where id = ${stepId} and status = 'awaiting_approval' returning *`);
    },
    async rejectStep({ stepId, reason }: { stepId: string; reason: string | null }) {
      return transition(sql, stepId, 'rejected', (db) => db<StepRow[]>`
        update browser_steps set status = 'rejected', reject_reason = ${reason}, error_message = ${reason},
          finished_at = now(), updated_at = now()
        where id = ${stepId} and status = 'awaiting_approval' returning *`);
    },
    /** A running step is the browser's until it reports: only a waiting step can be cancelled. */
    async cancelStep({ stepId }: { stepId: string }) {
      return transition(sql, stepId, 'cancelled', (db) => db<StepRow[]>`
        update browser_steps set status = 'cancelled', error_code = 'cancelled', finished_at = now(), updated_at = now()
        where id = ${stepId} and status in ('awaiting_approval', 'queued', 'resuming') returning *`);
    },
  };
}
export type PnetStepActivities = ReturnType<typeof createPnetStepActivities>;
