/**
 * Recurring imports as Temporal Schedules (decision 042): one Schedule per import schedule, id
 * `import-schedule/<id>`, an interval spec, overlap SKIP (a run due while the last one still runs
 * is skipped), a catch-up window, pause and resume. Postgres keeps the row; the next run times are
 * read from the Schedule.
 */
import { ScheduleNotFoundError, ScheduleOverlapPolicy } from '@temporalio/client';
import type { Sql } from '../../db/sql.js';
import { ApiError, notFound } from '../../domain/shared/errors.js';
import { importScheduleIdOf, type ImportSchedule } from '../../domain/sourcing/crm.js';
import {
  deleteImportScheduleRow,
  getImportSchedule,
  importWorkspace,
  insertImportSchedule,
  setImportSchedulePaused,
  type ImportScheduleRow,
} from '../../store/sourcing/schedules.js';
import { importRunWorkflow } from '../../workflows/sourcing/imports.js';
import { WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';
import type { TemporalHandle } from '../deps.js';

export async function createImportSchedule(
  sql: Sql,
  temporal: TemporalHandle,
  caller: { workspaceId: string; memberId: string | null },
  input: { import_id: string; interval_seconds: number; catchup_window_seconds: number; paused: boolean },
): Promise<ImportSchedule> {
  const imp = await importWorkspace(sql, caller.workspaceId, input.import_id);
  if (!imp) throw notFound('Import');
  const row = await insertImportSchedule(sql, {
    workspaceId: caller.workspaceId,
    importId: imp.id,
    intervalSeconds: input.interval_seconds,
    catchupWindowSeconds: input.catchup_window_seconds,
    paused: input.paused,
    createdBy: caller.memberId,
  });
  if (!row) throw new ApiError('conflict', 'This import has a schedule already; change or delete that one.');
  try {
    await temporal.client.schedule.create({
      scheduleId: importScheduleIdOf(row.id),
      spec: { intervals: [{ every: `${row.interval_seconds}s` }] },
      action: {
        type: 'startWorkflow',
        workflowType: importRunWorkflow,
        args: [{ importId: imp.id, workspaceId: caller.workspaceId, trigger: 'schedule' as const }],
        taskQueue: temporal.taskQueue,
        workflowId: `import-run/${imp.id}/scheduled`,
        typedSearchAttributes: [{ key: WorkspaceIdKey, value: caller.workspaceId }],
      },
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: `${row.catchup_window_seconds}s` },
      state: { paused: row.paused, note: row.paused ? 'Created paused' : 'Created' },
      memo: { import: imp.id, table: imp.table_id },
    });
  } catch (error) {
    await deleteImportScheduleRow(sql, row.id);
    throw error;
  }
  return describeImportSchedule(temporal, row);
}

/** The schedule with its next run times as the Temporal Schedule plans them. */
export async function describeImportSchedule(
  temporal: TemporalHandle,
  row: ImportScheduleRow,
): Promise<ImportSchedule> {
  let next: string[] = [];
  let paused = row.paused;
  try {
    const described = await temporal.client.schedule.getHandle(importScheduleIdOf(row.id)).describe();
    paused = described.state.paused;
    next = paused ? [] : described.info.nextActionTimes.slice(0, 5).map((d) => d.toISOString());
  } catch (error) {
    if (!(error instanceof ScheduleNotFoundError)) throw error;
  }
  return {
    id: row.id,
    import_id: row.import_id,
    table_id: row.table_id,
    interval_seconds: row.interval_seconds,
    catchup_window_seconds: row.catchup_window_seconds,
    overlap: 'skip',
    paused,
    next_run_times: next,
    schedule_id: importScheduleIdOf(row.id),
    created_at: row.created_at.toISOString(),
  };
}

export async function pauseImportSchedule(
  sql: Sql,
  temporal: TemporalHandle,
  workspaceId: string,
  id: string,
  paused: boolean,
): Promise<ImportSchedule> {
  const row = await getImportSchedule(sql, workspaceId, id);
  if (!row) throw notFound('Import schedule');
  const handle = temporal.client.schedule.getHandle(importScheduleIdOf(id));
  if (paused) await handle.pause('Paused through the API');
  else await handle.unpause('Resumed through the API');
  await setImportSchedulePaused(sql, id, paused);
  return describeImportSchedule(temporal, { ...row, paused });
}

export async function deleteImportSchedule(
  sql: Sql,
  temporal: TemporalHandle,
  workspaceId: string,
  id: string,
): Promise<boolean> {
  const row = await getImportSchedule(sql, workspaceId, id);
  if (!row) return false;
  try {
    await temporal.client.schedule.getHandle(importScheduleIdOf(id)).delete();
  } catch (error) {
    if (!(error instanceof ScheduleNotFoundError)) throw error;
  }
  await deleteImportScheduleRow(sql, id);
  return true;
}
