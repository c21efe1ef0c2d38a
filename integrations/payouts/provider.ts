/**
 * The payout provider behind affiliate payouts (decision 044): a batch of payout items sent once
 * under a sender batch id (the idempotency key: a retried send under the same id never pays twice),
 * and the batch read back with each item's status. PayPal Payouts is the implementation
 * (paypal.ts); tests and the benchmark run it against sim/paypal-payouts-server.ts.
 */

/** PayPal's item transaction statuses (payments.payouts-batch v1 `transaction_enum`), plus any the provider adds. */
export type PayoutItemStatus =
  | 'SUCCESS'
  | 'FAILED'
  | 'PENDING'
  | 'UNCLAIMED'
  | 'RETURNED'
  | 'ONHOLD'
  | 'BLOCKED'
  | 'REFUNDED'
  | 'REVERSED'
  | (string & {});

export interface PayoutItemRequest {
  /** Our payout id: the provider's `sender_item_id`, how an item is matched back to its payout. */
  senderItemId: string;
  receiverEmail: string;
  amountCents: number;
  currency: 'USD';
  note: string;
}

export interface PayoutItemResult {
  senderItemId: string;
  providerItemId: string;
  status: PayoutItemStatus;
  /** The provider's error name for a failed item (e.g. RECEIVER_UNREGISTERED), when it gives one. */
  errorName: string | null;
}

export interface PayoutBatchResult {
  providerBatchId: string;
  senderBatchId: string;
  /** DENIED, PENDING, PROCESSING, SUCCESS, CANCELED. */
  batchStatus: string;
  items: PayoutItemResult[];
}

/** What the provider refused, with the items it named (422 / 400 validation). */
export class PayoutValidationError extends Error {
  override name = 'PayoutValidationError';
  constructor(
    message: string,
    /** Item index (in the request's order) to the provider's reason; empty when the whole request was refused. */
    readonly itemIssues: Map<number, string>,
  ) {
    super(message);
  }
}

/** Any other refusal or outage (after the client's own token refresh and 429 back-off); retrying later may work. */
export class PayoutProviderError extends Error {
  override name = 'PayoutProviderError';
  constructor(
    message: string,
    readonly status: number | null,
  ) {
    super(message);
  }
}

export interface PayoutProvider {
  readonly name: 'paypal';
  /**
   * Sends a batch. Sending again under the same `senderBatchId` (a retry after a crash or a lost
   * answer) returns the batch the first send created, and pays nothing twice.
   */
  createBatch(input: {
    senderBatchId: string;
    emailSubject: string;
    items: PayoutItemRequest[];
  }): Promise<PayoutBatchResult>;
  /** The batch with every item's current status. */
  getBatch(providerBatchId: string): Promise<PayoutBatchResult>;
}
