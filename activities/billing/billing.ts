import type { Sql } from '../../db/sql.js';
import type { BillingSettlement } from '../../workflows/billing/workspace-billing.contract.js';
import { settleBillingAt } from '../../services/billing/settle.js';

/** Activities of the workspace billing workflow. */
export function createBillingActivities({ sql }: { sql: Sql }) {
  return {
    /** Applies what is due at the workflow's `now` (downgrade, the period's grants) and answers when to look again. */
    settleBilling({ workspaceId, now }: { workspaceId: string; now: string }): Promise<BillingSettlement> {
      return settleBillingAt(sql, workspaceId, new Date(now));
    },
  };
}
export type BillingActivities = ReturnType<typeof createBillingActivities>;
