import type { Sql } from '../../db/sql.js';
import { matureDueCommissions } from '../../services/affiliates/maturation.js';
import type { MaturationLook } from '../../workflows/affiliates/commission-maturation.contract.js';

/** Activities of the commission maturation workflow (decision 047). */
export function createCommissionMaturationActivities({ sql }: { sql: Sql }) {
  return {
    /** Matures the shard's held commissions due at the workflow's `now`, records and answers the next one's available_at. */
    matureDueCommissions({ shard, now }: { shard: number; now: string }): Promise<MaturationLook> {
      return matureDueCommissions(sql, shard, new Date(now));
    },
  };
}
export type CommissionMaturationActivities = ReturnType<typeof createCommissionMaturationActivities>;
