/** A workspace's billing at a moment: the pure decision of what is due, applied in one transaction. */
import type { Sql } from '../../db/sql.js';
import { decideBillingDue } from '../../domain/billing/periods.js';
import { billingSnapshot, downgradeToFree, lockBillingAccount } from '../../store/billing/accounts.js';
import { grantCreditsIn } from '../../store/platform/credits.js';
import type { BillingSettlement } from '../../workflows/billing/workspace-billing.contract.js';

export async function settleBillingAt(sql: Sql, workspaceId: string, now: Date): Promise<BillingSettlement> {
  return sql.begin(async (tx) => {
    const account = await lockBillingAccount(tx, workspaceId);
    if (!account)
      return { closed: true, plan: null, periodStart: null, nextWakeAt: null, granted: 0, downgraded: false };
    const due = decideBillingDue(billingSnapshot(account), now);
    if (due.downgrade) await downgradeToFree(tx, workspaceId);
    let granted = 0;
    for (const grant of due.grants) {
      if (await grantCreditsIn(tx, { workspaceId, ...grant })) granted += grant.amount;
    }
    return {
      closed: false,
      plan: due.plan,
      periodStart: due.period.start.toISOString(),
      nextWakeAt: due.nextWakeAt.toISOString(),
      granted,
      downgraded: due.downgrade !== null,
    };
  });
}
