/**
 * A sequence's contacts, one function per use case (operationIds enrolSequenceContacts,
 * migrateSequenceContacts, pause/resume/stopSequenceContact, retrySequenceContact, and the
 * `sequence-feed/<sequence_id>` workflow's `feedSequence`). Each writes Postgres first
 * (store/sequences/sequences.ts) and then wakes the contacts concerned: a contact moves in its own
 * workflow (`sequence-contact/<sequence_id>/<contact_id>`), which reads where it stands from
 * Postgres, so a wake that is lost only delays it until its next look.
 */
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { contactsToStart, feedsNewRows, stepRetryOf } from '../../domain/sequences/contact-rules.js';
import type { EnrolResult } from '../../domain/sequences/sequences.js';
import { notFound } from '../../domain/shared/errors.js';
import { findStep } from '../../store/pnet/steps.js';
import { advanceFeedCursor, audienceRowsAfter, readFeed } from '../../store/sequences/feed.js';
import {
  enrolRows,
  getContact,
  getSequence,
  migrateContacts as migrateContactRows,
  releaseCancelledStep,
  retryContact,
  setContactState,
  type ContactRow,
} from '../../store/sequences/sequences.js';
import { retryStepUpdate } from '../../workflows/pnet/browser-step.contract.js';
import type { ServiceDeps } from '../deps.js';
import { updateStep } from '../pnet/browser-step-client.js';
import { startContacts, wakeContact, wakeContacts, type ContactRef } from './sequence-client.js';

type Deps = Pick<ServiceDeps, 'sql' | 'temporal'>;

/**
 * Enrols rows of the audience table, each answered on its own (refusals are answers, not errors),
 * then starts the workflows of the live contacts answered: the already-enrolled ones too, which
 * makes good a start an earlier request lost (a running one is left alone).
 */
export async function enrolContacts(
  { sql, temporal }: Deps,
  workspaceId: string,
  sequenceId: string,
  rowIds: string[],
  senderProfileId: string | null,
): Promise<{ results: EnrolResult[] }> {
  const { results } = await enrolRows(sql, workspaceId, sequenceId, rowIds, senderProfileId);
  await startContacts(temporal, contactsToStart(results, workspaceId));
  return { results };
}

/**
 * Enrols the audience rows added since the feed last read (at most `batch`), and starts their
 * contacts. The cursor moves only after the enrolment, which is idempotent per row, so a
 * retry after a crash enrols nothing twice and still starts every contact.
 */
export async function feedSequence(
  { sql, temporal }: Deps,
  { sequenceId, batch = 500 }: { sequenceId: string; batch?: number },
): Promise<{ feeding: boolean; enrolled: number; more: boolean }> {
  const seq = await readFeed(sql, sequenceId);
  if (!feedsNewRows(seq)) return { feeding: false, enrolled: 0, more: false };
  const rows = await audienceRowsAfter(sql, seq.audience_table_id, seq.feed_cursor, batch);
  if (rows.length === 0) return { feeding: true, enrolled: 0, more: false };
  const { results } = await enrolRows(
    sql,
    seq.workspace_id,
    sequenceId,
    rows.map((r) => r.id),
    null,
  );
  await startContacts(temporal, contactsToStart(results, seq.workspace_id));
  await advanceFeedCursor(sql, sequenceId, rows[rows.length - 1]!.seq);
  return {
    feeding: true,
    enrolled: results.filter((r) => r.status === 'enrolled').length,
    more: rows.length === batch,
  };
}

/** One contact's answer to a migration; `contact` as it stands after (null when not found). */
export interface MigrationResult {
  contact_id: string;
  migrated: boolean;
  reason: string | null;
  contact: ContactRow | null;
}

/**
 * Moves contacts in flight to another version, each answered on its own, in one transaction of a
 * bounded number of statements (a request of a thousand ids is three, not a thousand
 * transactions); once it committed, wakes the ones that moved, so each continues on its new graph
 * now instead of at its next look.
 */
export async function migrateContacts(
  { sql, temporal }: Deps,
  workspaceId: string,
  sequenceId: string,
  input: { contact_ids: string[]; to_version: number; at_step_id: string | null },
): Promise<MigrationResult[]> {
  if (!(await getSequence(sql, workspaceId, sequenceId))) throw notFound('Sequence');
  const answers = await migrateContactRows(
    sql,
    workspaceId,
    sequenceId,
    input.contact_ids,
    input.to_version,
    input.at_step_id,
  );
  const results = answers.map((r, i): MigrationResult => ({ contact_id: input.contact_ids[i]!, ...r }));
  const moved: ContactRef[] = results.filter((r) => r.migrated && r.contact).map((r) => r.contact!);
  await wakeContacts(temporal, moved);
  return results;
}

/**
 * Pauses, resumes or stops a contact (409 from a status it cannot leave), then wakes its workflow
 * so the change takes effect now: a stop ends its waiting messages and cancels its pnet steps.
 * Answers the contact as it stands after.
 */
export async function changeContactState(
  { sql, temporal }: Deps,
  workspaceId: string,
  sequenceId: string,
  contactId: string,
  action: 'pause' | 'resume' | 'stop',
): Promise<ContactRow> {
  const contact = await setContactState(sql, workspaceId, sequenceId, contactId, action);
  await wakeContact(temporal, contact);
  return (await getContact(sql, workspaceId, sequenceId, contactId))!;
}

/**
 * Retries a contact stopped at a failed step (operationId retrySequenceContact). Answers the
 * contact as it stands after.
 */
export async function retrySequenceContact(
  { sql, temporal }: Deps,
  workspaceId: string,
  sequenceId: string,
  contactId: string,
): Promise<ContactRow> {
  // The contact goes back to active first: only a failed one can (409 otherwise, 404 when not
  // found), and nothing else is touched when it is refused.
  const contact = await retryContact(sql, workspaceId, sequenceId, contactId);
  if (contact.browser_step_id) {
    // A pnet step it failed at is dealt with before the contact is woken, so its workflow's
    // next look finds the step already back in line, or the contact free to queue a new one.
    const stepId = contact.browser_step_id;
    const retry = stepRetryOf(await findStep(sql, stepId));
    if (retry.kind === 'retry') {
      // Through the step's own workflow, as a person's retry is (decision 002): the update id
      // names the step and its credit round, so a repeated request is the same Update. A refusal
      // means the step moved meanwhile (retried, cancelled), and the contact follows it.
      const { step } = retry;
      await updateStep(
        { ...temporal, sql },
        step,
        retryStepUpdate,
        `contact-retry:${step.id}:${step.credit_round}`,
        [],
      ).catch((error: unknown) => {
        if (!(error instanceof WorkflowUpdateFailedError)) throw error;
      });
    } else if (retry.kind === 'release') {
      // A cancelled (or vanished) step cannot run again: the contact lets go of it, and its next
      // move queues a new one.
      await releaseCancelledStep(sql, contact.id, stepId);
    }
  }
  // The contact's workflow waits on its failed step; woken, it reads the step and goes on.
  await wakeContact(temporal, contact);
  return (await getContact(sql, workspaceId, sequenceId, contactId))!;
}
