/** The step a person's transition acts on (operationIds cancelStep, approveTask, rejectTask). */
import { ApiError, notFound } from '../../domain/shared/errors.js';
import { terminalStatuses } from '../../domain/pnet/settle.js';
import { findStep, type StepRow } from '../../store/pnet/steps.js';
import type { ServiceDeps } from '../deps.js';

/** The row, or 404 naming `what`; a settled step is refused here without a workflow round trip. */
export async function liveStep(
  { sql }: Pick<ServiceDeps, 'sql'>,
  workspaceId: string,
  id: string,
  what: string,
): Promise<StepRow> {
  const row = await findStep(sql, id, workspaceId);
  if (!row) throw notFound(what);
  if (terminalStatuses.has(row.status)) {
    throw new ApiError('conflict', `The step is already ${row.status}; nothing changed.`);
  }
  return row;
}
