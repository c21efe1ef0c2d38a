/** Sender profiles and their pnet account: readSenderPnetAccount and the account's settings and limits. */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { notFound } from '../../../domain/shared/errors.js';
import { PnetAccountWrapperSchema } from '../../../domain/pnet/accounts.js';
import {
  PnetSettingsSchema,
  PnetSettingsUpdateSchema,
  SenderProfileCreateSchema,
  SenderProfileListSchema,
  SenderProfileSchema,
} from '../../../domain/pnet/sender-profiles.js';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { cancelStepUpdate } from '../../../workflows/pnet/browser-step.contract.js';
import { updateStep } from '../../../services/pnet/browser-step-client.js';
import { wakeSenderAccount } from '../../../services/pnet/sender-profiles.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import {
  createSenderProfile,
  disconnectAccount,
  getPnetSettings,
  getSenderProfile,
  listSenderProfiles,
  readPnetWrapper,
  updatePnetSettings,
} from '../../../store/pnet/accounts.js';

const ProfileParamsSchema = z.object({ profile_id: UuidSchema });
const tags = ['sender-profiles'];

export const senderProfileRoutes =
  ({ sql, temporal }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/sender-profiles/',
      {
        schema: {
          operationId: 'createSenderProfile',
          tags,
          summary: 'Create a sender profile (a person or brand who sends) with its pnet account',
          body: SenderProfileCreateSchema,
          response: { 201: SenderProfileSchema, 409: DetailBodySchema },
        },
      },
      async (request, reply) => {
        const profile = await createSenderProfile(sql, principalOf(request).workspaceId, request.body);
        // The profile is committed; a start lost here is made good by the next settings change.
        await wakeSenderAccount({ sql, temporal }, profile.id).catch((err: unknown) =>
          request.log.warn({ err }, 'could not start the account workflow'),
        );
        return reply.code(201).send(profile);
      },
    );

    app.get(
      '/sender-profiles/',
      {
        schema: {
          operationId: 'listSenderProfiles',
          tags,
          summary: 'List sender profiles, oldest first',
          response: { 200: SenderProfileListSchema },
        },
      },
      async (request) => ({ sender_profiles: await listSenderProfiles(sql, principalOf(request).workspaceId) }),
    );

    app.get(
      '/sender-profiles/:profile_id/',
      {
        schema: {
          operationId: 'readSenderProfile',
          tags,
          summary: 'Read a sender profile',
          params: ProfileParamsSchema,
          response: { 200: SenderProfileSchema },
        },
      },
      async (request) => {
        const profile = await getSenderProfile(sql, principalOf(request).workspaceId, request.params.profile_id);
        if (!profile) throw notFound('Sender profile');
        return profile;
      },
    );

    app.get(
      '/sender-profiles/:profile_id/pnet/',
      {
        schema: {
          operationId: 'readSenderPnetAccount',
          tags,
          summary:
            "The sender's pnet account: connection token, state, sessions, usage and what it waits on (endpoint 8)",
          description:
            'Not connected is a normal state, not a 404. The connection token is present either way and connects a second browser too.',
          params: ProfileParamsSchema,
          response: { 200: PnetAccountWrapperSchema },
        },
      },
      async (request) => {
        const wrapper = await readPnetWrapper(sql, principalOf(request).workspaceId, request.params.profile_id);
        if (!wrapper) throw notFound('Sender profile');
        return wrapper;
      },
    );

    app.post(
      '/sender-profiles/:profile_id/pnet/disconnect/',
      {
        schema: {
          operationId: 'disconnectSenderPnetAccount',
          tags,
          summary: 'Disconnect the account so another identity can connect; waiting steps end `sender_changed`',
          description:
            'The identity, browser sessions and lease are dropped and the connection token is replaced (the old browsers can no longer check in). ' +
            'Steps still waiting or on the Tasks page were meant for the old sender: they settle failed with `sender_changed` and their credits are returned. ' +
            'A step already running finishes or lapses as usual.',
          params: ProfileParamsSchema,
          response: { 200: PnetAccountWrapperSchema },
        },
      },
      async (request) => {
        const { workspaceId } = principalOf(request);
        const waiting = await disconnectAccount(sql, workspaceId, request.params.profile_id);
        if (!waiting) throw notFound('Sender profile');
        for (const step of waiting) {
          await updateStep({ ...temporal, sql }, step, cancelStepUpdate, `sender-changed:${step.id}`, [
            { errorCode: 'sender_changed' },
          ]).catch((error: unknown) => {
            // A step claimed or settled meanwhile is refused by its workflow: it ends its own way.
            if (!(error instanceof WorkflowUpdateFailedError)) throw error;
          });
        }
        return (await readPnetWrapper(sql, workspaceId, request.params.profile_id))!;
      },
    );

    app.get(
      '/sender-profiles/:profile_id/pnet/settings/',
      {
        schema: {
          operationId: 'readPnetSettings',
          tags,
          summary: "The account's limits, their maximums, time zone, working hours, pacing and run mode",
          params: ProfileParamsSchema,
          response: { 200: PnetSettingsSchema },
        },
      },
      async (request) => {
        const settings = await getPnetSettings(sql, principalOf(request).workspaceId, request.params.profile_id);
        if (!settings) throw notFound('Sender profile');
        return settings;
      },
    );

    app.patch(
      '/sender-profiles/:profile_id/pnet/settings/',
      {
        schema: {
          operationId: 'updatePnetSettings',
          tags,
          summary: 'Change limits (each at most its maximum), time zone, working hours, pacing or run mode',
          params: ProfileParamsSchema,
          body: PnetSettingsUpdateSchema,
          response: { 200: PnetSettingsSchema },
        },
      },
      async (request) => {
        const settings = await updatePnetSettings(
          sql,
          principalOf(request).workspaceId,
          request.params.profile_id,
          request.body,
        );
        if (!settings) throw notFound('Sender profile');
        await wakeSenderAccount({ sql, temporal }, request.params.profile_id);
        return settings;
      },
    );
  };
