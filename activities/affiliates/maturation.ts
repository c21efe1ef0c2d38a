import type { Sql } from '../../db/sql.js';
import { matureDueCommissions } from '../../services/affiliates/maturation.js';
import type { MaturationLook } from '../../workflows/affiliates/affiliate-maturation.contract.js';

/** Activities of the affiliate maturation workflow (decision 047). */
export function createAffiliateMaturationActivities({ sql }: { sql: Sql }) {
  return {
    /** Matures the affiliate's held commissions due at the workflow's `now`, records and answers the next one's available_at. */
    matureDueCommissions({ affiliateId, now }: { affiliateId: string; now: string }): Promise<MaturationLook> {
      return matureDueCommissions(sql, affiliateId, new Date(now));
    },
  };
}
export type AffiliateMaturationActivities = ReturnType<typeof createAffiliateMaturationActivities>;
