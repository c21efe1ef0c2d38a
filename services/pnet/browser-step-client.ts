/** Starting, updating and signalling a step's workflow, shared by the person-side and the browser's use cases. */
import type { FastifyBaseLogger } from 'fastify';
import { WithStartWorkflowOperation, WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { UpdateDefinition } from '@temporalio/common';
import type { StepRow } from '../../store/pnet/steps.js';
import { recordStepRun } from '../../store/pnet/step-queue.js';
import type { StepTransitionResult } from '../../domain/pnet/agent.js';
import type { Sql } from '../../db/sql.js';
import { browserStepWorkflow } from '../../workflows/pnet/browser-step.js';
import {
  browserStepWorkflowId,
  stepChangedSignal,
  type BrowserStepInput,
} from '../../workflows/pnet/browser-step.contract.js';
import { senderAccountWorkflow } from '../../workflows/pnet/sender-account.js';
import { stepSignalSweeperWorkflow } from '../../workflows/pnet/step-signals.js';
import {
  defaultStepSignalSweeper,
  stepSignalSweeperQueue,
  stepSignalSweeperWorkflowId,
  type StepSignalSweeperInput,
} from '../../workflows/pnet/step-signals.contract.js';
import { accountChangedSignal, senderAccountWorkflowId } from '../../workflows/pnet/sender-account.contract.js';
import {
  ContactIdKey,
  SequenceIdKey,
  SenderAccountIdKey,
  StepKindKey,
  StepStatusKey,
  WorkspaceIdKey,
} from '../../workflows/shared/search-attributes.js';
import type { ServiceDeps, TemporalHandle } from '../deps.js';
import { repeatEvery } from '../repeat.js';

export function startOptions(taskQueue: string, row: StepRow) {
  const input: BrowserStepInput = {
    stepId: row.id,
    workspaceId: row.workspace_id,
    accountId: row.account_id,
    kind: row.kind,
    status: row.status,
    ...(row.run_before ? { runBefore: row.run_before.toISOString() } : {}),
  };
  return {
    taskQueue,
    workflowId: browserStepWorkflowId(row.id),
    args: [input] as [BrowserStepInput],
    workflowIdConflictPolicy: 'USE_EXISTING' as const,
    typedSearchAttributes: [
      { key: WorkspaceIdKey, value: row.workspace_id },
      { key: SenderAccountIdKey, value: row.account_id },
      { key: StepKindKey, value: row.kind },
      { key: StepStatusKey, value: row.status },
      ...(row.sequence_id ? [{ key: SequenceIdKey, value: row.sequence_id }] : []),
      ...(row.contact_key ? [{ key: ContactIdKey, value: row.contact_key }] : []),
    ],
  };
}

/** Where a step's workflow runs, and where its run is recorded. */
export interface StepWorkflows {
  client: Client;
  taskQueue: string;
  sql: Sql;
  /** The client shares its (native) connection with a worker of the task queue in this process. */
  eagerStart?: boolean;
}

/** Records the run a start created (or found), so later Updates name it (migration 022); null forgets it. */
async function recordRun(sql: Sql, stepId: string, runId: string | null) {
  await recordStepRun(sql, stepId, runId);
}

/**
 * An Update of the step's workflow, which normally runs since the step was queued. It names the
 * run its start recorded: with the workflow id alone, the server would look up the current run in
 * its persistence on every claim and every result. If that start was lost (Temporal unreachable
 * at the time) or the run has closed, the Update goes again with a start (update-with-start): the
 * first action on the step starts it. The client does not tell which run that was, so the step's
 * later Updates name the workflow id alone (a rare path: a retry after the run closed). A plain
 * Update costs the server less than update-with-start, which checks and carries a whole start
 * request every time.
 */
export async function updateStep<Args extends unknown[]>(
  to: StepWorkflows,
  row: StepRow,
  update: UpdateDefinition<StepTransitionResult, Args>,
  updateId: string,
  args: Args,
): Promise<StepTransitionResult> {
  try {
    // The handle's overloads split Updates with and without arguments; both go through here.
    const anyArgs = update as unknown as UpdateDefinition<StepTransitionResult, [unknown]>;
    const handle = to.client.workflow.getHandle(browserStepWorkflowId(row.id), row.workflow_run_id ?? undefined);
    return await handle.executeUpdate(anyArgs, { updateId, args: args as unknown as [unknown] });
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) throw error;
  }
  const startWorkflowOperation = new WithStartWorkflowOperation(browserStepWorkflow, startOptions(to.taskQueue, row));
  const result = await to.client.workflow.executeUpdateWithStart(update, { startWorkflowOperation, updateId, args });
  if (row.workflow_run_id !== null) await recordRun(to.sql, row.id, null);
  return result;
}

/**
 * Starts a step's workflow (one already running is left as it is) and records its run. With a
 * worker in this process, the start asks for the first workflow task in its answer (eager start):
 * the task skips the task queue, where a new workflow's first task otherwise waited for one of
 * the worker's few polls of the shared queue, or was written to its backlog and read back.
 */
export async function startStepWorkflow(to: StepWorkflows, row: StepRow): Promise<void> {
  const handle = await to.client.workflow.start(browserStepWorkflow, {
    ...startOptions(to.taskQueue, row),
    requestEagerStart: to.eagerStart === true,
  });
  await recordRun(to.sql, row.id, handle.firstExecutionRunId);
}

/**
 * Wakes the account's own workflow (starting it if it is not running): its settings changed, a
 * checkpoint was reported, or it was just created.
 */
export async function signalSenderAccount(
  client: Client,
  taskQueue: string,
  account: { id: string; workspace_id: string },
): Promise<void> {
  await client.workflow.signalWithStart(senderAccountWorkflow, {
    taskQueue,
    workflowId: senderAccountWorkflowId(account.id),
    args: [{ accountId: account.id, workspaceId: account.workspace_id }],
    signal: accountChangedSignal,
    typedSearchAttributes: [
      { key: WorkspaceIdKey, value: account.workspace_id },
      { key: SenderAccountIdKey, value: account.id },
    ],
  });
}

/**
 * Signals `stepChanged` to the step's workflow, starting it if it is not running (its start was
 * lost, or a retry reopened a step whose run had closed). The sweeper's path; the API's is
 * `tellStepWorkflow`.
 */
export async function signalStepWorkflow(temporal: TemporalHandle, row: StepRow): Promise<void> {
  const { workflowIdConflictPolicy: _policy, ...options } = startOptions(temporal.taskQueue, row);
  await temporal.client.workflow.signalWithStart(browserStepWorkflow, { ...options, signal: stepChangedSignal });
}

/**
 * After the API committed a browser's claim, result or release: tells the step's workflow without
 * the browser waiting for it (the answer does not wait on Temporal). A signal lost here (the
 * process died, Temporal unreachable) is sent again by the sweeper from the row's `signal_due_at`.
 */
export function tellStepWorkflow(
  to: StepWorkflows,
  row: Pick<StepRow, 'id' | 'workflow_run_id'>,
  onError: (err: unknown) => void,
): void {
  const signal = (runId?: string) =>
    to.client.workflow.getHandle(browserStepWorkflowId(row.id), runId).signal(stepChangedSignal);
  signal(row.workflow_run_id ?? undefined)
    .catch(async (error: unknown) => {
      if (!(error instanceof WorkflowNotFoundError) || row.workflow_run_id === null) throw error;
      // The recorded run is not the running one (a restored database, say): by the workflow id
      // alone, and the record forgets it.
      await signal();
      await recordRun(to.sql, row.id, null);
    })
    .catch(onError);
}

/**
 * `tellStepWorkflow` as the browser's use cases call it once their transaction committed
 * (reportStepResult, claimNextStep, releaseStepClaim): a signal that fails is logged, never thrown
 * at the browser, because the change is committed and marked (`signal_due_at`) and the sweeper
 * sends it again.
 */
export function tellAfterCommit(
  deps: Pick<ServiceDeps, 'sql' | 'temporal'>,
  step: Pick<StepRow, 'id' | 'workflow_run_id'>,
  log: Pick<FastifyBaseLogger, 'warn'>,
): void {
  tellStepWorkflow({ ...deps.temporal, sql: deps.sql }, step, (err) =>
    log.warn({ err, stepId: step.id }, 'step workflow not signalled; the sweeper will'),
  );
}

/** Starts the step-signal sweeper (workflows/pnet/step-signals.ts) of `taskQueue`'s steps, on its own queue, unless it runs. */
export async function startStepSignalSweeper(
  client: Client,
  taskQueue: string,
  input: StepSignalSweeperInput = defaultStepSignalSweeper,
): Promise<void> {
  await client.workflow.start(stepSignalSweeperWorkflow, {
    taskQueue: stepSignalSweeperQueue(taskQueue),
    workflowId: stepSignalSweeperWorkflowId(taskQueue),
    args: [{ ...input, stepTaskQueue: taskQueue }],
    workflowIdConflictPolicy: 'USE_EXISTING',
  });
}

/** The worker's bootstrap keeps the sweeper started: now, and again every minute (Temporal may be down at first, or the run terminated by an operator). */
export function keepStepSignalSweeperStarted(input: {
  client: Client;
  taskQueue: string;
  onError: (error: unknown) => void;
  everyMs?: number;
}): () => Promise<void> {
  return repeatEvery(
    () => startStepSignalSweeper(input.client, input.taskQueue),
    input.everyMs ?? 60_000,
    input.onError,
  );
}
