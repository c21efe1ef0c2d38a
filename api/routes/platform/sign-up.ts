/** Signing up: the one route a signed-in person with no workspace yet reaches. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema } from '../../../domain/shared/common.js';
import { SignedUpSchema, SignUpSchema } from '../../../domain/platform/workspaces.js';
import { signUp } from '../../../services/platform/sign-up.js';
import type { AppDeps } from '../../deps.js';
import { identityOf } from '../../plugins/auth.js';

export const signUpRoutes =
  ({ sql, temporal, integrations }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.post(
      '/signup/',
      {
        config: { access: 'identity' },
        schema: {
          operationId: 'signUp',
          tags: ['workspace'],
          summary: 'Sign up a workspace (a bearer token of the identity provider)',
          description:
            'Creates a workspace on the free plan and makes the signed-in person its admin. The ' +
            'workspace stands for the token’s organisation, when it names one: its members then ' +
            'join on first use. A token with no organisation signs up one workspace of the ' +
            'person’s own. A second sign-up for the same organisation or person is a 409. ' +
            '`referral_code` and `affiliate_click_id` (or `affiliate_code`) attribute the workspace ' +
            'as the admin command line does. Takes only a bearer token: an API key stands for no person.',
          body: SignUpSchema,
          response: {
            201: SignedUpSchema,
            409: DetailBodySchema.describe('The organisation, or the person, already has a workspace'),
          },
        },
      },
      async (request, reply) => {
        const result = await signUp(
          {
            sql,
            temporal,
            cookieWindowDays: integrations.affiliates.cookieWindowDays,
            onError: (err, message) => request.log.warn({ err }, message),
          },
          identityOf(request),
          request.body,
        );
        return reply.code(201).send(result);
      },
    );
  };
