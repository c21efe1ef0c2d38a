/**
 * A sequence's own life, one function per use case (operationIds createSequence, updateSequence,
 * launch/pause/resume/archiveSequence). Each writes Postgres first (store/sequences/sequences.ts)
 * and then wakes what follows the sequence: its audience feed (`sequence-feed/<sequence_id>`) or
 * its live contacts (`sequence-contact/<sequence_id>/<contact_id>`).
 */
import { launchIssues } from '../../domain/sequences/contact-rules.js';
import type { Sequence, SequenceCreate, SequenceUpdate } from '../../domain/sequences/sequences.js';
import { notFound, ValidationRefusal } from '../../domain/shared/errors.js';
import {
  createSequence as insertSequence,
  getSequence,
  liveContactsOf,
  outboundAgentOf,
  transitionSequence as transitionSequenceRow,
  updateSequence as updateSequenceRow,
  type SequenceTransition,
} from '../../store/sequences/sequences.js';
import type { ServiceDeps } from '../deps.js';
import { wakeContacts, wakeFeed } from './sequence-client.js';

type FeedDeps = Pick<ServiceDeps, 'sql' | 'temporal' | 'integrations'>;

/**
 * With `feed_new_rows` on, the sequence's feed is started (or woken) so rows added to the
 * audience table are enrolled as they arrive, every SEQUENCE_FEED_POLL_SECONDS.
 */
async function followFeed({ temporal, integrations }: FeedDeps, sequence: Sequence, workspaceId: string) {
  if (!sequence.feed_new_rows) return;
  await wakeFeed(
    temporal.client,
    temporal.taskQueue,
    { id: sequence.id, workspace_id: workspaceId },
    integrations.sequenceFeedPollSeconds,
  );
}

/** Creates a draft sequence, then starts its feed when it has one. */
export async function createSequence(deps: FeedDeps, workspaceId: string, input: SequenceCreate): Promise<Sequence> {
  // A graph that cannot run is refused by the store with 422 `issues` naming the step.
  const sequence = await insertSequence(deps.sql, workspaceId, input);
  await followFeed(deps, sequence, workspaceId);
  return sequence;
}

/**
 * Edits a sequence (a new graph on a sequence with contacts is a new version; a stale
 * `expected_revision` is 409), then starts or wakes its feed when it has one.
 */
export async function updateSequence(
  deps: FeedDeps,
  workspaceId: string,
  sequenceId: string,
  input: SequenceUpdate,
): Promise<Sequence> {
  const sequence = await updateSequenceRow(deps.sql, workspaceId, sequenceId, input);
  await followFeed(deps, sequence, workspaceId);
  return sequence;
}

/**
 * Launches, pauses, resumes or archives a sequence (a compare-and-set on its revision and status),
 * then wakes its live contacts so each sees the change now.
 */
export async function transitionSequence(
  { sql, temporal }: Pick<ServiceDeps, 'sql' | 'temporal'>,
  workspaceId: string,
  sequenceId: string,
  action: SequenceTransition,
  expectedRevision: number,
): Promise<Sequence> {
  if (action === 'launch') {
    // Launching needs what its steps need (domain/sequences/contact-rules.ts): refused with 422
    // `issues` before anything changes.
    const current = await getSequence(sql, workspaceId, sequenceId);
    if (!current) throw notFound('Sequence');
    const issues = launchIssues(current, await outboundAgentOf(sql, sequenceId));
    if (issues.length > 0) throw new ValidationRefusal(issues);
  }
  const sequence = await transitionSequenceRow(sql, workspaceId, sequenceId, action, expectedRevision);
  const contacts = await liveContactsOf(sql, sequence.id);
  // A pause needs no wake: each contact sees it at its next look, and its pnet steps are held already.
  if (action !== 'pause') await wakeContacts(temporal, contacts);
  return sequence;
}
