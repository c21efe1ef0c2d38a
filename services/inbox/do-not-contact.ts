/** Do-not-contact additions' follow-up (operationIds addDoNotContact, addDoNotContactBulk). */
import type { FastifyBaseLogger } from 'fastify';
import type { DncBulkResult } from '../../domain/inbox/do-not-contact.js';
import { wakeSequenceContacts, type SequenceStopDeps } from '../sequences/stops.js';

/** Wakes the contacts an addition stops; best effort (sends re-check the list anyway). */
export function wakeForEntries(
  deps: SequenceStopDeps,
  log: Pick<FastifyBaseLogger, 'warn'>,
  workspaceId: string,
  result: DncBulkResult,
) {
  const added = result.results.filter((r) => r.status === 'added' && r.entry).map((r) => r.entry!);
  const emails = added.filter((e) => e.kind === 'email').map((e) => e.value);
  const profileUrls = added.filter((e) => e.kind === 'profile_url').map((e) => e.value);
  // A domain entry names no one contact; its contacts stop at their next send's check.
  if (emails.length + profileUrls.length === 0) return;
  wakeSequenceContacts(deps, workspaceId, { emails, profileUrls }).catch((err: unknown) =>
    log.warn({ err }, 'could not wake sequence contacts'),
  );
}
