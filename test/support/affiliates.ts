/** Affiliates in tests: an enrolment with commission already matured, as the payout tests start from. */
import type { Sql } from '../../db/sql.js';
import { insertAffiliate } from '../../store/affiliates/affiliates.js';
import { appendAffiliateLedgerEntry } from '../../store/affiliates/ledger.js';

/**
 * The workspace enrolled as affiliate `Aff` (in UTC), with `cents` of commission matured at
 * `occurredAt` under the cause `<causePrefix>:<affiliate id>`: the affiliate.
 */
export async function affiliateWithCommission(
  sql: Sql,
  input: { workspaceId: string; cents: number; occurredAt: Date; causePrefix: string },
) {
  const { affiliate } = await insertAffiliate(sql, {
    workspaceId: input.workspaceId,
    displayName: 'Aff',
    timeZone: 'UTC',
  });
  await appendAffiliateLedgerEntry(sql, {
    affiliateId: affiliate.id,
    kind: 'commission',
    amountCents: input.cents,
    description: 'matured',
    causeKey: `${input.causePrefix}:${affiliate.id}`,
    occurredAt: input.occurredAt,
  });
  return affiliate;
}
