/** The onboarding checklist: read, and dismiss or restore it for the member asking. Paths are ours. */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema } from '../../../domain/shared/common.js';
import { ApiError } from '../../../domain/shared/errors.js';
import { OnboardingChecklistSchema, onboardingChecklist } from '../../../domain/onboarding/checklist.js';
import {
  dismissOnboarding,
  readOnboardingDismissal,
  readOnboardingFacts,
  restoreOnboarding,
} from '../../../store/onboarding/facts.js';
import type { AppDeps } from '../../deps.js';
import { principalOf, type Principal } from '../../plugins/auth.js';
import type { Sql } from '../../../db/sql.js';

const tags = ['onboarding'];

async function checklistFor(sql: Sql, principal: Principal) {
  const [facts, dismissedAt] = await Promise.all([
    readOnboardingFacts(sql, principal.workspaceId),
    readOnboardingDismissal(sql, principal.workspaceId, principal.memberId),
  ]);
  return onboardingChecklist(facts, dismissedAt);
}

function memberOf(principal: Principal): string {
  if (!principal.memberId)
    throw new ApiError(
      'forbidden',
      'This credential acts for no member (its key outlived the member who made it), so there is no one to dismiss the checklist for.',
    );
  return principal.memberId;
}

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
      async (request) => checklistFor(sql, principalOf(request)),
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
      async (request) => {
        const principal = principalOf(request);
        await dismissOnboarding(sql, principal.workspaceId, memberOf(principal));
        return checklistFor(sql, principal);
      },
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
      async (request) => {
        const principal = principalOf(request);
        await restoreOnboarding(sql, principal.workspaceId, memberOf(principal));
        return checklistFor(sql, principal);
      },
    );
  };
