/**
 * The extension protocol, authenticated by the sender account's connection token (in
 * `Authorization: Bearer` or `X-API-Key`). The spec leaves these paths open; they live under
 * /pnet/agent/ beside the result route (operationId `reportStepResult`). Each handler reads the
 * principal and the body, calls its use case (services/pnet/: claimNextStep, reportStepResult,
 * releaseStepClaim) or a named store function, and answers (docs/architecture.md, "One home per use
 * case").
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { unauthenticated } from '../../../domain/shared/errors.js';
import { agentConfig } from '../../../domain/pnet/agent-config.js';
import {
  AgentAttemptSchema,
  AgentCommitGrantSchema,
  AgentCommitSchema,
  AgentConfigSchema,
  AgentRunningWaitSchema,
  RunningWaitAnswerSchema,
  StepAttemptSchema,
} from '../../../domain/pnet/running.js';
import {
  AgentClaimResponseSchema,
  AgentClaimSchema,
  AgentHeartbeatSchema,
  AgentReleaseSchema,
  AgentSetStateSchema,
  AgentStateSchema,
  ResultReportSchema,
} from '../../../domain/pnet/agent.js';
import { BrowserStepSchema } from '../../../domain/pnet/steps.js';
import { claimNextStep } from '../../../services/pnet/claim-next-step.js';
import { releaseStepClaim } from '../../../services/pnet/release-step-claim.js';
import { reportStepResult } from '../../../services/pnet/report-step-result.js';
import { wakeSequenceContacts } from '../../../services/sequences/stops.js';
import { accountStep } from '../../../services/pnet/step-transitions.js';
import type { AppDeps } from '../../deps.js';
import { browserSession } from '../../../store/pnet/check-ins.js';
import { principalOf } from '../../plugins/auth.js';
import { checkIn, recordCheckInRequest } from '../../../store/pnet/check-ins.js';
import { grantCommit, recordAttempt, recordRunningWait } from '../../../store/pnet/running.js';

const tags = ['pnet-agent'];
const ActionParamsSchema = z.object({ action_id: UuidSchema });
const config = { access: 'extension' as const };
/** The heartbeat's and the result's statements check the connection token themselves, so auth may take it from memory. */
const checksTokenConfig = { ...config, checksConnectionToken: true };

export const pnetAgentRoutes =
  ({ sql, temporal, faults }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    /** What the use cases of services/pnet/ take (services/deps.ts). */
    const deps = { sql, temporal };

    app.post(
      '/pnet/agent/heartbeat/',
      {
        config: checksTokenConfig,
        schema: {
          operationId: 'agentHeartbeat',
          tags,
          summary: "A browser's check-in: presence, identity, lease; answers the authoritative agent state",
          description:
            'The first check-in naming an identity connects the account; another identity afterwards reads `account_mismatch: true` (a hard stop). ' +
            'With a `lease_nonce`, `lease_granted` says whether this browser holds the lease, which lapses when its holder stops checking in.',
          body: AgentHeartbeatSchema,
          response: { 200: AgentStateSchema },
        },
        // The answer is checkIn's AgentState, the type inferred from AgentStateSchema, so its shape is
        // checked when this compiles; encoding it through zod again on every check-in cost about 35 µs,
        // a tenth of the request's CPU. The schema still documents the answer (OpenAPI).
        serializerCompiler: () => (data) => JSON.stringify(data),
        onResponse: async (_request, reply) => recordCheckInRequest(reply.elapsedTime),
      },
      async (request) => {
        const b = request.body;
        const principal = principalOf(request);
        const state = await checkIn(sql, principal.accountId!, {
          tokenHash: principal.connectionTokenHash!,
          browserId: b.browser_id,
          label: b.browser_label,
          version: b.extension_version,
          leaseNonce: b.lease_nonce,
          identity: b.identity,
          running: b.running,
        });
        if (!state) throw unauthenticated();
        // A check-in naming its running claim renewed the lease in the statement: no check-in
        // reaches Temporal (the step's lease timer reads the renewal when it fires).
        return state;
      },
    );

    app.post(
      '/pnet/agent/state/',
      {
        config,
        schema: {
          operationId: 'agentSetState',
          tags,
          summary: 'Set the run mode from the extension and take or renew the lease',
          body: AgentSetStateSchema,
          response: { 200: AgentStateSchema },
        },
      },
      async (request) => {
        const session = await browserSession(sql, principalOf(request).accountId!, request.body.browser_id);
        const state = await checkIn(sql, principalOf(request).accountId!, {
          tokenHash: principalOf(request).connectionTokenHash!,
          browserId: request.body.browser_id,
          label: session?.browser_label ?? 'Browser',
          version: session?.extension_version ?? '0',
          leaseNonce: request.body.lease_nonce,
          runMode: request.body.run_mode,
        });
        if (!state) throw unauthenticated();
        return state;
      },
    );

    app.post(
      '/pnet/agent/claim/',
      {
        config,
        schema: {
          operationId: 'agentClaim',
          tags,
          summary: 'Hand this browser the next step of its account, if one may run now',
          description:
            'Order: unmetered test steps, then queued steps oldest first; never a held step; a resuming step only to a browser that verifies first. ' +
            'A kind at its daily or weekly ceiling stays queued and the reason travels on the answer; metered steps wait for the gap and working hours. ' +
            'At most one step per account runs at a time, and only the browser holding the lease claims. ' +
            'A browser asking while its own claim runs gets that claim back (its answer may have been lost), `verify_only` if it was granted the commit.',
          body: AgentClaimSchema,
          response: { 200: AgentClaimResponseSchema, 409: DetailBodySchema },
        },
      },
      async (request) =>
        claimNextStep(deps, { accountId: principalOf(request).accountId!, request: request.body, faults }, request.log),
    );

    app.post(
      '/pnet/agent/actions/:action_id/result/',
      {
        // The settle's lock statement checks the connection token itself, so auth may take it from memory.
        config: checksTokenConfig,
        schema: {
          operationId: 'reportStepResult',
          tags,
          summary: 'Settle a step the browser has finished with (endpoint 2)',
          description:
            'Only the current claim settles: a step already settled, cancelled, skipped or given up on answers 409 with nothing changed, ' +
            'as does a result naming an earlier claim, unless it is a success for a step not settled since or the same result again (200). ' +
            '`failed` and `skipped` return the daily budget unit. `diagnostic` never changes how a step settles; an unreadable one is dropped.',
          params: ActionParamsSchema,
          body: ResultReportSchema,
          response: { 200: BrowserStepSchema, 409: DetailBodySchema },
        },
      },
      async (request) => {
        const principal = principalOf(request);
        const browser = {
          workspaceId: principal.workspaceId,
          accountId: principal.accountId!,
          connectionTokenHash: principal.connectionTokenHash!,
        };
        return reportStepResult(
          {
            ...deps,
            wakeRepliedContacts: (workspaceId, profileUrls) => wakeSequenceContacts(deps, workspaceId, { profileUrls }),
          },
          { stepId: request.params.action_id, report: request.body, browser },
          request.log,
        );
      },
    );

    app.post(
      '/pnet/agent/actions/:action_id/release/',
      {
        config,
        schema: {
          operationId: 'releaseStepClaim',
          tags,
          summary: 'Give a claim back: the step returns to the line and the release never counts against it',
          description:
            '`verified_absent`: the browser looked and the action is not done; `reopen_paused`: the page it needs is paused.',
          params: ActionParamsSchema,
          body: AgentReleaseSchema,
          response: { 200: BrowserStepSchema, 409: DetailBodySchema },
        },
      },
      async (request) => {
        const browser = principalOf(request);
        const { claimed_at: claimedAt, reason } = request.body;
        return releaseStepClaim(deps, { stepId: request.params.action_id, browser, claimedAt, reason }, request.log);
      },
    );

    app.post(
      '/pnet/agent/actions/:action_id/commit/',
      {
        config,
        schema: {
          operationId: 'grantStepCommit',
          tags,
          summary: 'Ask leave to press the irreversible button of the running step',
          description:
            'Granted only while the claim is current and nothing stopped the step since it was handed out (a paused contact or sequence, paused sending, a failing inbox read); ' +
            'otherwise 409 and the browser stops without acting. A resuming step whose earlier run was granted the commit is handed out `verify_only`.',
          params: ActionParamsSchema,
          body: AgentCommitSchema,
          response: { 200: AgentCommitGrantSchema, 409: DetailBodySchema },
        },
      },
      async (request) => {
        const step = await accountStep(sql, principalOf(request), request.params.action_id);
        return grantCommit(sql, step.id, request.body.claimed_at);
      },
    );

    app.post(
      '/pnet/agent/actions/:action_id/attempts/',
      {
        config,
        schema: {
          operationId: 'reportStepAttempt',
          tags,
          summary: 'Report a run cut off without an error, or given back; it never counts against the step',
          params: ActionParamsSchema,
          body: AgentAttemptSchema,
          response: { 200: StepAttemptSchema },
        },
      },
      async (request) => {
        const step = await accountStep(sql, principalOf(request), request.params.action_id);
        return recordAttempt(sql, step.id, request.body);
      },
    );

    app.post(
      '/pnet/agent/actions/:action_id/running-wait/',
      {
        config,
        schema: {
          operationId: 'reportRunningWait',
          tags,
          summary: 'The running step waits inside the page: where, for how long awake, and the tab’s state',
          description:
            'Renews the claim’s lease like a check-in naming it. `running_claim: lost` means the browser must stop the step before changing anything more.',
          params: ActionParamsSchema,
          body: AgentRunningWaitSchema,
          response: { 200: RunningWaitAnswerSchema },
        },
      },
      async (request) => {
        const step = await accountStep(sql, principalOf(request), request.params.action_id);
        // The write renews the lease (`lease_renewed_at`), read by the step's lease timer.
        const { claimedAt } = await recordRunningWait(sql, step.id, request.body);
        return { running_claim: claimedAt ? ('renewed' as const) : ('lost' as const) };
      },
    );

    app.get(
      '/pnet/agent/config/',
      {
        config,
        schema: {
          operationId: 'readAgentConfig',
          tags,
          summary: 'The selector and pacing config; fetch again whenever a check-in names another `config_version`',
          response: { 200: AgentConfigSchema },
        },
      },
      async () => agentConfig,
    );
  };
