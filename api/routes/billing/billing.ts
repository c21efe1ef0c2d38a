/**
 * Billing (decision 037): the overview, invoices and payments, checkout for the plan or a credit
 * pack, the customer portal, and a downgrade at the period's end. Paths are ours. Without a payment
 * provider the money routes answer 503 naming what to set.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  BillingListQuerySchema,
  BillingOverviewSchema,
  CheckoutAnswerSchema,
  CheckoutRequestSchema,
  DowngradeAnswerSchema,
  InvoiceSchema,
  PaymentSchema,
  PortalAnswerSchema,
} from '../../../domain/billing/billing.js';
import { DetailBodySchema } from '../../../domain/shared/common.js';
import {
  billingInvoices,
  billingOverview,
  billingPayments,
  portalLink,
  scheduleDowngrade,
  startCheckout,
} from '../../../services/billing/billing.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';

const tags = ['billing'];
export const billingUnconfigured = DetailBodySchema.describe(
  'Billing is not configured on this service; the detail names the variables to set',
);
const providerFailed = DetailBodySchema.describe(
  'The payment provider refused or could not be reached; the detail says which',
);

export const billingRoutes =
  (deps: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const { sql } = deps;
    app.get(
      '/billing/',
      {
        schema: {
          operationId: 'readBilling',
          tags,
          summary:
            'The plan, its period and next invoice, the credit balance and what each period grants, and the catalogue of plans and packs',
          description: 'Answers whether or not a payment provider is configured (`billing_configured`).',
          response: { 200: BillingOverviewSchema },
        },
      },
      async (request) => billingOverview(deps, principalOf(request).workspaceId),
    );

    app.get(
      '/billing/invoices/',
      {
        schema: {
          operationId: 'listInvoices',
          tags,
          summary: "The workspace's invoices, newest first, amounts in integer cents",
          querystring: BillingListQuerySchema,
          response: { 200: z.object({ invoices: z.array(InvoiceSchema) }) },
        },
      },
      async (request) => ({
        invoices: await billingInvoices(sql, principalOf(request).workspaceId, request.query.limit),
      }),
    );

    app.get(
      '/billing/payments/',
      {
        schema: {
          operationId: 'listPayments',
          tags,
          summary:
            "The workspace's payments (subscription renewals and credit packs) with refunds and disputes, newest first",
          querystring: BillingListQuerySchema,
          response: { 200: z.object({ payments: z.array(PaymentSchema) }) },
        },
      },
      async (request) => ({
        payments: await billingPayments(sql, principalOf(request).workspaceId, request.query.limit),
      }),
    );

    app.post(
      '/billing/checkout/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'startCheckout',
          tags,
          summary:
            "A checkout link for the paid plan or a credit pack; the plan or the credits follow from the provider's events",
          body: CheckoutRequestSchema,
          response: {
            200: CheckoutAnswerSchema,
            409: DetailBodySchema.describe('Already on the paid plan'),
            502: providerFailed,
            503: billingUnconfigured,
          },
        },
      },
      async (request) => startCheckout(deps, principalOf(request).workspaceId, request.body.purchase, null),
    );

    app.post(
      '/billing/portal/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'openBillingPortal',
          tags,
          summary: "A link to the provider's customer portal (payment methods, invoices, cancel)",
          response: {
            200: PortalAnswerSchema,
            409: DetailBodySchema.describe('The workspace has not been to checkout yet'),
            502: providerFailed,
            503: billingUnconfigured,
          },
        },
      },
      async (request) => portalLink(deps, principalOf(request).workspaceId),
    );

    const downgradeErrors = {
      409: DetailBodySchema.describe(
        'Already free, already scheduled (or nothing to take back), or a paid plan an operator set',
      ),
      502: providerFailed,
      503: billingUnconfigured,
    };
    app.post(
      '/billing/downgrade/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'scheduleDowngrade',
          tags,
          summary: 'Downgrade to free at the end of the current period; until then the paid plan stays',
          response: { 200: DowngradeAnswerSchema, ...downgradeErrors },
        },
      },
      async (request) => scheduleDowngrade(deps, principalOf(request).workspaceId, true),
    );

    app.delete(
      '/billing/downgrade/',
      {
        config: { role: 'admin' },
        schema: {
          operationId: 'cancelDowngrade',
          tags,
          summary: 'Take back a scheduled downgrade: the paid plan keeps renewing',
          response: { 200: DowngradeAnswerSchema, ...downgradeErrors },
        },
      },
      async (request) => scheduleDowngrade(deps, principalOf(request).workspaceId, false),
    );
  };
