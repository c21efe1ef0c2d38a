/**
 * The workspace do-not-contact list (the interface spec's What the service does): single and bulk
 * add, list, delete, and a check of one email or profile URL. Sends obey the list through
 * contact_stop_reason() in their own transaction; adding an entry also wakes matching sequence
 * contacts so they stop now.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema, ValidationBodySchema } from '../../../domain/shared/common.js';
import {
  DncBulkCreateSchema,
  DncBulkResultSchema,
  DncCheckQuerySchema,
  DncCheckSchema,
  DncCreateSchema,
  DncEntrySchema,
  DncListQuerySchema,
  DncListSchema,
} from '../../../domain/inbox/do-not-contact.js';
import { notFound } from '../../../domain/shared/errors.js';
import type { AppDeps } from '../../deps.js';
import {
  addEntries,
  deleteEntry,
  getEntry,
  listEntries,
  matchingEntries,
} from '../../../store/inbox/do-not-contact.js';
import { principalOf } from '../../plugins/auth.js';
import { ValidationRefusal } from '../../../domain/shared/errors.js';
import { wakeForEntries } from '../../../services/inbox/do-not-contact.js';
import { actorOf } from '../../request-actor.js';

const tags = ['do-not-contact'];
const EntryParamsSchema = z.object({ entry_id: UuidSchema });

export const doNotContactRoutes =
  (deps: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const { sql } = deps;

    app.post(
      '/do-not-contact/',
      {
        schema: {
          operationId: 'addDoNotContact',
          tags,
          summary: 'Add one email, domain or profile URL to the do-not-contact list',
          description:
            'Answers 201 with the new entry, or 200 with the entry already listed (adding twice is harmless). Every sequence stops reaching a listed person before its next send.',
          body: DncCreateSchema,
          response: { 200: DncEntrySchema, 201: DncEntrySchema, 422: ValidationBodySchema },
        },
      },
      async (request, reply) => {
        const { workspaceId } = principalOf(request);
        const result = await addEntries(sql, workspaceId, [request.body], {
          reason: request.body.reason,
          source: 'manual',
          createdBy: actorOf(request),
        });
        const [one] = result.results;
        if (!one?.entry) {
          throw new ValidationRefusal([
            {
              loc: ['body', 'value'],
              msg: one?.detail ?? 'is invalid',
              type: 'value_error',
              input: request.body.value,
            },
          ]);
        }
        wakeForEntries(deps, request.log, workspaceId, result);
        return reply.code(one.status === 'added' ? 201 : 200).send(one.entry);
      },
    );

    app.post(
      '/do-not-contact/bulk/',
      {
        schema: {
          operationId: 'addDoNotContactBulk',
          tags,
          summary: 'Add up to 1000 emails, domains and profile URLs at once, each with its own result',
          description:
            'An unreadable value is reported as `invalid` in its own result and never sinks the others; one already listed reads `exists`.',
          body: DncBulkCreateSchema,
          response: { 200: DncBulkResultSchema },
        },
      },
      async (request) => {
        const { workspaceId } = principalOf(request);
        const result = await addEntries(sql, workspaceId, request.body.entries, {
          reason: request.body.reason,
          source: 'import',
          createdBy: actorOf(request),
        });
        wakeForEntries(deps, request.log, workspaceId, result);
        return result;
      },
    );

    app.get(
      '/do-not-contact/',
      {
        schema: {
          operationId: 'listDoNotContact',
          tags,
          summary: 'The do-not-contact list, newest first, filtered by kind and by text',
          querystring: DncListQuerySchema,
          response: { 200: DncListSchema },
        },
      },
      async (request) => listEntries(sql, principalOf(request).workspaceId, request.query),
    );

    app.get(
      '/do-not-contact/check/',
      {
        schema: {
          operationId: 'checkDoNotContact',
          tags,
          summary:
            'Whether an email (itself or its domain) or a profile URL is on the list, and which entries block it',
          querystring: DncCheckQuerySchema,
          response: { 200: DncCheckSchema },
        },
      },
      async (request) => {
        const matches = await matchingEntries(sql, principalOf(request).workspaceId, {
          email: request.query.email,
          profileUrl: request.query.profile_url,
        });
        return { blocked: matches.length > 0, matches };
      },
    );

    app.get(
      '/do-not-contact/:entry_id/',
      {
        schema: {
          operationId: 'readDoNotContact',
          tags,
          summary: 'Read one entry',
          params: EntryParamsSchema,
          response: { 200: DncEntrySchema, 404: DetailBodySchema },
        },
      },
      async (request) => {
        const entry = await getEntry(sql, principalOf(request).workspaceId, request.params.entry_id);
        if (!entry) throw notFound('Entry');
        return entry;
      },
    );

    app.delete(
      '/do-not-contact/:entry_id/',
      {
        schema: {
          operationId: 'deleteDoNotContact',
          tags,
          summary: 'Take an entry off the list',
          params: EntryParamsSchema,
          response: { 204: z.null().describe('Deleted'), 404: DetailBodySchema },
        },
      },
      async (request, reply) => {
        if (!(await deleteEntry(sql, principalOf(request).workspaceId, request.params.entry_id)))
          throw notFound('Entry');
        return reply.code(204).send(null);
      },
    );
  };
