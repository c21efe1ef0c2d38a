/**
 * Pure rules the sequence use cases of services/sequences/ ask before they act: whether a sequence
 * may launch, which enrolled contacts start now, whether its feed enrols new rows, and what a
 * contact's retry does with its pnet step.
 */
import type { StoredStepStatus } from '../pnet/steps.js';
import type { ValidationIssue } from '../shared/common.js';
import type { EnrolResult, Sequence, SequenceContact } from './sequences.js';

/**
 * Launching needs what its steps need: an outbound agent for agent-written steps, a sender for
 * pnet steps. One issue per missing thing and step, in the graph's order, named by the step's
 * place in the body (operationId launchSequence answers them as 422 `issues`).
 */
export function launchIssues(sequence: Sequence, agentId: string | null): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  for (const [i, step] of sequence.graph.steps.entries()) {
    if ((step.type === 'email' || step.type === 'pnet') && step.writer === 'agent' && !agentId) {
      issues.push({
        loc: ['body', `graph.steps.${i}`],
        msg: 'no outbound agent on this sequence (set one before launching an agent-written step)',
        type: 'no_outbound_agent',
        input: step.id,
      });
    }
    if (step.type === 'pnet' && sequence.senders.length === 0) {
      issues.push({
        loc: ['body', `graph.steps.${i}`],
        msg: 'a pnet step needs at least one sender on the sequence',
        type: 'no_sender',
        input: step.id,
      });
    }
  }
  return issues;
}

/**
 * The contacts an enrolment starts: every live one (active, paused or failed) it answered, the
 * already-enrolled ones too, so a start an earlier request lost is made good (a running workflow
 * is left alone). Each contact once, in the order first answered.
 */
export function contactsToStart(
  results: EnrolResult[],
  workspaceId: string,
): (SequenceContact & { workspace_id: string })[] {
  const live = results.flatMap((r) =>
    r.contact && ['active', 'paused', 'failed'].includes(r.contact.status)
      ? [{ ...r.contact, workspace_id: workspaceId }]
      : [],
  );
  return [...new Map(live.map((c) => [c.id, c])).values()];
}

/**
 * Whether the sequence's feed enrols its audience table's new rows now: it has an audience table,
 * feed_new_rows is on, and it is not archived (the same rule as store/sequences/feed.ts
 * sequencesFedBy). A sequence gone feeds nothing.
 */
export function feedsNewRows<S extends { audience_table_id: string | null; feed_new_rows: boolean; status: string }>(
  seq: S | undefined,
): seq is S & { audience_table_id: string } {
  return !!seq && seq.feed_new_rows && !!seq.audience_table_id && seq.status !== 'archived';
}

/**
 * What retrying a failed contact does with the pnet step it failed at:
 * - `retry`: the step failed, so it goes back in line through its own workflow (the retryStep Update);
 * - `release`: the step was cancelled (or is gone), so the contact lets go of it and its next move
 *   queues a fresh one;
 * - `leave`: the step is anything else (a person retried it already, say), and the contact follows it.
 */
export type StepRetry<S> = { kind: 'retry'; step: S } | { kind: 'release' } | { kind: 'leave' };

export function stepRetryOf<S extends { status: StoredStepStatus }>(step: S | undefined): StepRetry<S> {
  if (step?.status === 'failed') return { kind: 'retry', step };
  if (!step || step.status === 'cancelled') return { kind: 'release' };
  return { kind: 'leave' };
}

/**
 * Where migrating a contact to another version puts it (`target`, a step of that version), or why
 * it stays (operationId migrateSequenceContacts' reasons, judged in this order). `graph` is the
 * version's, null when the sequence has no such version.
 */
export function migrationOf(
  contact: { status: string; version: number; current_step_id: string | null },
  graph: { start: string; steps: { id: string }[] } | null,
  toVersion: number,
  atStepId: string | null,
): { target: string } | { reason: string } {
  if (!['active', 'paused', 'failed'].includes(contact.status)) return { reason: `contact_${contact.status}` };
  if (contact.version === toVersion) return { reason: 'already_on_version' };
  if (!graph) return { reason: 'version_not_found' };
  const target = atStepId ?? contact.current_step_id ?? graph.start;
  if (!graph.steps.some((s) => s.id === target)) return { reason: atStepId ? 'step_not_found' : 'step_not_in_version' };
  return { target };
}
