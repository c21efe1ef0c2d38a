/** Starting and waking sequence contact workflows from the API, the inbox's stop path and the pnet steps' settle hook. */
import type { Client } from '@temporalio/client';
import type { FastifyBaseLogger } from 'fastify';
import type { Db } from '../../db/sql.js';
import { sequencesFedBy } from '../../store/sequences/feed.js';
import { contactsOfSteps } from '../../store/sequences/step-wakes.js';
import { sequenceContactWorkflow, sequenceFeedWorkflow } from '../../workflows/sequences/sequence-contact.js';
import {
  sequenceContactWorkflowId,
  sequenceFeedWorkflowId,
  wakeContactSignal,
  type SequenceContactInput,
} from '../../workflows/sequences/sequence-contact.contract.js';
import { ContactIdKey, SequenceIdKey, WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';
import type { TemporalHandle } from '../deps.js';

export interface ContactRef {
  id: string;
  sequence_id: string;
  workspace_id: string;
  /** `<sequence_id>:<row_id>`: also the ContactId of the contact's browser steps, so one filter finds both. */
  contact_key: string;
}

function contactOptions(taskQueue: string, c: ContactRef) {
  const input: SequenceContactInput = { contactId: c.id, sequenceId: c.sequence_id, workspaceId: c.workspace_id };
  return {
    taskQueue,
    workflowId: sequenceContactWorkflowId(c.sequence_id, c.id),
    args: [input] as [SequenceContactInput],
    memo: { wait: null },
    typedSearchAttributes: [
      { key: WorkspaceIdKey, value: c.workspace_id },
      { key: SequenceIdKey, value: c.sequence_id },
      { key: ContactIdKey, value: c.contact_key },
    ],
  };
}

/** Signal-with-start: wakes the contact's workflow, starting it if it is not running (or its start was lost). */
export async function wakeContact(temporal: TemporalHandle, c: ContactRef): Promise<void> {
  await temporal.client.workflow.signalWithStart(sequenceContactWorkflow, {
    ...contactOptions(temporal.taskQueue, c),
    signal: wakeContactSignal,
  });
}

/** Starts the contact's workflow; one already running is left as it is (no signal: it is looking already). */
export async function startContact(temporal: TemporalHandle, c: ContactRef): Promise<void> {
  await temporal.client.workflow.start(sequenceContactWorkflow, {
    ...contactOptions(temporal.taskQueue, c),
    workflowIdConflictPolicy: 'USE_EXISTING',
  });
}

async function eachLimited<T>(items: T[], concurrency: number, work: (item: T) => Promise<void>) {
  let next = 0;
  const run = async () => {
    while (next < items.length) await work(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, run));
}

/** Wakes (starting where needed) many contacts, a bounded number at a time so a bulk action does not flood the server. */
export async function wakeContacts(temporal: TemporalHandle, contacts: ContactRef[], concurrency = 64): Promise<void> {
  await eachLimited(contacts, concurrency, (c) => wakeContact(temporal, c));
}

/** Starts the workflows of newly enrolled contacts (and makes good any start an earlier request lost). */
export async function startContacts(temporal: TemporalHandle, contacts: ContactRef[], concurrency = 64): Promise<void> {
  await eachLimited(contacts, concurrency, (c) => startContact(temporal, c));
}

/**
 * Starts (or wakes) the sequence's audience feed, which reads rows added since it last looked,
 * every `pollSeconds` (SEQUENCE_FEED_POLL_SECONDS, read in integrations/config.ts).
 */
export async function wakeFeed(
  client: Client,
  taskQueue: string,
  sequence: { id: string; workspace_id: string },
  pollSeconds: number,
): Promise<void> {
  await client.workflow.signalWithStart(sequenceFeedWorkflow, {
    taskQueue,
    workflowId: sequenceFeedWorkflowId(sequence.id),
    args: [{ sequenceId: sequence.id, pollSeconds }],
    signal: wakeContactSignal,
    typedSearchAttributes: [
      { key: WorkspaceIdKey, value: sequence.workspace_id },
      { key: SequenceIdKey, value: sequence.id },
    ],
  });
}

/**
 * Rows were added to a table: the feeds of the sequences it feeds look at once instead of at their
 * next poll. A feed that cannot be woken now still reads the rows at that poll.
 */
export async function wakeFeedsOfTable(
  deps: { sql: Db; temporal: TemporalHandle; log: FastifyBaseLogger; feedPollSeconds: number },
  workspaceId: string,
  tableId: string,
  added: number,
): Promise<void> {
  if (added === 0) return;
  const fed = await sequencesFedBy(deps.sql, workspaceId, tableId);
  for (const sequence of fed) {
    await wakeFeed(deps.temporal.client, deps.temporal.taskQueue, sequence, deps.feedPollSeconds).catch(
      (err: unknown) => deps.log.warn({ err, sequenceId: sequence.id }, 'could not wake the sequence feed'),
    );
  }
}

/** The contact workflows to wake: the contact of each step id given (for the pnet settle hook). */
export async function wakeContactsOfSteps(sql: Db, client: Client, stepIds: string[]): Promise<void> {
  if (stepIds.length === 0) return;
  const rows = await contactsOfSteps(sql, stepIds);
  for (const r of rows) {
    await client.workflow
      .getHandle(sequenceContactWorkflowId(r.sequence_id, r.id))
      .signal('wake')
      .catch(() => undefined); // a closed workflow has nothing to wake; the contact re-checks on its own poll
  }
}
