/**
 * Affiliates and their codes (decision 043; interface spec: Affiliate program): one affiliate per
 * workspace; codes unique across the service whatever their case (a unique index on lower(code)).
 */
import type { Db } from '../../db/sql.js';

export interface AffiliateRow {
  id: string;
  workspace_id: string;
  display_name: string;
  time_zone: string;
  created_at: Date;
}

export interface AffiliateCodeRow {
  id: string;
  affiliate_id: string;
  workspace_id: string;
  code: string;
  is_vanity: boolean;
  created_at: Date;
}

/** Enrols the workspace; the row that exists already when it was enrolled before (`created` false). */
export async function insertAffiliate(
  tx: Db,
  input: { workspaceId: string; displayName: string; timeZone: string },
): Promise<{ affiliate: AffiliateRow; created: boolean }> {
  const [created] = await tx<AffiliateRow[]>`
    insert into affiliates (workspace_id, display_name, time_zone)
    values (${input.workspaceId}, ${input.displayName}, ${input.timeZone})
    on conflict (workspace_id) do nothing returning *`;
  if (created) return { affiliate: created, created: true };
  return { affiliate: (await affiliateOfWorkspace(tx, input.workspaceId))!, created: false };
}

export async function affiliateOfWorkspace(db: Db, workspaceId: string): Promise<AffiliateRow | undefined> {
  const [row] = await db<AffiliateRow[]>`select * from affiliates where workspace_id = ${workspaceId}`;
  return row;
}

export async function affiliateById(db: Db, affiliateId: string): Promise<AffiliateRow | undefined> {
  const [row] = await db<AffiliateRow[]>`select * from affiliates where id = ${affiliateId}`;
  return row;
}

/** Locks the affiliate's row: money movements of one affiliate (clawbacks, maturation, payouts) take it first. */
export async function lockAffiliate(tx: Db, affiliateId: string): Promise<AffiliateRow | undefined> {
  const [row] = await tx<AffiliateRow[]>`select * from affiliates where id = ${affiliateId} for update`;
  return row;
}

/** A code, or null when another code has it already whatever the case. */
export async function insertAffiliateCode(
  tx: Db,
  input: { affiliateId: string; workspaceId: string; code: string; isVanity: boolean },
): Promise<AffiliateCodeRow | null> {
  const [row] = await tx<AffiliateCodeRow[]>`
    insert into affiliate_codes (affiliate_id, workspace_id, code, is_vanity)
    values (${input.affiliateId}, ${input.workspaceId}, ${input.code}, ${input.isVanity})
    on conflict ((lower(code))) do nothing returning *`;
  return row ?? null;
}

export async function affiliateCodes(db: Db, affiliateId: string): Promise<AffiliateCodeRow[]> {
  return db<
    AffiliateCodeRow[]
  >`select * from affiliate_codes where affiliate_id = ${affiliateId} order by created_at, code`;
}

export async function countVanityCodes(db: Db, affiliateId: string): Promise<number> {
  const [row] = await db<
    { n: number }[]
  >`select count(*)::int as n from affiliate_codes where affiliate_id = ${affiliateId} and is_vanity`;
  return row!.n;
}

export async function codeByText(db: Db, code: string): Promise<AffiliateCodeRow | undefined> {
  const [row] = await db<AffiliateCodeRow[]>`select * from affiliate_codes where lower(code) = lower(${code})`;
  return row;
}

/** Every affiliate's id (the fault test and the bench check each ledger against its balance). */
export async function allAffiliateIds(db: Db): Promise<string[]> {
  const rows = await db<{ id: string }[]>`select id from affiliates order by created_at, id`;
  return rows.map((r) => r.id);
}
