/**
 * Activities of import runs and write-backs (workflows/sourcing/imports.ts): doors to
 * services/sourcing/import-runs.ts, heartbeating as the chunks go. A refusal no retry fixes fails
 * the run with its message.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import { CrmRefusal } from '../../services/sourcing/crm.js';
import { CsvUnreadable } from '../../services/sourcing/csv-import.js';
import { beginImportRun, importNextChunk, writeBackNextChunk } from '../../services/sourcing/import-runs.js';
import { finishImportRun, finishWriteBack } from '../../store/sourcing/crm.js';
import { sourcingRefusedFailure } from '../../workflows/sourcing/imports.contract.js';

export interface CrmActivityDeps {
  sql: Sql;
  integrations: Pick<Integrations, 'sourcing' | 'secretsKeys'>;
  /** Pages per import chunk and records per page (the benchmark may raise them). */
  importPages?: number;
  importPageSize?: number;
}

function beat(): void {
  try {
    Context.current().heartbeat();
  } catch {
    // outside an activity (a test calling the function)
  }
}

const refused = (error: unknown): never => {
  if (error instanceof CrmRefusal || error instanceof CsvUnreadable)
    throw ApplicationFailure.nonRetryable(error.message, sourcingRefusedFailure);
  throw error;
};

export function createCrmActivities(deps: CrmActivityDeps) {
  const { sql } = deps;
  return {
    beginImportRun: (run: { importId: string; runId: string; trigger: 'manual' | 'schedule' }) =>
      beginImportRun(sql, run),
    importChunk: (run: { importId: string; runId: string }) =>
      importNextChunk(sql, deps.integrations, run, {
        pages: deps.importPages,
        pageSize: deps.importPageSize,
        beat,
      }).catch(refused),
    endImportRun: ({ runId, status, error }: { runId: string; status: 'succeeded' | 'failed'; error: string | null }) =>
      finishImportRun(sql, runId, status, error),
    writeBackChunkActivity: (writeBack: { writeBackId: string }) =>
      writeBackNextChunk(sql, deps.integrations, writeBack, beat).catch(refused),
    endWriteBack: ({
      writeBackId,
      status,
      error,
    }: {
      writeBackId: string;
      status: 'succeeded' | 'failed';
      error: string | null;
    }) => finishWriteBack(sql, writeBackId, status, error),
  };
}

export type CrmActivities = ReturnType<typeof createCrmActivities>;
