/**
 * What happens when a browser reports a step's result: the whole use case of the result route
 * (operationId `reportStepResult`, `POST /pnet/agent/actions/{action_id}/result/` in
 * api/routes/pnet/agent.ts), told in order. The route reads the principal and the body, calls
 * `reportStepResult` and answers with the record it returns.
 *
 * The shape is docs/decisions/046-browser-transitions-in-postgres.md: the result is a guarded SQL
 * transaction the API commits and answers itself, and everything Temporal hears of it comes after
 * that commit, without the browser waiting on a workflow task.
 *
 * Where each part lives:
 * - the decisions are pure, in domain/pnet/settle.ts: `decideAtRest` (a step already at rest: the
 *   same result again, a late success, a refusal) and `decideSettle` (what the settle writes);
 * - the transaction is `settleStep` (services/pnet/step-transitions.ts), which applies them with
 *   the statements of store/pnet/steps.ts and is shared with the tests' settles that name no browser;
 * - what follows the commit is below, and only here.
 */
import type { FastifyBaseLogger } from 'fastify';
import { DiagnosticSchema, type ResultReport } from '../../domain/pnet/agent.js';
import type { BrowserStep } from '../../domain/pnet/steps.js';
import { pnetReplyProfiles } from '../../store/inbox/messages.js';
import type { ReportingBrowser } from '../../store/pnet/steps.js';
import type { ServiceDeps } from '../deps.js';
import { signalSenderAccount, tellAfterCommit } from './browser-step-client.js';
import { settleStep } from './step-transitions.js';

/**
 * What the report needs, with the sequences' wake of contacts who replied handed in by the caller:
 * sequences build on pnet steps (they import services/pnet), so services/pnet never imports
 * services/sequences (test/unit/import-cycles.test.ts).
 */
export type ReportDeps = Pick<ServiceDeps, 'sql' | 'temporal'> & {
  wakeRepliedContacts: (workspaceId: string, profileUrls: string[]) => Promise<unknown>;
};

/**
 * Settles the browser's current claim of `stepId` with its report and answers the step's record.
 * `browser` is the caller as its connection token says (the route takes it from memory: the
 * settle's lock statement checks it). Refusals are thrown as the API's errors: a step of another
 * account 404, a replaced connection token 401, a step at rest or an earlier claim 409 (the same
 * result again is 200), a code only the service writes 422.
 */
export async function reportStepResult(
  deps: ReportDeps,
  { stepId, report, browser }: { stepId: string; report: ResultReport; browser: ReportingBrowser },
  log: Pick<FastifyBaseLogger, 'info' | 'warn'>,
): Promise<BrowserStep> {
  const { sql, temporal } = deps;

  // 1. Validate what the transaction does not read. The diagnostic is the page's own summary and
  //    never changes how a step settles, so an unreadable one is only logged, and the diagnostic
  //    is left out of the settle either way.
  if (report.diagnostic !== undefined && !DiagnosticSchema.safeParse(report.diagnostic).success) {
    log.info({ stepId }, 'unreadable diagnostic dropped');
  }
  const { diagnostic: _dropped, ...settle } = report;

  // 2. Decide and write in one transaction: the lock of the step is the whole check (this
  //    account's step in this workspace, the token still the account's), then decideAtRest and
  //    decideSettle on the row as locked, then their statements, the last with the COMMIT. A
  //    refusal throws out of here, so nothing below runs unless the settle committed.
  const result = await settleStep(sql, { stepId, report: settle, browser });
  const step = result.locked;

  // 3. After the commit, and never inside it: none of these may hold the step's lock or make the
  //    browser's answer wait on Temporal, and none of them is needed for correctness.

  // 3a. The step's workflow reads the change (`readStepChange`), ends its lease timer, and runs the
  //     wakes of whatever waits on the settled step (a sequence contact, a research run). Not
  //     awaited. The settle's own statement marked the row (`signal_due_at`), so the row is the
  //     outbox: a signal lost here (the process died, Temporal unreachable) is sent again by the
  //     step-signal sweeper (workflows/pnet/step-signals.ts). The same result again changed
  //     nothing, so it tells nothing.
  if (result.step.status !== step.status) tellAfterCommit(deps, step, log);

  // 3b. Replies that a conversation read recorded (in the settle, store/inbox) stop their contacts'
  //     pending steps now rather than at each contact's next send. Not awaited and best effort:
  //     every send reads contact_stop_reason() in its own transaction (services/sequences/stops.ts).
  const repliedProfiles = result.step.status === 'succeeded' ? pnetReplyProfiles(step.kind, result.step.outcome) : [];
  if (repliedProfiles.length > 0) {
    deps
      .wakeRepliedContacts(step.workspace_id, repliedProfiles)
      .catch((err: unknown) => log.warn({ err }, 'could not wake sequence contacts'));
  }

  // 3c. The account's own workflow is woken. A checkpoint holds the account from this settle on
  //     (the hold committed above, so claims already pass the account over); the workflow owns the
  //     end of the back-off. A failed inbox read holds the account's messages, and the workflow
  //     tries the read again soon (docs/decisions/017-messages-wait-on-failing-inbox-read.md).
  //     Awaited, so the answer leaves once the workflow was asked; a failure is logged and the
  //     answer stands.
  if (result.checkpoint || (step.kind === 'check_inbox' && result.step.status === 'failed')) {
    await signalSenderAccount(temporal.client, temporal.taskQueue, {
      id: step.account_id,
      workspace_id: step.workspace_id,
    }).catch((err: unknown) => log.warn({ err }, 'could not wake the account workflow'));
  }

  return result.step;
}
