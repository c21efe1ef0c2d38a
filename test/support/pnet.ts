/** A sender account driven as the browser extension drives it, for the pnet tests. */
import type { WorkflowHandle } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { randomUUID } from 'node:crypto';
import { vi } from 'vitest';
import { createActivities, type ActivityDeps } from '../../activities/index.js';
import type { Sql } from '../../db/sql.js';
import type { SettleReport } from '../../domain/pnet/agent.js';
import { startOptions } from '../../services/pnet/browser-step-client.js';
import { claimStep, settleStep } from '../../services/pnet/step-transitions.js';
import type { ClaimInput } from '../../store/pnet/steps.js';
import { browserStepWorkflow } from '../../workflows/pnet/browser-step.js';
import { browserStepStateQuery, stepChangedSignal } from '../../workflows/pnet/browser-step.contract.js';
import { withKey, withToken, type TestStack, type TestWorkspace } from './test-stack.js';
import { useTimeSkippingWorker } from './time-skipping.js';

export const allWeek = { start: '00:00', end: '00:00', days: [1, 2, 3, 4, 5, 6, 7] };

/** A new sender profile of `ws` (its pnet account is made with it), named `S <uuid>` unless `payload` names it: its id. */
export async function newSenderProfile(stack: TestStack, ws: TestWorkspace, payload: object = {}): Promise<string> {
  const profile = (
    await stack.app.inject({
      method: 'POST',
      url: '/sender-profiles/',
      headers: withKey(ws.apiKey),
      payload: { name: `S ${randomUUID()}`, ...payload },
    })
  ).json();
  return profile.id as string;
}

/**
 * A new sender profile of `ws` and its pnet account, `settings` (when given) patched onto the
 * account's pnet settings: the ids, and the connection token the account's browsers use.
 */
export async function senderAccount(
  stack: TestStack,
  ws: TestWorkspace,
  options: { name?: string; settings?: object } = {},
): Promise<{ profileId: string; accountId: string; token: string }> {
  const headers = withKey(ws.apiKey);
  const profileId = await newSenderProfile(stack, ws, options.name === undefined ? {} : { name: options.name });
  if (options.settings)
    await stack.app.inject({
      method: 'PATCH',
      url: `/sender-profiles/${profileId}/pnet/settings/`,
      headers,
      payload: options.settings,
    });
  const token = (await stack.app.inject({ method: 'GET', url: `/sender-profiles/${profileId}/pnet/`, headers })).json()
    .connection_token as string;
  const [account] = await stack.sql<
    { id: string }[]
  >`select id from pnet_accounts where sender_profile_id = ${profileId}`;
  return { profileId, accountId: account!.id, token };
}

/**
 * A time-skipping worker on `taskQueue` with the service's activities (`deps` added), whose
 * `startStep` starts each step's workflow on that server without search attributes: the
 * time-skipping server has none.
 */
export function useStepTimeSkippingWorker(stack: TestStack, taskQueue: string, deps: Partial<ActivityDeps> = {}) {
  return useTimeSkippingWorker(taskQueue, (env) =>
    createActivities({
      sql: stack.sql,
      startStep: async (row) =>
        void (await env.client.workflow.start(browserStepWorkflow, {
          ...startOptions(taskQueue, row),
          typedSearchAttributes: [],
        })),
      integrations: stack.integrations,
      ...deps,
    }),
  );
}

/** A hold of `ws` on the contact: its steps wait, unclaimed, until it is lifted. The hold's body. */
export async function holdContact(stack: TestStack, ws: TestWorkspace, contactKey: string) {
  return (
    await stack.app.inject({
      method: 'POST',
      url: '/pnet/holds/',
      headers: withKey(ws.apiKey),
      payload: { contact_key: contactKey },
    })
  ).json();
}

/** A connected automatic account open all week, with one browser checked in and holding the lease. */
export async function connectedAccount(stack: TestStack, ws: TestWorkspace, settings: object = {}) {
  const headers = withKey(ws.apiKey);
  const { profileId, accountId, token } = await senderAccount(stack, ws, {
    settings: { run_mode: 'automatic', working_hours: allWeek, ...settings },
  });
  const browserId = randomUUID();
  const agent = (path: string, payload: object) =>
    stack.app.inject({ method: 'POST', url: path, headers: withToken(token), payload });
  const heartbeat = (body: object = {}) =>
    agent('/pnet/agent/heartbeat/', {
      browser_id: browserId,
      browser_label: 'Chrome',
      extension_version: '2.0.0',
      ...body,
    });
  await heartbeat({ identity: { member_urn: `urn:li:member:${randomUUID()}` }, lease_nonce: 'lease-nonce-1' });
  const queue = async (params: object, extra: object = {}) =>
    (
      await stack.app.inject({
        method: 'POST',
        url: '/pnet/steps/',
        headers,
        payload: { account_id: accountId, params, ...extra },
      })
    ).json();
  const claim = async (body: object = {}) => agent('/pnet/agent/claim/', { browser_id: browserId, ...body });
  const report = (stepId: string, body: object) => agent(`/pnet/agent/actions/${stepId}/result/`, body);
  return {
    accountId,
    profileId,
    token,
    browserId,
    agent,
    heartbeat,
    queue,
    claim,
    report,
  };
}

/**
 * What the API does with a browser's claim or result (decision 046) for a step whose workflow runs
 * on a test server: commit it (a claim at the server's clock, which the lease timer runs on), then
 * signal the workflow, and wait until it has read the change.
 */
export async function claimAndTell(
  sql: Sql,
  env: TestWorkflowEnvironment,
  handle: WorkflowHandle,
  input: Omit<ClaimInput, 'now'>,
) {
  const result = await claimStep(sql, { ...input, now: new Date(await env.currentTimeMs()).toISOString() });
  await tellAndWait(handle, result.step.status);
  return result;
}

export async function settleAndTell(sql: Sql, handle: WorkflowHandle, stepId: string, report: SettleReport) {
  const result = await settleStep(sql, { stepId, report });
  await tellAndWait(handle, result.step.status);
  return result;
}

/** Signals `stepChanged` and waits (up to 10 s) until the workflow's view shows `status`. */
export async function tellAndWait(handle: WorkflowHandle, status: string): Promise<void> {
  await handle.signal(stepChangedSignal);
  await vi.waitFor(
    async () => {
      if ((await handle.query(browserStepStateQuery)).status !== status)
        throw new Error(`the step's workflow did not read ${status}`);
    },
    { timeout: 10_000, interval: 20 },
  );
}

/** Waits (up to `ms`) until `check` holds; fails naming `what`. */
export function until(what: string, check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  return vi.waitFor(
    async () => {
      if (!(await check())) throw new Error(`timed out waiting until ${what}`);
    },
    { timeout: ms, interval: 50 },
  );
}
