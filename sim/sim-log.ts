/**
 * What the simulated browsers saw, kept for the checks: every claim handed to a browser with the
 * evidence of how long the server held it, and every result posted with its answer. Times are
 * epoch milliseconds; `claimedAt` and settle times are the server's, the rest the client's (same
 * machine, same clock).
 */
import type { ActionKind } from '../domain/pnet/limits.js';
import type { StepErrorCode, StepStatus } from '../domain/pnet/steps.js';

/** How a claim ended, from the browser's side. */
export type ClaimFate =
  | 'running'
  /** Its result settled the step (some copy got 200). */
  | 'settled'
  /** Its result was refused (409): the claim was no longer current. */
  | 'refused'
  /** Its result never got a definitive answer. */
  | 'unanswered'
  /** Given back (release); the step went back in line. */
  | 'released'
  /** A check-in answered `running_claim: lost` and the browser stopped the step. */
  | 'lost'
  /** The browser went silent mid-step and never reported. */
  | 'silent'
  /** The browser went silent past the lease, then reported. */
  | 'late'
  /** The simulator was stopped mid-step. */
  | 'stopped';

export interface ClaimRecord {
  stepId: string;
  accountId: string;
  browser: string;
  kind: ActionKind;
  metered: boolean;
  /** The claim as handed out (server clock, the step's claimed_at). */
  claimedAt: number;
  claimedAtIso: string;
  /** When the claim answer arrived. */
  answeredAt: number;
  /**
   * Latest time the server is known to have held this claim: the claim itself, a check-in that
   * answered `renewed` (its send time), the settle its result made.
   */
  heldUntil: number;
  /** Latest check-in naming this claim that may have renewed its lease (answered or not). */
  lastRenewalSentAt: number;
  /** When the browser stopped acting on it (finished, abandoned or gave it back). */
  ranUntil: number | null;
  fate: ClaimFate;
  /** What the browser decided to report, when it reported. */
  result: { status: 'succeeded' | 'failed' | 'skipped'; error_code: StepErrorCode | null } | null;
  /** The server's finished_at of the settle this claim's result made. */
  settledAt: number | null;
}

export type ReportCopy = 'first' | 'duplicate' | 'stale';

export interface ReportRecord {
  stepId: string;
  accountId: string;
  browser: string;
  copy: ReportCopy;
  late: boolean;
  /** The claim the body names. */
  namedClaim: string | null;
  status: 'succeeded' | 'failed' | 'skipped';
  /** Final HTTP status after retries; 0 when none came. */
  http: number;
  attempts: number;
  sentAt: number;
  answeredAt: number;
  detail: string | null;
  /** The step record a 200 answered with. */
  answer: {
    status: StepStatus;
    finished_at: string | null;
    claimed_at: string | null;
    error_code: StepErrorCode | null;
  } | null;
}

export class SimLog {
  readonly claims: ClaimRecord[] = [];
  readonly reports: ReportRecord[] = [];

  addClaim(record: ClaimRecord): ClaimRecord {
    this.claims.push(record);
    return record;
  }

  addReport(record: ReportRecord) {
    this.reports.push(record);
  }
}
