/**
 * Person-side operations on browser steps (interface spec: Browser action step): queue, list, read,
 * cancel, and the Tasks page's approve and reject. Transitions are Updates of the step's workflow
 * with a stable update id, so a retried request is answered once; a step already past the
 * transition answers 409.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { findStep, toBrowserStep, toTask } from '../../../store/pnet/steps.js';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { ApiError, notFound } from '../../../domain/shared/errors.js';
import {
  BrowserStepSchema,
  StepListQuerySchema,
  StepListSchema,
  StepQueueSchema,
  TaskListSchema,
  TaskRejectSchema,
  TaskSchema,
} from '../../../domain/pnet/steps.js';
import { StepAttemptListSchema } from '../../../domain/pnet/running.js';
import {
  approveStepUpdate,
  cancelStepUpdate,
  rejectStepUpdate,
  retryStepUpdate,
} from '../../../workflows/pnet/browser-step.contract.js';
import { startStepWorkflow, updateStep } from '../../../services/pnet/browser-step-client.js';
import { liveStep } from '../../../services/pnet/live-step.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { listAttempts } from '../../../store/pnet/running.js';
import { accountRunMode, insertStep, listSteps, listTasks } from '../../../store/pnet/step-queue.js';

const tags = ['pnet-steps'];
const StepParamsSchema = z.object({ step_id: UuidSchema });
const TaskParamsSchema = z.object({ task_id: UuidSchema });

export const pnetStepRoutes =
  ({ sql, temporal }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/pnet/steps/',
      {
        schema: {
          operationId: 'queueStep',
          tags,
          summary: 'Queue a step for a contact; in manual mode it waits on the Tasks page first',
          description:
            "Answers 201 with the queued step, or 202 with the task when the account runs in manual mode. A test step (`test: true`) is unmetered and skips the Tasks page. A queued step's price is set aside from the workspace's credits at once (charged only on success); too few credits is 409 with nothing queued. A task is priced when approved.",
          body: StepQueueSchema,
          response: {
            201: BrowserStepSchema,
            202: TaskSchema,
            404: DetailBodySchema,
            409: DetailBodySchema.describe("Not enough credits to set the step's price aside; nothing was queued"),
          },
        },
      },
      async (request, reply) => {
        const { workspaceId } = principalOf(request);
        const runMode = await accountRunMode(sql, workspaceId, request.body.account_id);
        if (!runMode) throw notFound('Account');
        const row = await insertStep(sql, workspaceId, request.body, runMode);
        // The row is committed first; a start lost here is made good by the next update-with-start.
        await startStepWorkflow({ ...temporal, sql }, row);
        return row.status === 'awaiting_approval'
          ? reply.code(202).send(toTask(row))
          : reply.code(201).send(toBrowserStep(row));
      },
    );

    app.get(
      '/pnet/steps/',
      {
        schema: {
          operationId: 'listSteps',
          tags,
          summary: 'Steps, newest first, filtered by status, kind, account and held',
          querystring: StepListQuerySchema,
          response: { 200: StepListSchema },
        },
      },
      async (request) => listSteps(sql, principalOf(request).workspaceId, request.query),
    );

    app.get(
      '/pnet/steps/:step_id/',
      {
        schema: {
          operationId: 'readStep',
          tags,
          summary: 'Read a step',
          params: StepParamsSchema,
          response: { 200: BrowserStepSchema },
        },
      },
      async (request) => {
        const row = await findStep(sql, request.params.step_id, principalOf(request).workspaceId);
        if (!row || row.status === 'awaiting_approval') throw notFound('Step');
        return toBrowserStep(row);
      },
    );

    app.get(
      '/pnet/steps/:step_id/attempts/',
      {
        schema: {
          operationId: 'listStepAttempts',
          tags,
          summary: 'Runs of a step cut off without an error or given back by the browser; none counted against it',
          params: StepParamsSchema,
          response: { 200: StepAttemptListSchema },
        },
      },
      async (request) => {
        const row = await findStep(sql, request.params.step_id, principalOf(request).workspaceId);
        if (!row || row.status === 'awaiting_approval') throw notFound('Step');
        return { attempts: await listAttempts(sql, row.id) };
      },
    );

    app.post(
      '/pnet/steps/:step_id/cancel/',
      {
        schema: {
          operationId: 'cancelStep',
          tags,
          summary: 'Cancel a step before a browser claims it; it settles failed with error_code cancelled',
          params: StepParamsSchema,
          response: { 200: BrowserStepSchema, 409: DetailBodySchema },
        },
      },
      async (request) => {
        const row = await liveStep({ sql }, principalOf(request).workspaceId, request.params.step_id, 'Step');
        return (
          await updateStep({ ...temporal, sql }, row, cancelStepUpdate, `cancel:${row.id}`, [
            { errorCode: 'cancelled' },
          ])
        ).step;
      },
    );

    app.post(
      '/pnet/steps/:step_id/retry/',
      {
        schema: {
          operationId: 'retryStep',
          tags,
          summary:
            'Retry a failed step; one that may have acted comes back resuming and is handed only to a browser that checks first',
          params: StepParamsSchema,
          response: { 200: BrowserStepSchema, 409: DetailBodySchema },
        },
      },
      async (request) => {
        const row = await findStep(sql, request.params.step_id, principalOf(request).workspaceId);
        if (!row || row.status === 'awaiting_approval') throw notFound('Step');
        if (row.status !== 'failed')
          throw new ApiError('conflict', `The step is ${row.status}; only a failed step can be retried.`);
        // One retry per failure: the finish time names it, so requests racing on it are answered once.
        const updateId = `retry:${row.id}:${row.finished_at?.toISOString()}`;
        return (await updateStep({ ...temporal, sql }, row, retryStepUpdate, updateId, [])).step;
      },
    );

    app.get(
      '/pnet/tasks/',
      {
        schema: {
          operationId: 'listTasks',
          tags,
          summary: 'Steps waiting for a person (the Tasks page), oldest first',
          response: { 200: TaskListSchema },
        },
      },
      async (request) => ({ tasks: await listTasks(sql, principalOf(request).workspaceId) }),
    );

    app.post(
      '/pnet/tasks/:task_id/approve/',
      {
        schema: {
          operationId: 'approveTask',
          tags,
          summary: 'Approve a task: the step is queued for a browser',
          params: TaskParamsSchema,
          response: { 200: BrowserStepSchema, 409: DetailBodySchema },
        },
      },
      async (request) => {
        const row = await liveStep({ sql }, principalOf(request).workspaceId, request.params.task_id, 'Task');
        return (await updateStep({ ...temporal, sql }, row, approveStepUpdate, `approve:${row.id}`, [])).step;
      },
    );

    app.post(
      '/pnet/tasks/:task_id/reject/',
      {
        schema: {
          operationId: 'rejectTask',
          tags,
          summary: 'Reject a task with an optional reason (at most 200 characters)',
          params: TaskParamsSchema,
          body: TaskRejectSchema,
          response: { 200: BrowserStepSchema, 409: DetailBodySchema },
        },
      },
      async (request) => {
        const row = await liveStep({ sql }, principalOf(request).workspaceId, request.params.task_id, 'Task');
        return (
          await updateStep({ ...temporal, sql }, row, rejectStepUpdate, `reject:${row.id}`, [
            { reason: request.body.reason },
          ])
        ).step;
      },
    );
  };
