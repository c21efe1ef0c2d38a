-- Decision 053: Stripe's events since API 2025-03-31 name a refund's or dispute's payment intent
-- but not its invoice, and an invoice's event names no payment intent. An event of either is
-- matched to the payment row of the invoice it paid (one recorded under the invoice's id before
-- the payment was known), so the rows are looked up by invoice too.
create index billing_payments_invoice on billing_payments (invoice_id) where invoice_id is not null;
