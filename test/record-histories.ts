/**
 * Records representative workflow histories into test/histories/ for the replay test:
 * `npm run record:histories` adds the ones not recorded yet; existing files are never rewritten
 * (without --force), since replaying them against new code is the point.
 */
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  approveStepUpdate,
  browserStepWorkflow,
  cancelStepUpdate,
  claimRenewedSignal,
  claimStepUpdate,
  reportResultUpdate,
  retryStepUpdate,
} from '../workflows/browser-step.js';
import { creditHoldSettledSignal, creditHoldWorkflow } from '../workflows/credit-hold.js';
import { ApplicationFailure } from '@temporalio/common';
import { cancelColumnRunSignal, columnRunWorkflow, rowsAddedSignal } from '../workflows/column-run.js';
import { accountChangedSignal, senderAccountWorkflow } from '../workflows/sender-account.js';
import { projectRoot, resolveTool, temporalTestServer } from '../worker/tools.js';
import { workflowsPath } from '../worker/worker.js';

const env = await TestWorkflowEnvironment.createTimeSkipping({
  server: { executable: { type: 'existing-path', path: resolveTool(temporalTestServer) } },
});
const taskQueue = 'record-histories';
// Column runs: the first claim hands out rows, the next finds none; a row of the cancelled run
// waits until the cancel signal is in, so the history holds it mid-run.
const claims = new Map<string, number>();
let releaseSlowRows: () => void = () => {};
const slowRows = new Promise<void>((resolve) => (releaseSlowRows = resolve));
let slowStarted = 0;
// The activities answer as the real ones would, without a database.
const worker = await Worker.create({
  connection: env.nativeConnection,
  taskQueue,
  workflowsPath,
  activities: {
    releaseExpiredHold: async () => 'released',
    approveStep: async () => ({ step: { status: 'queued' } }),
    rejectStep: async () => ({ step: { status: 'rejected' } }),
    cancelStep: async () => ({ step: { status: 'failed' } }),
    claimStep: async () => ({ step: { status: 'claimed', claimed_at: '2026-01-01T00:00:00.000Z' } }),
    settleStep: async () => ({ step: { status: 'succeeded' } }),
    expireClaim: async () => ({ status: 'queued' }),
    retryStep: async () => ({ step: { status: 'resuming' } }),
    tickSenderAccount: async () => ({ connected: true, checkpointUntil: null, nextCheckAt: null, queuedStepIds: [] }),
    beginColumnRun: async () => ({ state: 'running', status: 'queued', provider: 'web_page_reader', concurrency: 2, timeoutSeconds: 15 }),
    claimRunBatch: async ({ runId }: { runId: string }) => {
      const n = (claims.get(runId) ?? 0) + 1;
      claims.set(runId, n);
      const rowIds = runId === 'run-cancelled' ? ['row-slow-1', 'row-slow-2', 'row-4', 'row-5'] : ['row-1', 'row-2', 'row-3'];
      return n === 1
        ? { rowIds, exhausted: false, wakes: 0, progress: 0, stop: null }
        : { rowIds: [], exhausted: true, wakes: 1, progress: 100, stop: null };
    },
    runEnrichmentCell: async ({ rowId }: { rowId: string }) => {
      if (rowId === 'row-2') throw ApplicationFailure.nonRetryable('127.0.0.1 answered 404.', 'provider_refused');
      if (rowId.startsWith('row-slow')) {
        slowStarted += 1;
        await slowRows;
      }
      return rowId === 'row-3' ? 'empty' : 'done';
    },
    failEnrichmentCell: async () => undefined,
    finishColumnRun: async ({ outcome }: { outcome: string }) => ({ finished: true, status: outcome }),
  },
});
const expiresAt = new Date(Date.now() + 24 * 3600 * 1000).toISOString();
await worker.runUntil(async () => {
  const expired = await env.client.workflow.start(creditHoldWorkflow, {
    taskQueue, workflowId: 'credit-hold/expired', args: [{ holdId: '00000000-0000-4000-8000-000000000001', workspaceId: 'w', expiresAt }],
  });
  await expired.result();
  const settled = await env.client.workflow.start(creditHoldWorkflow, {
    taskQueue, workflowId: 'credit-hold/settled', args: [{ holdId: '00000000-0000-4000-8000-000000000002', workspaceId: 'w', expiresAt }],
  });
  await settled.signal(creditHoldSettledSignal, { outcome: 'charged' });
  await settled.result();
  const step = await env.client.workflow.start(browserStepWorkflow, {
    taskQueue,
    workflowId: 'browser-step/approved-then-cancelled',
    args: [{ stepId: '00000000-0000-4000-8000-000000000003', workspaceId: 'w', accountId: 'a', kind: 'profile_view', status: 'awaiting_approval' }],
  });
  await step.executeUpdate(approveStepUpdate);
  await step.executeUpdate(cancelStepUpdate, { args: [{ errorCode: 'cancelled' }] });
  await step.result();
  const claimed = await env.client.workflow.start(browserStepWorkflow, {
    taskQueue,
    workflowId: 'browser-step/claimed-lapsed-then-settled',
    args: [{ stepId: '00000000-0000-4000-8000-000000000004', workspaceId: 'w', accountId: 'a', kind: 'check_inbox', status: 'queued' }],
  });
  await claimed.executeUpdate(claimStepUpdate, { args: [{ sessionId: 's', verifyFirst: false }] });
  await claimed.signal(claimRenewedSignal, { claimedAt: '2026-01-01T00:00:00.000Z' });
  await env.sleep('200 seconds'); // the lease lapses: the read goes back in line
  await claimed.executeUpdate(claimStepUpdate, { args: [{ sessionId: 's', verifyFirst: false }] });
  await claimed.executeUpdate(reportResultUpdate, {
    args: [{ status: 'succeeded', claimed_at: null, duration_ms: 10, error_code: null, error_message: null, outcome: null }],
  });
  await claimed.result();
  // A retried failure: the step's run closes when it fails, and the retry starts the next run.
  const failed = await env.client.workflow.start(browserStepWorkflow, {
    taskQueue,
    workflowId: 'browser-step/retried',
    args: [{ stepId: '00000000-0000-4000-8000-000000000005', workspaceId: 'w', accountId: 'a', kind: 'send_message', status: 'failed' }],
  });
  await failed.executeUpdate(retryStepUpdate);
  await failed.executeUpdate(cancelStepUpdate, { args: [{ errorCode: 'cancelled' }] });
  await failed.result();
  // An account's clock: ticks on its timer and on a signal, still running when recorded.
  const account = await env.client.workflow.start(senderAccountWorkflow, {
    taskQueue,
    workflowId: 'sender-account/ticking',
    args: [{ accountId: '00000000-0000-4000-8000-000000000006', workspaceId: 'w' }],
  });
  await env.sleep('40 minutes');
  await account.signal(accountChangedSignal);
  await env.sleep('1 minute');
  const columnRun = await env.client.workflow.start(columnRunWorkflow, {
    taskQueue,
    workflowId: 'column-run/completed',
    args: [{ runId: 'run-completed', workspaceId: 'w', tableId: 't', columnId: 'c' }],
  });
  await columnRun.signal(rowsAddedSignal);
  await columnRun.result();
  const cancelledRun = await env.client.workflow.start(columnRunWorkflow, {
    taskQueue,
    workflowId: 'column-run/cancelled',
    args: [{ runId: 'run-cancelled', workspaceId: 'w', tableId: 't', columnId: 'c' }],
  });
  while (slowStarted < 2) await new Promise((resolve) => setTimeout(resolve, 50));
  await cancelledRun.signal(cancelColumnRunSignal);
  releaseSlowRows();
  await cancelledRun.result();
  const histories = [
    ['column-run-completed-with-failure', columnRun],
    ['column-run-cancelled', cancelledRun],
    ['sender-account-ticking', account],
    ['browser-step-retried-then-cancelled', failed],
    ['browser-step-claimed-lapsed-then-settled', claimed],
    ['credit-hold-expired', expired],
    ['credit-hold-settled', settled],
    ['browser-step-approved-then-cancelled', step],
  ] as const;
  // Histories already recorded stay as they are: they are the archive that today's code must
  // still replay. Only new ones are written (or all with --force).
  for (const [name, handle] of histories) {
    const file = join(projectRoot, 'test', 'histories', `${name}.json`);
    if (existsSync(file) && !process.argv.includes('--force')) continue;
    writeFileSync(file, historyToJSON(await handle.fetchHistory()));
    console.log(`recorded ${file}`);
  }
  await account.terminate();
});
await env.teardown();
