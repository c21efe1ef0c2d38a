/**
 * The payment provider's webhook (decision 037). Public: the Stripe-Signature header over the raw
 * body is the credential. A missing, wrong or stale signature is 400 and changes nothing; an event
 * handled before answers 200 with `duplicate: true` and changes nothing either. An event whose
 * payment could not be linked to its invoice (the provider unreachable) is 502 and changes nothing;
 * the provider delivers it again. The workspace's billing workflow is woken after the event's
 * transaction commits.
 */
import { validatorCompiler, type FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { WebhookAnswerSchema } from '../../../domain/billing/billing.js';
import { DetailBodySchema } from '../../../domain/shared/common.js';
import { ApiError } from '../../../domain/shared/errors.js';
import { PaymentProviderError, WebhookSignatureError } from '../../../integrations/payments/provider.js';
import { wakeWorkspaceBilling } from '../../../services/billing/billing-client.js';
import { paymentsOf } from '../../../services/billing/billing.js';
import { handleBillingEvent } from '../../../services/billing/events.js';
import { linkInvoicePayment } from '../../../services/billing/payment-links.js';
import { wakeCommissions } from '../../../services/affiliates/maturation.js';
import type { AppDeps } from '../../deps.js';
import { billingUnconfigured } from './billing.js';

/** Stripe's events are small; a body past this is not one. */
const webhookBytesMax = 1024 * 1024;

export const billingWebhookRoutes =
  (deps: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    // The signature is over the exact bytes: this scope keeps JSON bodies raw.
    app.removeContentTypeParser('application/json');
    app.addContentTypeParser(
      'application/json',
      { parseAs: 'buffer', bodyLimit: webhookBytesMax },
      (_request, body, done) => done(null, body),
    );

    app.post(
      '/billing/webhooks/stripe/',
      {
        config: { access: 'public' },
        bodyLimit: webhookBytesMax,
        validatorCompiler: (route) =>
          route.httpPart === 'body' ? (data: unknown) => ({ value: data }) : validatorCompiler(route as never),
        schema: {
          operationId: 'receiveStripeEvent',
          tags: ['billing'],
          summary:
            "Receive one of Stripe's events (checkout, invoices, subscriptions, refunds, disputes), verified by its signature",
          description:
            'Not API-key authenticated: `Stripe-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>" with STRIPE_WEBHOOK_SECRET>`, ' +
            'at most 300 s old. Each event id is handled once, in any order: a redelivery answers `duplicate: true` and changes nothing.',
          headers: z.object({ 'stripe-signature': z.string().optional() }),
          response: {
            200: WebhookAnswerSchema,
            400: DetailBodySchema.describe(
              'The signature is missing, wrong or stale, or the body is not an event; nothing changed',
            ),
            413: DetailBodySchema,
            502: DetailBodySchema.describe(
              "The provider could not be asked which invoice the event's payment belongs to; nothing changed, and the provider delivers the event again",
            ),
            503: billingUnconfigured,
          },
        },
      },
      async (request) => {
        const { provider } = paymentsOf(deps.integrations);
        const raw = Buffer.isBuffer(request.body)
          ? request.body
          : Buffer.from(typeof request.body === 'string' ? request.body : '');
        let parsed;
        try {
          parsed = provider.parseWebhook(raw, request.headers['stripe-signature']);
        } catch (error) {
          if (error instanceof WebhookSignatureError)
            throw new ApiError('bad_request', `Webhook signature refused: ${error.message}`);
          throw new ApiError(
            'bad_request',
            `The body is not an event this service can read: ${error instanceof Error ? error.message.slice(0, 300) : String(error)}`,
          );
        }
        const event = await linkInvoicePayment(deps.sql, provider, parsed).catch((error: unknown) => {
          if (error instanceof PaymentProviderError)
            throw new ApiError(
              'bad_gateway',
              `The event's payment could not be linked to its invoice: ${error.message}`,
            );
          throw error;
        });
        const result = await handleBillingEvent(deps.sql, event, deps.integrations.affiliates);
        if (result.affiliateCommissionIds.length > 0) {
          // After the commit, only maturation shards that would not look in time (decision 047); a lost wake is caught by the worker's sweeper.
          await wakeCommissions(
            deps.temporal.client,
            deps.temporal.taskQueue,
            deps.sql,
            result.affiliateCommissionIds,
            event.kind === 'dispute' ? 'dispute' : event.kind === 'charge_refunded' ? 'refund' : 'created',
          ).catch((error: unknown) => request.log.warn({ err: error }, 'commission maturations not woken'));
        }
        if (!result.duplicate && result.workspaceId) {
          // After the commit; a lost wake is caught up by the workflow's own timer.
          await wakeWorkspaceBilling(deps.temporal.client, deps.temporal.taskQueue, deps.sql, result.workspaceId).catch(
            (error: unknown) =>
              request.log.warn({ err: error, workspaceId: result.workspaceId }, 'billing workflow not woken'),
          );
        }
        return { received: true as const, duplicate: result.duplicate, outcome: result.outcome };
      },
    );
  };
