/**
 * The onboarding checklist of the member asking (operationIds readOnboarding, dismissOnboarding,
 * restoreOnboarding): derived from the workspace's own state (domain/onboarding/checklist.ts), with
 * the member's own dismissal.
 */
import { ApiError } from '../../domain/shared/errors.js';
import { onboardingChecklist } from '../../domain/onboarding/checklist.js';
import {
  dismissOnboarding,
  readOnboardingDismissal,
  readOnboardingFacts,
  restoreOnboarding,
} from '../../store/onboarding/facts.js';
import type { ServiceDeps } from '../deps.js';

/** Whose checklist: the workspace, and the member asking (null for a key that outlived its maker). */
export interface ChecklistReader {
  workspaceId: string;
  memberId: string | null;
}

export async function readChecklist({ sql }: Pick<ServiceDeps, 'sql'>, who: ChecklistReader) {
  const [facts, dismissedAt] = await Promise.all([
    readOnboardingFacts(sql, who.workspaceId),
    readOnboardingDismissal(sql, who.workspaceId, who.memberId),
  ]);
  return onboardingChecklist(facts, dismissedAt);
}

/** Dismissing again changes nothing; others still see the checklist. */
export async function dismissChecklist(deps: Pick<ServiceDeps, 'sql'>, who: ChecklistReader) {
  await dismissOnboarding(deps.sql, who.workspaceId, memberOf(who));
  return readChecklist(deps, who);
}

export async function restoreChecklist(deps: Pick<ServiceDeps, 'sql'>, who: ChecklistReader) {
  await restoreOnboarding(deps.sql, who.workspaceId, memberOf(who));
  return readChecklist(deps, who);
}

/** A dismissal is a member's: a credential that acts for no member is refused (403). */
function memberOf(who: ChecklistReader): string {
  if (!who.memberId)
    throw new ApiError(
      'forbidden',
      'This credential acts for no member (its key outlived the member who made it), so there is no one to dismiss the checklist for.',
    );
  return who.memberId;
}
