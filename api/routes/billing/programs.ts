/**
 * The referral and design-partner programs (decision 037). A referral link's code attributes a new
 * workspace once; both sides' credits come when it first pays. A design-partner application is
 * decided by an operator (admin command line); while accepted its benefit is granted each period.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DesignPartnerApplySchema, DesignPartnerSchema, ReferralsSchema } from '../../../domain/billing/billing.js';
import { DetailBodySchema } from '../../../domain/shared/common.js';
import { applyForDesignPartner, designPartner, referrals } from '../../../services/billing/billing.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

export const billingProgramRoutes =
  (deps: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/referrals/',
      {
        schema: {
          operationId: 'readReferrals',
          tags: ['billing'],
          summary:
            "The workspace's referral code and link, the reward, and how many workspaces it referred and was rewarded for",
          response: { 200: ReferralsSchema },
        },
      },
      async (request) => referrals(deps, principalOf(request).workspaceId),
    );

    app.get(
      '/design-partner/',
      {
        schema: {
          operationId: 'readDesignPartner',
          tags: ['billing'],
          summary: "The workspace's design-partner application and its benefit (`not_applied` when there is none)",
          response: { 200: DesignPartnerSchema },
        },
      },
      async (request) => designPartner(deps.sql, principalOf(request).workspaceId),
    );

    app.post(
      '/design-partner/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'applyDesignPartner',
          tags: ['billing'],
          summary: 'Apply to the design-partner program; an operator accepts or declines',
          description: 'A workspace may apply again once its application was declined or ended.',
          body: DesignPartnerApplySchema,
          response: {
            201: DesignPartnerSchema,
            409: DetailBodySchema.describe('An application is pending or accepted'),
          },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        return reply
          .code(201)
          .send(await applyForDesignPartner(deps.sql, principal.workspaceId, principal.memberId, request.body));
      },
    );
  };
