/** Imports and write-backs from the API (decision 042): check, record, start their workflows. */
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { randomUUID } from 'node:crypto';
import type { Sql } from '../../db/sql.js';
import { ApiError, notFound, ValidationRefusal } from '../../domain/shared/errors.js';
import type { ImportCreate, WriteBackCreate } from '../../domain/sourcing/crm.js';
import { pageUrl } from '../../integrations/web/web-page.js';
import {
  getCrmConnection,
  insertImport,
  insertWriteBack,
  type ImportRow,
  type WriteBackRow,
} from '../../store/sourcing/crm.js';
import { ensureInputColumns } from '../../store/sourcing/landing.js';
import { requireTable } from '../../store/tables/tables.js';
import { loadColumns } from '../../store/tables/columns.js';
import { importRunWorkflow, writeBackWorkflow } from '../../workflows/sourcing/imports.js';
import {
  importRunWorkflowId,
  writeBackWorkflowId,
  type ImportRunInput,
} from '../../workflows/sourcing/imports.contract.js';
import { WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';
import { importColumns } from './crm.js';
import type { TemporalHandle } from '../deps.js';

type Caller = { workspaceId: string; memberId: string | null };

export async function createImport(
  sql: Sql,
  temporal: TemporalHandle,
  caller: Caller,
  tableId: string,
  input: ImportCreate,
): Promise<{ imp: ImportRow; runId: string | null }> {
  await requireTable(sql, caller.workspaceId, tableId);
  if (input.source === 'crm' && !(await getCrmConnection(sql, caller.workspaceId, input.connection_id)))
    throw notFound('CRM connection');
  if (input.source === 'csv_url') {
    try {
      pageUrl(input.csv_url);
    } catch (error) {
      throw new ValidationRefusal([
        { loc: ['body', 'csv_url'], msg: (error as Error).message, type: 'value_error', input: input.csv_url },
      ]);
    }
  }
  const imp = await sql.begin<ImportRow>(async (tx) => {
    await requireTable(tx, caller.workspaceId, tableId, 'share');
    const inserted = await insertImport(tx, {
      workspace_id: caller.workspaceId,
      table_id: tableId,
      name: input.name,
      source: input.source,
      connection_id: input.source === 'crm' ? input.connection_id : null,
      object_type: input.source === 'crm' ? input.object_type : null,
      list_id: input.source === 'crm' ? (input.list_id ?? null) : null,
      filters: input.source === 'crm' ? input.filters : [],
      csv_url: input.source === 'csv_url' ? pageUrl(input.csv_url).href : null,
      mapping: input.mapping,
      key_field: input.key_field,
      createdBy: caller.memberId,
    });
    await importColumns(tx, inserted);
    return inserted;
  });
  const runId = input.run_now ? await startImportRun(temporal, imp) : null;
  return { imp, runId };
}

/** Starts a manual run of the import; answers its run id. */
export async function startImportRun(
  temporal: TemporalHandle,
  imp: { id: string; workspace_id: string },
): Promise<string> {
  const runId = randomUUID();
  const input: ImportRunInput = { importId: imp.id, workspaceId: imp.workspace_id, trigger: 'manual', runId };
  await temporal.client.workflow.start(importRunWorkflow, {
    taskQueue: temporal.taskQueue,
    workflowId: importRunWorkflowId(imp.id, runId),
    args: [input],
    typedSearchAttributes: [{ key: WorkspaceIdKey, value: imp.workspace_id }],
  });
  return runId;
}

export async function createWriteBack(
  sql: Sql,
  temporal: TemporalHandle,
  caller: Caller,
  tableId: string,
  input: WriteBackCreate,
): Promise<WriteBackRow> {
  await requireTable(sql, caller.workspaceId, tableId);
  if (!(await getCrmConnection(sql, caller.workspaceId, input.connection_id))) throw notFound('CRM connection');
  const columns = await loadColumns(sql, tableId);
  const issues = input.mapping.flatMap((m, i) =>
    columns.byId.has(m.column_id.toLowerCase())
      ? []
      : [
          {
            loc: ['body', `mapping.${i}.column_id`],
            msg: 'the table has no such column',
            type: 'value_error',
            input: m.column_id,
          },
        ],
  );
  if (issues.length) throw new ValidationRefusal(issues);
  if (!input.mapping.some((m) => m.property.toLowerCase() === input.id_property.toLowerCase())) {
    throw new ValidationRefusal([
      {
        loc: ['body', 'id_property'],
        msg: 'the mapping must write the id property',
        type: 'value_error',
        input: input.id_property,
      },
    ]);
  }
  const w = await sql.begin<WriteBackRow>(async (tx) => {
    const resultColumnId = input.result_column_name
      ? (await ensureInputColumns(tx, caller.workspaceId, tableId, [input.result_column_name]))[
          input.result_column_name
        ]!
      : null;
    if (resultColumnId && input.mapping.some((m) => m.column_id.toLowerCase() === resultColumnId))
      throw new ApiError('conflict', 'The result column cannot also be written to the CRM.');
    return insertWriteBack(tx, {
      workspaceId: caller.workspaceId,
      tableId,
      connectionId: input.connection_id,
      objectType: input.object_type,
      idProperty: input.id_property,
      mapping: input.mapping.map((m) => ({ column_id: m.column_id.toLowerCase(), property: m.property })),
      rowIds: input.row_ids ?? null,
      resultColumnId,
      createdBy: caller.memberId,
    });
  });
  try {
    await temporal.client.workflow.start(writeBackWorkflow, {
      taskQueue: temporal.taskQueue,
      workflowId: writeBackWorkflowId(w.id),
      args: [{ writeBackId: w.id, workspaceId: caller.workspaceId }],
      typedSearchAttributes: [{ key: WorkspaceIdKey, value: caller.workspaceId }],
    });
  } catch (error) {
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
  }
  return w;
}
