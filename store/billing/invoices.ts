/** Invoices and payments as the provider reported them; amounts in integer cents with their currency. */
import type { Db } from '../../db/sql.js';

export interface InvoiceRow {
  invoice_id: string;
  status: 'open' | 'paid' | 'payment_failed' | 'void' | 'uncollectible';
  amount_due_cents: number;
  amount_paid_cents: number;
  currency: string;
  period_start: Date | null;
  period_end: Date | null;
  hosted_invoice_url: string | null;
  created_at: Date;
  paid_at: Date | null;
}

export interface PaymentRow {
  payment_id: string;
  workspace_id: string;
  purpose: 'subscription' | 'credit_pack';
  invoice_id: string | null;
  pack: string | null;
  credits: number;
  amount_cents: number;
  refunded_cents: number;
  currency: string;
  revoked_credits: number;
  dispute_status: 'open' | 'won' | 'lost' | null;
  created_at: Date;
}

/**
 * Records an invoice's state. `paid` is final: a failure reported after the payment (events out of
 * order) leaves it paid. Answers the invoice as it now stands.
 */
export async function upsertInvoice(
  tx: Db,
  i: {
    workspaceId: string;
    invoiceId: string;
    status: 'paid' | 'payment_failed';
    amountDueCents: number;
    amountPaidCents: number;
    currency: string;
    periodStart: Date | null;
    periodEnd: Date | null;
    hostedInvoiceUrl: string | null;
    createdAt: Date;
    at: Date;
  },
): Promise<InvoiceRow> {
  const [row] = await tx<InvoiceRow[]>`
    insert into billing_invoices (invoice_id, workspace_id, status, amount_due_cents, amount_paid_cents, currency, period_start, period_end, hosted_invoice_url, created_at, paid_at)
    values (${i.invoiceId}, ${i.workspaceId}, ${i.status}, ${i.amountDueCents}, ${i.amountPaidCents}, ${i.currency}, ${i.periodStart}, ${i.periodEnd},
      ${i.hostedInvoiceUrl}, ${i.createdAt}, ${i.status === 'paid' ? i.at : null})
    on conflict (invoice_id) do update set
      status = case when billing_invoices.status = 'paid' then 'paid' else excluded.status end,
      amount_paid_cents = greatest(billing_invoices.amount_paid_cents, excluded.amount_paid_cents),
      paid_at = coalesce(billing_invoices.paid_at, excluded.paid_at),
      hosted_invoice_url = coalesce(excluded.hosted_invoice_url, billing_invoices.hosted_invoice_url)
    returning invoice_id, status, amount_due_cents, amount_paid_cents, currency, period_start, period_end, hosted_invoice_url, created_at, paid_at`;
  return row!;
}

/**
 * Records a payment, or what a later event adds to it: the pack and its credits (the checkout),
 * the refunded total (refunds only grow), the dispute (open, then won or lost, never reopened).
 * A refund or dispute may arrive before the checkout that made the payment; the row then waits
 * for its pack.
 */
export async function upsertPayment(
  tx: Db,
  p: {
    paymentId: string;
    workspaceId: string;
    purpose?: 'subscription' | 'credit_pack';
    invoiceId?: string | null;
    pack?: string | null;
    credits?: number;
    amountCents: number;
    refundedCents?: number;
    currency: string;
    disputeStatus?: 'open' | 'won' | 'lost';
    createdAt: Date;
  },
): Promise<PaymentRow> {
  const [row] = await tx<PaymentRow[]>`
    insert into billing_payments (payment_id, workspace_id, purpose, invoice_id, pack, credits, amount_cents, refunded_cents, currency, dispute_status, created_at)
    values (${p.paymentId}, ${p.workspaceId}, ${p.purpose ?? 'subscription'}, ${p.invoiceId ?? null}, ${p.pack ?? null}, ${p.credits ?? 0},
      ${p.amountCents}, ${p.refundedCents ?? 0}, ${p.currency}, ${p.disputeStatus ?? null}, ${p.createdAt})
    on conflict (payment_id) do update set
      purpose = case when ${p.purpose ?? null}::text is null then billing_payments.purpose else excluded.purpose end,
      invoice_id = coalesce(billing_payments.invoice_id, excluded.invoice_id),
      pack = coalesce(billing_payments.pack, excluded.pack),
      credits = greatest(billing_payments.credits, excluded.credits),
      amount_cents = greatest(billing_payments.amount_cents, excluded.amount_cents),
      refunded_cents = greatest(billing_payments.refunded_cents, excluded.refunded_cents),
      dispute_status = case
        when billing_payments.dispute_status in ('won', 'lost') then billing_payments.dispute_status
        else coalesce(excluded.dispute_status, billing_payments.dispute_status) end
    returning payment_id, workspace_id, purpose, invoice_id, pack, credits, amount_cents, refunded_cents, currency, revoked_credits, dispute_status, created_at`;
  return row!;
}

/**
 * The key of the payment row an event of this payment or invoice belongs to: the payment's own
 * row, else the invoice's row whose payment was not known when it was recorded (keyed by the
 * invoice's id), or, when the event names no payment, any row of the invoice; else none. Within a
 * workspace when one is given.
 */
export async function paymentKeyOf(
  db: Db,
  p: { workspaceId: string | null; paymentId: string | null; invoiceId: string | null },
): Promise<string | undefined> {
  if (!p.paymentId && !p.invoiceId) return undefined;
  const [row] = await db<{ payment_id: string }[]>`
    select payment_id from billing_payments
    where (payment_id = ${p.paymentId}
        or (invoice_id = ${p.invoiceId} and (${p.paymentId}::text is null or payment_id = invoice_id)))
      and (${p.workspaceId}::uuid is null or workspace_id = ${p.workspaceId}::uuid)
    order by (payment_id = ${p.paymentId}) is true desc, created_at, payment_id
    limit 1`;
  return row?.payment_id;
}

/** The workspace a payment or invoice was recorded for, when an event names neither workspace nor customer (a dispute). */
export async function workspaceOfPayment(
  db: Db,
  p: { paymentId: string | null; invoiceId: string | null },
): Promise<string | undefined> {
  if (!p.paymentId && !p.invoiceId) return undefined;
  const [row] = await db<{ workspace_id: string }[]>`
    select workspace_id from billing_payments where payment_id = ${p.paymentId}
    union all
    select workspace_id from billing_invoices where invoice_id = ${p.invoiceId}
    limit 1`;
  return row?.workspace_id;
}

export async function setRevokedCredits(tx: Db, paymentId: string, revoked: number): Promise<void> {
  await tx`update billing_payments set revoked_credits = ${revoked} where payment_id = ${paymentId}`;
}

export async function listInvoices(db: Db, workspaceId: string, limit: number): Promise<InvoiceRow[]> {
  return db<InvoiceRow[]>`
    select invoice_id, status, amount_due_cents, amount_paid_cents, currency, period_start, period_end, hosted_invoice_url, created_at, paid_at
    from billing_invoices where workspace_id = ${workspaceId} order by created_at desc, invoice_id limit ${limit}`;
}

export async function listPayments(db: Db, workspaceId: string, limit: number): Promise<PaymentRow[]> {
  return db<PaymentRow[]>`
    select payment_id, workspace_id, purpose, invoice_id, pack, credits, amount_cents, refunded_cents, currency, revoked_credits, dispute_status, created_at
    from billing_payments where workspace_id = ${workspaceId} order by created_at desc, payment_id limit ${limit}`;
}
