/** The affiliate payout cycle's contract (workflows/affiliates/payout-cycle.ts): its ids, input and result. */

/**
 * The Temporal Schedule that starts the cycle (monthly by default; decision 044), one per task
 * queue: a lane sharing the namespace (staging, another test file) pays from a database of its own.
 */
export const affiliatePayoutScheduleId = (taskQueue: string) => `affiliate-payout-cycle/${taskQueue}`;
/** A cycle started by hand for a period (the admin command line, tests): one at a time per period and task queue. */
export const payoutCycleWorkflowId = (taskQueue: string, period: string) =>
  `affiliate-payout-cycle/${taskQueue}/${period}`;

export interface PayoutCycleInput {
  /** The cycle's time (ISO); its UTC month is the period. The workflow's own clock when omitted (the Schedule's runs). */
  cycleAt?: string;
  /** How long the cycle keeps reading back items still pending after it sent them (3 days when omitted). */
  followForMs?: number;
}

export interface PayoutCycleResult {
  period: string;
  /** Why nothing was sent (the provider is not configured), else null. */
  refused: string | null;
  /** Payouts of earlier batches that moved when read back at the start. */
  followed: number;
  forfeited: number;
  created: number;
  sent: number;
  failed: number;
  /** Payouts of this cycle still pending at the provider when the cycle stopped following them (the next cycle reads them again). */
  stillPending: number;
}
