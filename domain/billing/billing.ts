/**
 * Billing's API shapes (decision 037): the overview, invoices, payments, checkout, referrals,
 * design partners. Money is integer cents with a currency.
 */
import { z } from 'zod';
import { CreditBalanceSchema } from '../platform/credits.js';
import { PlanSchema, queryInteger, textSchema, TimestampSchema } from '../shared/common.js';
import { CreditPackIdSchema } from './catalogue.js';

const cents = z.int().min(0).describe('An amount of money in the smallest unit of its currency (cents), never a float');
const currency = z
  .string()
  .regex(/^[a-z]{3}$/)
  .describe('ISO 4217 code, lower case');

export const BillingOverviewSchema = z
  .object({
    plan: PlanSchema,
    billing_configured: z
      .boolean()
      .describe(
        'A payment provider is configured; without one, an operator sets plans and grants credits (admin command line)',
      ),
    subscription_status: z
      .string()
      .nullable()
      .describe(
        "The provider's subscription status (`active`, `past_due`, `canceled`, ...), null without a subscription",
      ),
    current_period_end: TimestampSchema.nullable().describe("When the subscription's current period ends"),
    cancel_at_period_end: z.boolean().describe('A downgrade is scheduled: the paid plan ends at `current_period_end`'),
    payment_failed_at: TimestampSchema.nullable(),
    grace_ends_at: TimestampSchema.nullable().describe(
      'After a failed renewal the paid plan is kept until then, then the workspace goes free unless an invoice is paid',
    ),
    next_invoice: z
      .object({ amount_cents: cents, currency, due_at: TimestampSchema })
      .nullable()
      .describe("The plan's next renewal, null when nothing renews (free, or a downgrade scheduled)"),
    credits: CreditBalanceSchema,
    grant_period: z
      .object({ start: TimestampSchema, end: TimestampSchema })
      .describe('The current monthly grant period'),
    grants_per_period: z
      .object({ plan: z.int(), design_partner: z.int(), total: z.int() })
      .describe("Credits granted at the start of each monthly period: the plan's and the design-partner benefit's"),
    plans: z.array(z.object({ plan: PlanSchema, monthly_price_cents: cents, currency, monthly_credits: z.int() })),
    packs: z.array(z.object({ pack: CreditPackIdSchema, credits: z.int(), price_cents: cents, currency })),
  })
  .meta({ id: 'BillingOverview' });

export const InvoiceSchema = z
  .object({
    id: z.string(),
    status: z.enum(['open', 'paid', 'payment_failed', 'void', 'uncollectible']),
    amount_due_cents: cents,
    amount_paid_cents: cents,
    currency,
    period_start: TimestampSchema.nullable(),
    period_end: TimestampSchema.nullable(),
    hosted_invoice_url: z.string().nullable(),
    created_at: TimestampSchema,
    paid_at: TimestampSchema.nullable(),
  })
  .meta({ id: 'Invoice' });

export const PaymentSchema = z
  .object({
    id: z.string().describe("The provider's payment (a payment intent), or the invoice's id when it names none"),
    purpose: z.enum(['subscription', 'credit_pack']),
    invoice_id: z.string().nullable(),
    pack: z.string().nullable(),
    credits: z.int().describe('Credits the payment bought (a pack), 0 for a subscription'),
    amount_cents: cents,
    refunded_cents: cents,
    currency,
    credits_taken_back: z.int().describe('Credits of the pack taken back by refunds and disputes'),
    dispute_status: z.enum(['open', 'won', 'lost']).nullable(),
    created_at: TimestampSchema,
  })
  .meta({ id: 'Payment' });

export const BillingListQuerySchema = z.object({ limit: queryInteger(z.int().min(1).max(100).default(20)) });

export const CheckoutRequestSchema = z
  .object({
    purchase: z.union([z.literal('plan'), CreditPackIdSchema]).describe('`plan` to upgrade to paid, or a credit pack'),
  })
  .strict();

export const CheckoutAnswerSchema = z.object({
  url: z.string().describe("The provider's checkout page; the plan or the credits follow from its events"),
  session_id: z.string(),
  expires_at: TimestampSchema.nullable(),
});

export const PortalAnswerSchema = z.object({
  url: z.string().describe("The provider's customer portal: payment methods, invoices, cancel"),
});

export const DowngradeAnswerSchema = z.object({
  detail: z.string(),
  cancel_at_period_end: z.boolean(),
  current_period_end: TimestampSchema.nullable(),
});

export const WebhookAnswerSchema = z.object({
  received: z.literal(true),
  duplicate: z.boolean().describe('The event was handled before; nothing changed'),
  outcome: z.string().describe('What handling it did, in words'),
});

export const ReferralsSchema = z
  .object({
    code: z.string(),
    link: z
      .string()
      .nullable()
      .describe(
        'The referral link (REFERRAL_LINK_BASE or PUBLIC_BASE_URL + /signup, with `?ref=`), null when neither is set',
      ),
    reward: z
      .object({ referrer_credits: z.int(), referred_credits: z.int() })
      .describe('What each side receives, once, when the referred workspace first pays'),
    referred_workspaces: z.int(),
    rewarded_workspaces: z.int(),
    credits_earned: z.int(),
    referred_by_another: z.boolean().describe('This workspace was created through a referral link'),
  })
  .meta({ id: 'Referrals' });

export const DesignPartnerStatusSchema = z.enum(['not_applied', 'pending', 'accepted', 'declined', 'ended']);

export const DesignPartnerSchema = z
  .object({
    status: DesignPartnerStatusSchema,
    company_website: z.string().nullable(),
    use_case: z.string().nullable(),
    team_size: z.int().nullable(),
    applied_at: TimestampSchema.nullable(),
    decided_at: TimestampSchema.nullable(),
    decision_note: z.string().nullable(),
    benefit: z
      .object({ monthly_credits: z.int() })
      .describe("Credits granted each monthly period while accepted, beside the plan's"),
  })
  .meta({ id: 'DesignPartner' });

export const DesignPartnerApplySchema = z
  .object({
    company_website: z.url().max(2048),
    use_case: textSchema(1, 2000).describe('What the workspace will use the service for'),
    team_size: z.int().min(1).max(100000),
  })
  .strict();
