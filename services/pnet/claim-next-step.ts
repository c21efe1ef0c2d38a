/**
 * A browser asks for its account's next step: the whole use case of the claim route (operationId
 * `agentClaim`, `POST /pnet/agent/claim/` in api/routes/pnet/agent.ts), told in order. Like the
 * result (services/pnet/report-step-result.ts), the claim is a guarded SQL transaction the API
 * commits and answers itself; the step's workflow, which owns the lease timer, hears of it after
 * the commit (docs/decisions/046-browser-transitions-in-postgres.md).
 */
import type { FastifyBaseLogger } from 'fastify';
import type { z } from 'zod';
import type { AgentClaimResponseSchema } from '../../domain/pnet/agent.js';
import { toBrowserStep } from '../../store/pnet/steps.js';
import type { ServiceDeps } from '../deps.js';
import { tellAfterCommit } from './browser-step-client.js';
import { claimStep, pickClaim } from './step-transitions.js';

/** The claim route's answer (AgentClaimResponseSchema). */
export type ClaimAnswer = z.infer<typeof AgentClaimResponseSchema>;

/**
 * Hands the calling browser the next step of `accountId` that may run now, gives it back its own
 * running claim, or says why nothing waits. `faults` are the chaos runs' fault points
 * (sim/run-api.ts), never set by the service itself.
 */
export async function claimNextStep(
  deps: Pick<ServiceDeps, 'sql' | 'temporal'>,
  {
    accountId,
    request,
    faults,
  }: {
    accountId: string;
    request: { browser_id: string; verify_first: boolean; unmetered_only: boolean };
    faults?: { afterClaimCommit?: () => void };
  },
  log: Pick<FastifyBaseLogger, 'warn'>,
): Promise<ClaimAnswer> {
  const { sql } = deps;

  // 1. Pick the step, after lapsing a claim of the account whose lease timer is late (pickClaim:
  //    the timer's own guarded transaction, committed on its own). That lapse's workflow hears of
  //    it now, not awaited; a lost signal is the sweeper's, as for any committed change.
  const pick = await pickClaim(sql, accountId, request);
  if (pick.lapsed) tellAfterCommit(deps, pick.lapsed, log);

  // 2. This browser's own claim still runs (the answer to its claim may have been lost): the same
  //    claim again, nothing written. Granted the commit under this claim, it may have pressed: it
  //    looks before anything else.
  if (pick.yours) {
    const granted = pick.yours.commit_granted_at?.toISOString() ?? null;
    const verification = granted ? { mode: 'verify_only' as const, commit_granted_at: granted } : null;
    return { step: toBrowserStep(pick.yours), verification, reason: null, wait: null };
  }

  // 3. Nothing may run now: the wait says why and when to ask again; nothing written, nothing to tell.
  if (!pick.step) return { step: null, verification: null, reason: pick.wait?.reason ?? null, wait: pick.wait };

  // 4. The claim's transaction (claimStep): the account locked, one running step, cap and gap,
  //    credit hold and budget unit; committed here and answered at once.
  const claimed = await claimStep(sql, {
    stepId: pick.step.id,
    accountId,
    sessionId: pick.sessionId,
    verifyFirst: request.verify_first,
  });

  // 5. After the commit. The chaos runs' fault fires exactly here, between the commit and the
  //    signal: a process dying now leaves a claim committed and untold, which the sweeper (or the
  //    account's next claim) must lapse on time. Then the step's workflow is told, not awaited, so
  //    it sets the lease timer from the claim's `claimed_at`.
  faults?.afterClaimCommit?.();
  tellAfterCommit(deps, pick.step, log);
  return { step: claimed.step, verification: claimed.verification ?? null, reason: null, wait: null };
}
