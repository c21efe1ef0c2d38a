/**
 * Records representative workflow histories into test/histories/ for the replay test. Run it
 * after a deliberate workflow change that ships behind patched(): `npm run record:histories`.
 */
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  approveStepUpdate,
  browserStepWorkflow,
  cancelStepUpdate,
  claimRenewedSignal,
  claimStepUpdate,
  reportResultUpdate,
} from '../workflows/browser-step.js';
import { creditHoldSettledSignal, creditHoldWorkflow } from '../workflows/credit-hold.js';
import { projectRoot, resolveTool, temporalTestServer } from '../worker/tools.js';
import { workflowsPath } from '../worker/worker.js';

const env = await TestWorkflowEnvironment.createTimeSkipping({
  server: { executable: { type: 'existing-path', path: resolveTool(temporalTestServer) } },
});
const taskQueue = 'record-histories';
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
  await step.executeUpdate(cancelStepUpdate);
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
  const histories = [
    ['browser-step-claimed-lapsed-then-settled', claimed],
    ['credit-hold-expired', expired],
    ['credit-hold-settled', settled],
    ['browser-step-approved-then-cancelled', step],
  ] as const;
  for (const [name, handle] of histories) {
    const history = await handle.fetchHistory();
    writeFileSync(join(projectRoot, 'test', 'histories', `${name}.json`), historyToJSON(history));
  }
});
await env.teardown();
console.log('recorded the histories in test/histories/');
