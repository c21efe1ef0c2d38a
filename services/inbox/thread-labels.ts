/** Putting a label on an inbox thread or taking it off (operationIds addInboxThreadLabel, removeInboxThreadLabel). */
import type { Db } from '../../db/sql.js';
import { notFound } from '../../domain/shared/errors.js';
import { getLabel, labelThread } from '../../store/inbox/labels.js';
import { findThread, toThread } from '../../store/inbox/threads.js';

/** The thread with the label on (`on`) or off; either again is harmless. A thread or label of another workspace is 404. */
export async function setThreadLabel(db: Db, workspaceId: string, threadId: string, labelId: string, on: boolean) {
  if (!(await findThread(db, workspaceId, threadId))) throw notFound('Thread');
  if (!(await getLabel(db, workspaceId, labelId))) throw notFound('Label');
  await labelThread(db, threadId, labelId, on);
  return toThread((await findThread(db, workspaceId, threadId))!);
}
