import type { Sql } from '../../db/sql.js';
import { matureCommissionAt } from '../../services/affiliates/maturation.js';
import type { CommissionState } from '../../workflows/affiliates/commission.contract.js';

/** Activities of the commission maturation workflow. */
export function createCommissionActivities({ sql }: { sql: Sql }) {
  return {
    /** Matures the commission if it is held and due at the workflow's `now`; answers its state. */
    lookAtCommission({ commissionId, now }: { commissionId: string; now: string }): Promise<CommissionState> {
      return matureCommissionAt(sql, commissionId, new Date(now));
    },
  };
}
export type CommissionActivities = ReturnType<typeof createCommissionActivities>;
