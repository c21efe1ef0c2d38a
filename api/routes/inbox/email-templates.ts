/**
 * Saved email templates (interface spec: Saved email template) and listEmailTemplates: the
 * workspace's reusable templates, newest first.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, UuidSchema } from '../../../domain/shared/common.js';
import { notFound } from '../../../domain/shared/errors.js';
import {
  EmailTemplateCreateSchema,
  EmailTemplateListSchema,
  EmailTemplateSchema,
  EmailTemplateUpdateSchema,
} from '../../../domain/inbox/email-templates.js';
import type { AppDeps } from '../../deps.js';
import {
  checkSegmentColumns,
  createTemplate,
  deleteTemplate,
  getTemplate,
  listTemplates,
  updateTemplate,
} from '../../../store/inbox/email-templates.js';
import { principalOf } from '../../plugins/auth.js';

const TemplateParamsSchema = z.object({ email_template_id: UuidSchema });
const tags = ['email-templates'];
const segmentRules =
  'A `builtin` segment names its `builtin` and a `column` segment its `column_id`; a column that is not in this workspace is 404.';

export const emailTemplateRoutes =
  ({ sql }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/sequences/templates/',
      {
        schema: {
          operationId: 'createEmailTemplate',
          tags,
          summary: 'Save an email template',
          description: segmentRules,
          body: EmailTemplateCreateSchema,
          response: {
            201: EmailTemplateSchema,
            404: DetailBodySchema.describe('A column segment names a column not in this workspace'),
            409: DetailBodySchema.describe('The workspace already keeps the most templates it may'),
          },
        },
      },
      async (request, reply) => {
        const { workspaceId } = principalOf(request);
        await checkSegmentColumns(sql, workspaceId, request.body);
        return reply.code(201).send(await createTemplate(sql, workspaceId, request.body));
      },
    );

    app.get(
      '/sequences/templates/',
      {
        schema: {
          operationId: 'listEmailTemplates',
          tags,
          summary: "The workspace's reusable email templates, newest first (endpoint 6)",
          description: 'Not paged: a workspace keeps at most 1000 templates and all of them are returned.',
          response: { 200: EmailTemplateListSchema },
        },
      },
      async (request) => ({ templates: await listTemplates(sql, principalOf(request).workspaceId) }),
    );

    app.get(
      '/sequences/templates/:email_template_id/',
      {
        schema: {
          operationId: 'readEmailTemplate',
          tags,
          summary: 'Read an email template',
          params: TemplateParamsSchema,
          response: { 200: EmailTemplateSchema },
        },
      },
      async (request) => {
        const template = await getTemplate(sql, principalOf(request).workspaceId, request.params.email_template_id);
        if (!template) throw notFound('Email template');
        return template;
      },
    );

    app.patch(
      '/sequences/templates/:email_template_id/',
      {
        schema: {
          operationId: 'updateEmailTemplate',
          tags,
          summary: 'Edit an email template; fields left out keep their value',
          description: `${segmentRules} Steps that use the template send what it says when they run; messages already written keep their text.`,
          params: TemplateParamsSchema,
          body: EmailTemplateUpdateSchema,
          response: { 200: EmailTemplateSchema },
        },
      },
      async (request) => {
        const { workspaceId } = principalOf(request);
        if (!(await getTemplate(sql, workspaceId, request.params.email_template_id))) throw notFound('Email template');
        await checkSegmentColumns(sql, workspaceId, request.body);
        const template = await updateTemplate(sql, workspaceId, request.params.email_template_id, request.body);
        if (!template) throw notFound('Email template');
        return template;
      },
    );

    app.delete(
      '/sequences/templates/:email_template_id/',
      {
        schema: {
          operationId: 'deleteEmailTemplate',
          tags,
          summary: 'Delete an email template',
          description:
            'A step still naming it waits for a person (reason `template_deleted`) when it next writes a message.',
          params: TemplateParamsSchema,
          response: { 204: z.null().describe('Deleted') },
        },
      },
      async (request, reply) => {
        if (!(await deleteTemplate(sql, principalOf(request).workspaceId, request.params.email_template_id)))
          throw notFound('Email template');
        return reply.code(204).send(null);
      },
    );
  };
