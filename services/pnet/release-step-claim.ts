/**
 * A browser gives its claim back: the whole use case of the release route (operationId
 * `releaseStepClaim`, `POST /pnet/agent/actions/{action_id}/release/` in
 * api/routes/pnet/agent.ts), told in order. Committed and answered by the API, the workflow told
 * afterwards (docs/decisions/046-browser-transitions-in-postgres.md).
 */
import type { FastifyBaseLogger } from 'fastify';
import { ApiError } from '../../domain/shared/errors.js';
import type { BrowserStep } from '../../domain/pnet/steps.js';
import type { ServiceDeps } from '../deps.js';
import { tellAfterCommit } from './browser-step-client.js';
import { accountStep, releaseClaim } from './step-transitions.js';

/**
 * Puts the claimed step `stepId` back in line for the calling browser (`verified_absent`: it
 * looked and the action is not done; `reopen_paused`: the page it needs is paused). A step of
 * another account is 404; one not claimed, or claimed under another claim, 409.
 */
export async function releaseStepClaim(
  deps: Pick<ServiceDeps, 'sql' | 'temporal'>,
  {
    stepId,
    browser,
    claimedAt,
    reason,
  }: {
    stepId: string;
    browser: { workspaceId: string; accountId: string | null };
    claimedAt: string;
    reason: 'verified_absent' | 'reopen_paused';
  },
  log: Pick<FastifyBaseLogger, 'info' | 'warn'>,
): Promise<BrowserStep> {
  // 1. Check: the browser's own account's step, and claimed (read before the transaction, which
  //    is guarded by the claim itself).
  const step = await accountStep(deps.sql, browser, stepId);
  if (step.status !== 'claimed')
    throw new ApiError('conflict', `The step is ${step.status}; only a claimed step can be released.`);
  log.info({ stepId: step.id, reason }, 'claim released');

  // 2. The transaction: the step back in line and its usage unit returned; it counts for nothing.
  const result = await releaseClaim(deps.sql, { stepId: step.id, claimedAt });

  // 3. After the commit: the step's workflow ends its lease timer; not awaited, the sweeper's if lost.
  tellAfterCommit(deps, step, log);
  return result.step;
}
