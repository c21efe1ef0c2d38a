/**
 * The monthly grant periods and what is due at a moment (decision 037), as pure functions the
 * workspace's billing workflow applies: periods are months counted from the workspace's grant
 * anchor (its creation, moved to the subscription's start on an upgrade), so a period's start is a
 * stable key and "granted once per period" is a unique cause in the credit ledger.
 */
import type { Plan } from '../shared/common.js';
import { paymentGraceDays, periodCredits } from './catalogue.js';

/** `anchor` plus `months` calendar months in UTC; a day past the month's end clamps to its last day (31 Jan + 1 = 28/29 Feb). */
export function addMonths(anchor: Date, months: number): Date {
  const y = anchor.getUTCFullYear();
  const m = anchor.getUTCMonth() + months;
  const lastDay = new Date(Date.UTC(y, m + 1, 0)).getUTCDate();
  return new Date(
    Date.UTC(
      y,
      m,
      Math.min(anchor.getUTCDate(), lastDay),
      anchor.getUTCHours(),
      anchor.getUTCMinutes(),
      anchor.getUTCSeconds(),
      anchor.getUTCMilliseconds(),
    ),
  );
}

export interface GrantPeriod {
  index: number;
  start: Date;
  end: Date;
}

/** The period containing `now` (the first one when `now` is before the anchor). */
export function grantPeriodAt(anchor: Date, now: Date): GrantPeriod {
  const months = (now.getUTCFullYear() - anchor.getUTCFullYear()) * 12 + (now.getUTCMonth() - anchor.getUTCMonth());
  let index = Math.max(0, months);
  // The month count can be one ahead (the anchor's day or time not reached yet this month).
  while (index > 0 && addMonths(anchor, index) > now) index -= 1;
  while (addMonths(anchor, index + 1) <= now) index += 1;
  return { index, start: addMonths(anchor, index), end: addMonths(anchor, index + 1) };
}

export interface BillingSnapshot {
  plan: Plan;
  grantAnchor: Date;
  /** The subscription ends at its period end (a downgrade asked for). */
  cancelAtPeriodEnd: boolean;
  currentPeriodEnd: Date | null;
  graceEndsAt: Date | null;
  designPartner: boolean;
  /** Start of the last period whose plan credits were granted; null before the first grant. */
  lastGrantedPeriodStart: Date | null;
}

export interface CreditGrant {
  causeKey: string;
  amount: number;
  note: string;
}

export interface BillingDue {
  /** Why the paid plan ends now, or null. */
  downgrade: 'grace_ended' | 'period_ended' | null;
  /** The plan after the downgrade, which the grants are priced on. */
  plan: Plan;
  period: GrantPeriod;
  /**
   * The grants of this period and of any period missed since the last grant (the workers were
   * down across a period's start), oldest first; the ledger's unique cause makes a repeated one a no-op.
   */
  grants: CreditGrant[];
  /** When something is next due: the period's end, the grace's end or the subscription's end. */
  nextWakeAt: Date;
}

/**
 * What is due at `now`, in order: a paid plan past its grace or past the end of a subscription set
 * to end is downgraded first, then the period's grants (and those of periods missed while no
 * worker ran) are priced on the plan in force.
 *
 * | plan | grace ended | cancel at period end and period ended | downgrade |
 * |---|---|---|---|
 * | paid | yes | any | grace_ended |
 * | paid | no | yes | period_ended |
 * | paid | no | no | none |
 * | free | any | any | none |
 */
export function decideBillingDue(s: BillingSnapshot, now: Date): BillingDue {
  let downgrade: BillingDue['downgrade'] = null;
  if (s.plan === 'paid' && s.graceEndsAt && now >= s.graceEndsAt) downgrade = 'grace_ended';
  else if (s.plan === 'paid' && s.cancelAtPeriodEnd && s.currentPeriodEnd && now >= s.currentPeriodEnd)
    downgrade = 'period_ended';
  const plan: Plan = downgrade ? 'free' : s.plan;
  const period = grantPeriodAt(s.grantAnchor, now);
  const credits = periodCredits(plan, s.designPartner);
  const grants: CreditGrant[] = [];
  for (const start of periodsToGrant(s.grantAnchor, period, s.lastGrantedPeriodStart)) {
    const key = start.toISOString();
    if (credits.plan > 0)
      grants.push({
        causeKey: `plan-grant:${key}`,
        amount: credits.plan,
        note: `${plan} plan credits for the period from ${key}`,
      });
    if (credits.design_partner > 0)
      grants.push({
        causeKey: `design-partner-grant:${key}`,
        amount: credits.design_partner,
        note: `design-partner credits for the period from ${key}`,
      });
  }
  const wakes = [period.end];
  if (plan === 'paid' && s.graceEndsAt && s.graceEndsAt > now) wakes.push(s.graceEndsAt);
  if (plan === 'paid' && s.cancelAtPeriodEnd && s.currentPeriodEnd && s.currentPeriodEnd > now)
    wakes.push(s.currentPeriodEnd);
  return { downgrade, plan, period, grants, nextWakeAt: new Date(Math.min(...wakes.map((d) => d.getTime()))) };
}

/**
 * Period starts to grant: the current one, and before it every one that started after the last
 * granted (none before the first grant: a workspace's billing begins with its current period).
 */
function periodsToGrant(anchor: Date, current: GrantPeriod, lastGranted: Date | null): Date[] {
  const starts: Date[] = [];
  for (let index = current.index; index >= 0; index -= 1) {
    const start = addMonths(anchor, index);
    if (index < current.index && (lastGranted === null || start <= lastGranted)) break;
    starts.unshift(start);
  }
  return starts;
}

/** When a payment failure's grace ends. */
export function graceEndsAt(failedAt: Date): Date {
  return new Date(failedAt.getTime() + paymentGraceDays * 24 * 60 * 60 * 1000);
}
