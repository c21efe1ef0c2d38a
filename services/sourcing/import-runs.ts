/**
 * An import run's and a write-back's steps, as their workflows (workflows/sourcing/imports.ts) run
 * them through activities/sourcing/crm.ts (decision 042): each chunk reads and lands records with
 * its watermark or cursor moved in the same transaction, calling `beat` as it goes, so a retried
 * chunk adds nothing twice. A refusal no retry fixes throws CrmRefusal (services/sourcing/crm.ts)
 * or CsvUnreadable (services/sourcing/csv-import.ts).
 */
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import { readImport, readWriteBack, startImportRun } from '../../store/sourcing/crm.js';
import { importRunWorkflowId } from '../../workflows/sourcing/imports.contract.js';
import { importCrmChunk, writeBackChunk, type ChunkOutcome } from './crm.js';
import { importCsvChunk } from './csv-import.js';

type SourcingIntegrations = Pick<Integrations, 'sourcing' | 'secretsKeys'>;

/** Records the run as running from the import's watermark; false when the import is gone. */
export async function beginImportRun(
  sql: Sql,
  { importId, runId, trigger }: { importId: string; runId: string; trigger: 'manual' | 'schedule' },
): Promise<boolean> {
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
}

/**
 * One chunk of the run: a CSV address is read whole, a CRM up to `pages` pages of `pageSize`
 * records after the watermark (50 of 200 unless the benchmark raises them). `done` once the
 * import has read everything there is now, or is gone.
 */
export async function importNextChunk(
  sql: Sql,
  integrations: SourcingIntegrations,
  { importId, runId }: { importId: string; runId: string },
  o: { pages?: number | undefined; pageSize?: number | undefined; beat: () => void },
): Promise<ChunkOutcome> {
  const imp = await readImport(sql, importId);
  if (!imp) return { done: true, read: 0 };
  if (imp.source === 'csv_url') return importCsvChunk(sql, integrations, imp, runId);
  return importCrmChunk(sql, integrations, imp, runId, {
    pages: o.pages ?? 50,
    pageSize: o.pageSize ?? 200,
    beat: o.beat,
    readImport: () => readImport(sql, importId),
  });
}

/** Up to 50 batches of a running write-back, and its counts after them; `done` when it is over, or was stopped or gone. */
export async function writeBackNextChunk(
  sql: Sql,
  integrations: SourcingIntegrations,
  { writeBackId }: { writeBackId: string },
  beat: () => void,
): Promise<{ done: boolean; progress: string }> {
  const w = await readWriteBack(sql, writeBackId);
  if (!w || w.status !== 'running') return { done: true, progress: w?.status ?? 'gone' };
  const { done } = await writeBackChunk(sql, integrations, w, {
    batches: 50,
    beat,
    reread: () => readWriteBack(sql, writeBackId),
  });
  const after = await readWriteBack(sql, writeBackId);
  return {
    done,
    progress: `${after?.rows_written ?? 0} written, ${after?.rows_unchanged ?? 0} unchanged, ${after?.rows_failed ?? 0} failed`,
  };
}
