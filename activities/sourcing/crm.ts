/**
 * Activities of import runs and write-backs (workflows/sourcing/imports.ts): each chunk reads and
 * lands records with its watermark or cursor moved in the same transaction, heartbeating as it goes.
 */
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import { CrmRefusal, importCrmChunk, writeBackChunk } from '../../services/sourcing/crm.js';
import { CsvUnreadable, importCsvChunk } from '../../services/sourcing/csv-import.js';
import {
  finishImportRun,
  finishWriteBack,
  readImport,
  readWriteBack,
  startImportRun,
} from '../../store/sourcing/crm.js';
import { importRunWorkflowId, sourcingRefusedFailure } from '../../workflows/sourcing/imports.contract.js';

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
    async beginImportRun({
      importId,
      runId,
      trigger,
    }: {
      importId: string;
      runId: string;
      trigger: 'manual' | 'schedule';
    }): Promise<boolean> {
      const imp = await readImport(sql, importId);
      if (!imp) return false;
      await startImportRun(sql, {
        id: runId,
        workspaceId: imp.workspace_id,
        importId,
        trigger,
        workflowId: importRunWorkflowId(importId, runId),
        watermark: imp.watermark,
      });
      return true;
    },

    async importChunk({
      importId,
      runId,
    }: {
      importId: string;
      runId: string;
    }): Promise<{ done: boolean; read: number }> {
      const imp = await readImport(sql, importId);
      if (!imp) return { done: true, read: 0 };
      try {
        if (imp.source === 'csv_url') return await importCsvChunk(sql, deps.integrations, imp, runId);
        return await importCrmChunk(sql, deps.integrations, imp, runId, {
          pages: deps.importPages ?? 50,
          pageSize: deps.importPageSize ?? 200,
          beat,
          readImport: () => readImport(sql, importId),
        });
      } catch (error) {
        return refused(error);
      }
    },

    async endImportRun({
      runId,
      status,
      error,
    }: {
      runId: string;
      status: 'succeeded' | 'failed';
      error: string | null;
    }): Promise<void> {
      await finishImportRun(sql, runId, status, error);
    },

    async writeBackChunkActivity({
      writeBackId,
    }: {
      writeBackId: string;
    }): Promise<{ done: boolean; progress: string }> {
      const w = await readWriteBack(sql, writeBackId);
      if (!w || w.status !== 'running') return { done: true, progress: w?.status ?? 'gone' };
      try {
        const { done } = await writeBackChunk(sql, deps.integrations, w, {
          batches: 50,
          beat,
          reread: () => readWriteBack(sql, writeBackId),
        });
        const after = await readWriteBack(sql, writeBackId);
        return {
          done,
          progress: `${after?.rows_written ?? 0} written, ${after?.rows_unchanged ?? 0} unchanged, ${after?.rows_failed ?? 0} failed`,
        };
      } catch (error) {
        return refused(error);
      }
    },

    async endWriteBack({
      writeBackId,
      status,
      error,
    }: {
      writeBackId: string;
      status: 'succeeded' | 'failed';
      error: string | null;
    }): Promise<void> {
      await finishWriteBack(sql, writeBackId, status, error);
    },
  };
}

export type CrmActivities = ReturnType<typeof createCrmActivities>;
