/**
 * Two Updates of one step accepted in the same workflow task (an approval and a cancel that arrived
 * while no worker ran, as after a SIGKILL): their transitions must run one after the other, never
 * side by side, or a replay may order their completions differently (non-determinism, found by
 * the chaos run). The transitions here are stand-ins that record when they ran; no database.
 */
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { resolveTool, temporalTestServer } from '../../worker/tools.js';
import { browserStepWorkflow } from '../../workflows/pnet/browser-step.js';
import { ApplicationFailure } from '@temporalio/common';
import {
  approveStepUpdate,
  browserStepWorkflowId,
  cancelStepUpdate,
} from '../../workflows/pnet/browser-step.contract.js';

let env: TestWorkflowEnvironment;
beforeAll(async () => {
  env = await TestWorkflowEnvironment.createTimeSkipping({
    server: { executable: { type: 'existing-path', path: resolveTool(temporalTestServer) } },
  });
});
afterAll(async () => {
  await env?.teardown();
});

it('runs the transitions of two Updates accepted in one task one after the other', async () => {
  const taskQueue = 'browser-step-updates-test';
  const ran: { name: string; start: number; end: number }[] = [];
  const transition = (name: string, status: string) => async () => {
    const start = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 300));
    ran.push({ name, start, end: performance.now() });
    // As in SQL: an approval after the cancel is refused.
    if (name === 'approve' && ran.some((r) => r.name === 'cancel'))
      throw ApplicationFailure.nonRetryable('The step is cancelled.', 'conflict');
    return { step: { status, claimed_at: null, error_code: status === 'cancelled' ? 'cancelled' : null } };
  };
  const stepId = '00000000-0000-4000-8000-0000000000aa';
  const handle = await env.client.workflow.start(browserStepWorkflow, {
    taskQueue,
    workflowId: browserStepWorkflowId(stepId),
    args: [{ stepId, workspaceId: 'w', accountId: 'a', kind: 'send_message', status: 'awaiting_approval' }],
  });
  // Both wait for a worker, so the first task carries both.
  const approve = handle.executeUpdate(approveStepUpdate);
  const cancel = handle.executeUpdate(cancelStepUpdate, { args: [{ errorCode: 'cancelled' }] });
  await new Promise((resolve) => setTimeout(resolve, 500));
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: { codePath: inject('workflowBundlePath') },
    activities: { approveStep: transition('approve', 'queued'), cancelStep: transition('cancel', 'cancelled') },
  });
  await worker.runUntil(async () => {
    await Promise.allSettled([approve, cancel]);
    await handle.result();
  });

  // The premise: both Updates were accepted in the same task.
  const history = JSON.parse(historyToJSON(await handle.fetchHistory())) as { events: { eventType: string }[] };
  const events = history.events.map((e) => e.eventType);
  const accepted = events.flatMap((type, i) => (type === 'EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED' ? [i] : []));
  expect(accepted).toHaveLength(2);
  expect(events.slice(accepted[0], accepted[1]).some((type) => type.startsWith('EVENT_TYPE_WORKFLOW_TASK_'))).toBe(
    false,
  );
  // The point: one transition ended before the other began.
  expect(ran.map((r) => r.name).sort()).toEqual(['approve', 'cancel']);
  const [first, second] = [...ran].sort((a, b) => a.start - b.start);
  expect(second!.start).toBeGreaterThanOrEqual(first!.end);
  // And the history replays: a replay has both results at once and must order them the same way.
  await Worker.runReplayHistory(
    { workflowBundle: { codePath: inject('workflowBundlePath') } },
    await handle.fetchHistory(),
    handle.workflowId,
  );
});
