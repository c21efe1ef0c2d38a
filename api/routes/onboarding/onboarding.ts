/** The onboarding checklist: read, and dismiss or restore it for the member asking. Paths are ours. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema } from '../../../domain/shared/common.js';
import { OnboardingChecklistSchema } from '../../../domain/onboarding/checklist.js';
import { dismissChecklist, readChecklist, restoreChecklist } from '../../../services/onboarding/checklist.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

const tags = ['onboarding'];

export const onboardingRoutes =
  ({ sql }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/onboarding/',
      {
        schema: {
          operationId: 'readOnboarding',
          tags,
          summary:
            "The onboarding checklist: each step done or not, and when, from the workspace's own state; and whether the member asking dismissed it",
          response: { 200: OnboardingChecklistSchema },
        },
      },
      async (request) => readChecklist({ sql }, principalOf(request)),
    );

    app.post(
      '/onboarding/dismiss/',
      {
        schema: {
          operationId: 'dismissOnboarding',
          tags,
          summary:
            'Dismiss the checklist for the member asking (others still see it); dismissing again changes nothing',
          response: {
            200: OnboardingChecklistSchema,
            403: DetailBodySchema.describe(
              'The credential acts for no member (a key that outlived its maker), or may not write',
            ),
          },
        },
      },
      async (request) => dismissChecklist({ sql }, principalOf(request)),
    );

    app.post(
      '/onboarding/restore/',
      {
        schema: {
          operationId: 'restoreOnboarding',
          tags,
          summary: 'Bring the checklist back for the member asking',
          response: {
            200: OnboardingChecklistSchema,
            403: DetailBodySchema.describe(
              'The credential acts for no member (a key that outlived its maker), or may not write',
            ),
          },
        },
      },
      async (request) => restoreChecklist({ sql }, principalOf(request)),
    );
  };
