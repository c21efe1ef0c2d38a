/** Recurring import schedules (decision 042): Temporal Schedules, one per import. */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { notFound } from '../../../domain/shared/errors.js';
import {
  ImportScheduleCreateSchema,
  ImportScheduleListSchema,
  ImportScheduleSchema,
} from '../../../domain/sourcing/crm.js';
import {
  createImportSchedule,
  deleteImportSchedule,
  describeImportSchedule,
  pauseImportSchedule,
} from '../../../services/sourcing/schedules.js';
import { getImportSchedule, listImportSchedules } from '../../../store/sourcing/schedules.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

const tags = ['sourcing'];
const Params = z.object({ schedule_id: UuidSchema });
const missing = DetailBodySchema.describe("No import schedule with this id in the caller's workspace");

export const scheduleRoutes =
  ({ sql, temporal }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/import-schedules/',
      {
        schema: {
          operationId: 'createImportSchedule',
          tags,
          summary: 'Run an import on a schedule: each run reads only what changed since the last',
          description:
            'One schedule per import (a second is 409). A run due while the last one still runs is skipped; runs missed while the service was down are made up within the catch-up window.',
          body: ImportScheduleCreateSchema,
          response: {
            201: ImportScheduleSchema,
            404: DetailBodySchema.describe("No import with this id in the caller's workspace"),
            409: DetailBodySchema.describe('The import has a schedule already'),
          },
        },
      },
      async (request, reply) =>
        reply.code(201).send(await createImportSchedule(sql, temporal, principalOf(request), request.body)),
    );

    app.get(
      '/import-schedules/',
      {
        schema: {
          operationId: 'listImportSchedules',
          tags,
          summary: "The workspace's import schedules with their next run times",
          response: { 200: ImportScheduleListSchema },
        },
      },
      async (request) => ({
        schedules: await Promise.all(
          (await listImportSchedules(sql, principalOf(request).workspaceId)).map((row) =>
            describeImportSchedule(temporal, row),
          ),
        ),
      }),
    );

    app.get(
      '/import-schedules/:schedule_id/',
      {
        schema: {
          operationId: 'getImportSchedule',
          tags,
          summary: 'An import schedule with its next run times',
          params: Params,
          response: { 200: ImportScheduleSchema, 404: missing },
        },
      },
      async (request) => {
        const row = await getImportSchedule(sql, principalOf(request).workspaceId, request.params.schedule_id);
        if (!row) throw notFound('Import schedule');
        return describeImportSchedule(temporal, row);
      },
    );

    for (const [verb, paused] of [
      ['pause', true],
      ['resume', false],
    ] as const) {
      app.post(
        `/import-schedules/:schedule_id/${verb}/`,
        {
          schema: {
            operationId: verb === 'pause' ? 'pauseImportSchedule' : 'resumeImportSchedule',
            tags,
            summary: verb === 'pause' ? 'Pause the schedule: no run starts until it is resumed' : 'Resume the schedule',
            params: Params,
            response: { 200: ImportScheduleSchema, 404: missing },
          },
        },
        async (request) =>
          pauseImportSchedule(sql, temporal, principalOf(request).workspaceId, request.params.schedule_id, paused),
      );
    }

    app.delete(
      '/import-schedules/:schedule_id/',
      {
        schema: {
          operationId: 'deleteImportSchedule',
          tags,
          summary: 'Delete the schedule (the import stays)',
          params: Params,
          response: { 204: z.null().describe('Deleted'), 404: missing },
        },
      },
      async (request, reply) => {
        if (!(await deleteImportSchedule(sql, temporal, principalOf(request).workspaceId, request.params.schedule_id)))
          throw notFound('Import schedule');
        return reply.code(204).send(null);
      },
    );
  };
