/**
 * The approval queue's decisions, one function per use case (operationIds approveSequenceMessage,
 * rejectSequenceMessage). Each is a compare-and-set on the waiting message
 * (store/sequences/sequences.ts decideApproval), then a wake of the contact that waits on it, so
 * it goes on now instead of at its next look.
 */
import type { Approval } from '../../domain/sequences/sequences.js';
import { ApiError } from '../../domain/shared/errors.js';
import { decideApproval, findContactKeyRow, setContactState } from '../../store/sequences/sequences.js';
import type { ServiceDeps } from '../deps.js';
import { wakeContact } from './sequence-client.js';

type Deps = Pick<ServiceDeps, 'sql' | 'temporal'>;

/** Wakes the workflow of the contact a message belongs to; a contact that is gone has none to wake. */
async function wakeOwner({ sql, temporal }: Deps, contactId: string) {
  const contact = await findContactKeyRow(sql, contactId);
  if (contact) await wakeContact(temporal, contact);
}

/**
 * Approves a message, edited first when `edits` says so (409 once decided). It goes out on the
 * contact's schedule, and the send still checks do-not-contact, replies, the cooldown and other
 * sequences at the last moment.
 */
export async function approveMessage(
  deps: Deps,
  workspaceId: string,
  approvalId: string,
  memberId: string | null,
  edits: { subject?: string | null | undefined; body?: string | undefined },
): Promise<Approval> {
  const approval = await decideApproval(deps.sql, workspaceId, approvalId, memberId, {
    approve: true,
    subject: edits.subject,
    body: edits.body,
  });
  await wakeOwner(deps, approval.contact_id);
  return approval;
}

/**
 * Rejects a message (409 once decided): the contact moves on without it, or stops for good with
 * `stopContact`.
 */
export async function rejectMessage(
  deps: Deps,
  workspaceId: string,
  approvalId: string,
  memberId: string | null,
  input: { reason: string | null; stopContact: boolean },
): Promise<Approval> {
  const approval = await decideApproval(deps.sql, workspaceId, approvalId, memberId, {
    approve: false,
    reason: input.reason,
  });
  if (input.stopContact) {
    // A contact already stopped or finished cannot be stopped (409): the rejection stands all the same.
    await setContactState(deps.sql, workspaceId, approval.sequence_id, approval.contact_id, 'stop').catch(
      (error: unknown) => {
        if (!(error instanceof ApiError && error.code === 'conflict')) throw error;
      },
    );
  }
  await wakeOwner(deps, approval.contact_id);
  return approval;
}
