/**
 * Affiliate payouts (decision 044; interface spec: Affiliate program, Affiliate payout status, Next
 * payout status): the workspace's payouts, and its payout settings with the gate's answer
 * (`next_payout_status`, `next_payout_blocker`, ...) from the same function the payout cycle
 * applies. The cycle itself runs on a Temporal Schedule; operators pause the program and set
 * review, block, identity and destination holds from the admin command line.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { PageQuerySchema } from '../../../domain/affiliates/affiliates.js';
import { PayoutSchema, PayoutSettingsSchema, PayoutSettingsUpdateSchema } from '../../../domain/affiliates/payouts.js';
import { DetailBodySchema } from '../../../domain/shared/common.js';
import { listPayouts, readPayoutSettings, updatePayoutSettings } from '../../../services/affiliates/payouts.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

const PayoutPageSchema = z
  .object({
    payouts: z.array(PayoutSchema),
    next_offset: z.int().nullable().describe('The offset of the next page; null on the last'),
  })
  .meta({ id: 'AffiliatePayoutPage' });
const notEnrolled = DetailBodySchema.describe('The workspace is not enrolled in the affiliate program');

export const affiliatePayoutRoutes =
  (deps: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    app.get(
      '/affiliate/payouts/',
      {
        schema: {
          operationId: 'listAffiliatePayouts',
          tags: ['affiliates'],
          summary: "The affiliate's payouts, newest first: one per period (the UTC month of the cycle that made it)",
          description:
            'Statuses: `held` (made, its money off the balance, not yet accepted by PayPal), `created` (accepted, pending), `paid`, `unclaimed` (the receiver has no PayPal account yet), `returned` (unclaimed for 30 days; the money is back on the balance) and `failed` (the money is back on the balance).',
          querystring: PageQuerySchema,
          response: { 200: PayoutPageSchema, 404: notEnrolled },
        },
      },
      async (request) => listPayouts(deps.sql, principalOf(request).workspaceId, request.query),
    );

    app.get(
      '/affiliate/payout-settings/',
      {
        schema: {
          operationId: 'readAffiliatePayoutSettings',
          tags: ['affiliates'],
          summary: 'Where payouts go, the gates on them, and what the next payout cycle will do',
          response: { 200: PayoutSettingsSchema, 404: notEnrolled },
        },
      },
      async (request) =>
        readPayoutSettings(deps.sql, principalOf(request).workspaceId, deps.integrations.affiliatePayouts),
    );

    app.put(
      '/affiliate/payout-settings/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'updateAffiliatePayoutSettings',
          tags: ['affiliates'],
          summary:
            'Set the payout email (a PayPal account); a different address lifts a hold left by a returned or failed payout',
          body: PayoutSettingsUpdateSchema,
          response: { 200: PayoutSettingsSchema, 404: notEnrolled },
        },
      },
      async (request) =>
        updatePayoutSettings(
          deps.sql,
          principalOf(request).workspaceId,
          request.body,
          deps.integrations.affiliatePayouts,
        ),
    );
  };
