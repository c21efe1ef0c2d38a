/**
 * Links an event's payment and invoice before the event is applied (decision 053). Since Stripe's
 * API 2025-03-31 an invoice's event names no payment intent, and a refund's or dispute's names no
 * invoice: without the link, an invoice's payment and its refund were two rows and the referring
 * affiliate kept a refunded commission. The provider is asked (invoice payments) only when no
 * payment row already holds the link; a failed question fails the event, which the provider
 * delivers again, rather than recording a payment apart from its invoice.
 */
import type { Sql } from '../../db/sql.js';
import type { BillingEvent } from '../../domain/billing/provider-events.js';
import type { PaymentProvider } from '../../integrations/payments/provider.js';
import { paymentKeyOf } from '../../store/billing/invoices.js';

export async function linkInvoicePayment(
  sql: Sql,
  provider: Pick<PaymentProvider, 'invoicePayments'>,
  event: BillingEvent,
): Promise<BillingEvent> {
  switch (event.kind) {
    case 'invoice_paid': {
      if (event.paymentId || event.amountPaidCents <= 0) return event;
      if (await paymentKeyOf(sql, { workspaceId: null, paymentId: null, invoiceId: event.invoiceId })) return event;
      const [link] = await provider.invoicePayments({ invoiceId: event.invoiceId });
      return link ? { ...event, paymentId: link.paymentId } : event;
    }
    case 'charge_refunded':
    case 'dispute': {
      if (event.invoiceId) return event;
      if (await paymentKeyOf(sql, { workspaceId: null, paymentId: event.paymentId, invoiceId: null })) return event;
      const [link] = await provider.invoicePayments({ paymentId: event.paymentId });
      if (!link) return event;
      return {
        ...event,
        invoiceId: link.invoiceId,
        workspaceId: event.workspaceId ?? link.workspaceId,
        customerId: event.customerId ?? link.customerId,
      };
    }
    default:
      return event;
  }
}
