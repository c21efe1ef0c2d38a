/**
 * Billing's use cases behind the routes (decision 037): the overview a person reads, checkout for
 * the plan or a pack, the customer portal, a downgrade at period end (and taking it back),
 * referrals and design-partner applications. Without a payment provider the money routes refuse
 * with 503 naming what to set; the plan and credits are then an operator's (admin command line).
 */
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import type { PaymentProvider } from '../../integrations/payments/provider.js';
import { PaymentProviderError } from '../../integrations/payments/provider.js';
import {
  billingCurrency,
  creditPacks,
  designPartnerMonthlyCredits,
  periodCredits,
  planTerms,
  referralRewardCredits,
  type CreditPackId,
} from '../../domain/billing/catalogue.js';
import { grantPeriodAt } from '../../domain/billing/periods.js';
import { ApiError } from '../../domain/shared/errors.js';
import {
  readBillingAccount,
  referralCounts,
  setCancelAtPeriodEnd,
  setCustomer,
  type BillingAccountRow,
} from '../../store/billing/accounts.js';
import { listInvoices, listPayments } from '../../store/billing/invoices.js';
import { applyDesignPartner, readDesignPartner, type DesignPartnerRow } from '../../store/billing/design-partners.js';
import { getBalance } from '../../store/platform/credits.js';
import { wakeWorkspaceBilling } from './billing-client.js';
import type { TemporalHandle } from '../deps.js';

export interface BillingDeps {
  sql: Sql;
  integrations: Integrations;
  temporal: TemporalHandle;
}

/** The provider, or 503 saying plainly that billing is not configured and what to set. */
export function paymentsOf(integrations: Integrations): { provider: PaymentProvider; returnUrl: string } {
  const payments = integrations.payments;
  if ('missing' in payments) {
    throw new ApiError(
      'unavailable',
      `Billing is not configured on this service: set ${payments.missing.join(', ')}. Until then an operator sets plans and grants credits with the admin command line.`,
    );
  }
  return payments;
}

async function account(sql: Sql, workspaceId: string): Promise<BillingAccountRow> {
  const a = await readBillingAccount(sql, workspaceId);
  if (!a) throw new ApiError('not_found', 'This workspace has no billing account.');
  return a;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export async function billingOverview(deps: BillingDeps, workspaceId: string, now = new Date()) {
  const a = await account(deps.sql, workspaceId);
  const credits = periodCredits(a.plan, a.design_partner);
  const period = grantPeriodAt(a.grant_anchor, now);
  const renews =
    a.plan === 'paid' && a.subscription_id !== null && !a.cancel_at_period_end && a.current_period_end !== null;
  return {
    plan: a.plan,
    billing_configured: !('missing' in deps.integrations.payments),
    subscription_status: a.subscription_status,
    current_period_end: iso(a.current_period_end),
    cancel_at_period_end: a.cancel_at_period_end,
    payment_failed_at: iso(a.payment_failed_at),
    grace_ends_at: iso(a.grace_ends_at),
    next_invoice: renews
      ? {
          amount_cents: planTerms.paid.monthly_price_cents,
          currency: billingCurrency,
          due_at: a.current_period_end!.toISOString(),
        }
      : null,
    credits: await getBalance(deps.sql, workspaceId),
    grant_period: { start: period.start.toISOString(), end: period.end.toISOString() },
    grants_per_period: { ...credits, total: credits.plan + credits.design_partner },
    plans: (['free', 'paid'] as const).map((plan) => ({ plan, currency: billingCurrency, ...planTerms[plan] })),
    packs: (Object.keys(creditPacks) as CreditPackId[]).map((pack) => ({
      pack,
      currency: billingCurrency,
      ...creditPacks[pack],
    })),
  };
}

function providerFailure(error: unknown): never {
  if (error instanceof PaymentProviderError) throw new ApiError('bad_gateway', error.message);
  throw error;
}

async function customerOf(
  deps: BillingDeps,
  provider: PaymentProvider,
  a: BillingAccountRow,
  email: string | null,
): Promise<string> {
  if (a.customer_id) return a.customer_id;
  const customerId = await provider
    .createCustomer({ workspaceId: a.workspace_id, name: a.workspace_name, email })
    .catch(providerFailure);
  await setCustomer(deps.sql, a.workspace_id, customerId);
  return (await account(deps.sql, a.workspace_id)).customer_id ?? customerId;
}

export async function startCheckout(
  deps: BillingDeps,
  workspaceId: string,
  purchase: 'plan' | CreditPackId,
  email: string | null,
) {
  const { provider, returnUrl } = paymentsOf(deps.integrations);
  const a = await account(deps.sql, workspaceId);
  if (purchase === 'plan' && a.plan === 'paid')
    throw new ApiError('conflict', 'This workspace is already on the paid plan.');
  const customerId = await customerOf(deps, provider, a, email);
  const line =
    purchase === 'plan'
      ? {
          name: 'Paid plan',
          amountCents: planTerms.paid.monthly_price_cents,
          currency: billingCurrency,
          recurring: true,
        }
      : {
          name: `${creditPacks[purchase].credits} credits`,
          amountCents: creditPacks[purchase].price_cents,
          currency: billingCurrency,
          recurring: false,
        };
  const session = await provider
    .createCheckout({
      workspaceId,
      customerId,
      line,
      metadata: { workspace_id: workspaceId, ...(purchase === 'plan' ? {} : { pack: purchase }) },
      successUrl: `${returnUrl}?checkout=success`,
      cancelUrl: `${returnUrl}?checkout=cancelled`,
    })
    .catch(providerFailure);
  return { url: session.url, session_id: session.id, expires_at: iso(session.expiresAt) };
}

export async function portalLink(deps: BillingDeps, workspaceId: string) {
  const { provider, returnUrl } = paymentsOf(deps.integrations);
  const a = await account(deps.sql, workspaceId);
  if (!a.customer_id)
    throw new ApiError(
      'conflict',
      'This workspace has not been to checkout yet, so it has nothing to manage in the portal.',
    );
  return { url: await provider.createPortal({ customerId: a.customer_id, returnUrl }).catch(providerFailure) };
}

/** Ends the paid plan at the period's end (`cancel` true), or keeps it renewing (false). */
export async function scheduleDowngrade(deps: BillingDeps, workspaceId: string, cancel: boolean) {
  const { provider } = paymentsOf(deps.integrations);
  const a = await account(deps.sql, workspaceId);
  if (a.plan !== 'paid') throw new ApiError('conflict', 'This workspace is on the free plan already.');
  if (!a.subscription_id || a.subscription_status === 'canceled') {
    throw new ApiError(
      'conflict',
      "This workspace's paid plan was set by an operator, not bought through checkout: an operator changes it.",
    );
  }
  if (a.cancel_at_period_end === cancel) {
    throw new ApiError(
      'conflict',
      cancel ? 'A downgrade is already scheduled for the end of the period.' : 'No downgrade is scheduled.',
    );
  }
  await provider.setCancelAtPeriodEnd(a.subscription_id, cancel).catch(providerFailure);
  await setCancelAtPeriodEnd(deps.sql, workspaceId, cancel);
  await wakeWorkspaceBilling(deps.temporal.client, deps.temporal.taskQueue, deps.sql, workspaceId);
  const end = iso(a.current_period_end);
  return {
    detail: cancel
      ? `The paid plan ends at the end of the period${end ? ` (${end})` : ''}; until then nothing changes.`
      : 'The downgrade is cancelled; the paid plan keeps renewing.',
    cancel_at_period_end: cancel,
    current_period_end: end,
  };
}

export async function referrals(deps: BillingDeps, workspaceId: string) {
  const a = await account(deps.sql, workspaceId);
  const base = deps.integrations.referralLinkBase;
  return {
    code: a.referral_code,
    link: base ? `${base}${base.includes('?') ? '&' : '?'}ref=${encodeURIComponent(a.referral_code)}` : null,
    reward: { referrer_credits: referralRewardCredits.referrer, referred_credits: referralRewardCredits.referred },
    ...(await referralCounts(deps.sql, workspaceId)),
    referred_by_another: a.referred_by !== null,
  };
}

function designPartnerOut(row: DesignPartnerRow | undefined) {
  return {
    status: row?.status ?? ('not_applied' as const),
    company_website: row?.company_website ?? null,
    use_case: row?.use_case ?? null,
    team_size: row?.team_size ?? null,
    applied_at: iso(row?.created_at ?? null),
    decided_at: iso(row?.decided_at ?? null),
    decision_note: row?.decision_note ?? null,
    benefit: { monthly_credits: designPartnerMonthlyCredits },
  };
}

export async function designPartner(sql: Sql, workspaceId: string) {
  return designPartnerOut(await readDesignPartner(sql, workspaceId));
}

export async function applyForDesignPartner(
  sql: Sql,
  workspaceId: string,
  memberId: string | null,
  body: { company_website: string; use_case: string; team_size: number },
) {
  const row = await applyDesignPartner(sql, {
    workspaceId,
    memberId,
    companyWebsite: body.company_website,
    useCase: body.use_case,
    teamSize: body.team_size,
  });
  if (!row) {
    const current = await readDesignPartner(sql, workspaceId);
    throw new ApiError(
      'conflict',
      `This workspace's application is ${current?.status ?? 'pending'}; it can apply again once declined or ended.`,
    );
  }
  return designPartnerOut(row);
}

export async function billingInvoices(sql: Sql, workspaceId: string, limit: number) {
  return (await listInvoices(sql, workspaceId, limit)).map((i) => ({
    id: i.invoice_id,
    status: i.status,
    amount_due_cents: i.amount_due_cents,
    amount_paid_cents: i.amount_paid_cents,
    currency: i.currency,
    period_start: iso(i.period_start),
    period_end: iso(i.period_end),
    hosted_invoice_url: i.hosted_invoice_url,
    created_at: i.created_at.toISOString(),
    paid_at: iso(i.paid_at),
  }));
}

export async function billingPayments(sql: Sql, workspaceId: string, limit: number) {
  return (await listPayments(sql, workspaceId, limit)).map((p) => ({
    id: p.payment_id,
    purpose: p.purpose,
    invoice_id: p.invoice_id,
    pack: p.pack,
    credits: p.credits,
    amount_cents: p.amount_cents,
    refunded_cents: p.refunded_cents,
    currency: p.currency,
    credits_taken_back: p.revoked_credits,
    dispute_status: p.dispute_status,
    created_at: p.created_at.toISOString(),
  }));
}
