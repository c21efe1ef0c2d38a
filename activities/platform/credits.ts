import type { Sql } from '../../db/sql.js';
import { CreditHold, releaseHold } from '../../store/platform/credits.js';

/** Activities of the credit-hold workflow. */
export function createCreditActivities({ sql }: { sql: Sql }) {
  return {
    /** Releases a hold nobody settled before it expired; a settled hold is left as it is. */
    async releaseExpiredHold({ holdId }: { holdId: string }): Promise<CreditHold['status'] | 'missing'> {
      const hold = await sql.begin((tx) => releaseHold(tx, holdId));
      return hold?.status ?? 'missing';
    },
  };
}
export type CreditActivities = ReturnType<typeof createCreditActivities>;
