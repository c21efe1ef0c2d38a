/**
 * Pausing a contact or a sequence for the pnet channel: its steps are held (`held: true`), listed
 * only on the dashboard queue and never handed to a browser, until the hold is deleted.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { UuidSchema } from '../../../domain/shared/common.js';
import { notFound } from '../../../domain/shared/errors.js';
import {
  StepHoldCreateSchema,
  StepHoldListSchema,
  StepHoldReleaseSchema,
  StepHoldSchema,
} from '../../../domain/pnet/holds.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import { createHold, listHolds, releaseHold } from '../../../store/pnet/holds.js';

const tags = ['pnet-steps'];

export const pnetHoldRoutes =
  ({ sql }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/pnet/holds/',
      {
        schema: {
          operationId: 'createStepHold',
          tags,
          summary: 'Pause a contact or a sequence: its waiting steps are held out of every browser’s line',
          description:
            'Answers 201 with the new hold, or 200 with the existing one when that contact or sequence is already paused. A running step finishes; it is held if it comes back in line.',
          body: StepHoldCreateSchema,
          response: { 200: StepHoldSchema, 201: StepHoldSchema },
        },
      },
      async (request, reply) => {
        const { created, hold } = await createHold(sql, principalOf(request).workspaceId, request.body);
        return reply.code(created ? 201 : 200).send(hold);
      },
    );

    app.get(
      '/pnet/holds/',
      {
        schema: {
          operationId: 'listStepHolds',
          tags,
          summary: 'Paused contacts and sequences, oldest first',
          response: { 200: StepHoldListSchema },
        },
      },
      async (request) => ({ holds: await listHolds(sql, principalOf(request).workspaceId) }),
    );

    app.delete(
      '/pnet/holds/:hold_id/',
      {
        schema: {
          operationId: 'releaseStepHold',
          tags,
          summary: 'Resume a paused contact or sequence: its steps go back in line unless another hold covers them',
          params: z.object({ hold_id: UuidSchema }),
          response: { 200: StepHoldReleaseSchema },
        },
      },
      async (request) => {
        const released = await releaseHold(sql, principalOf(request).workspaceId, request.params.hold_id);
        if (!released) throw notFound('Hold');
        return released;
      },
    );
  };
