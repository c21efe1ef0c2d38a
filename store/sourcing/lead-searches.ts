/**
 * Lead searches (decision 041). A page lands in one transaction, only while the search's
 * `next_page` still names it: its new rows and their keys, the credits for exactly those rows (a
 * hold charged at once, through the ledger, cause key per page), and the counters. A retried page
 * finds the cursor moved and changes nothing.
 */
import type { Db, Sql } from '../../db/sql.js';
import type {
  LeadSearch,
  LeadSearchKind,
  LeadSearchQuery,
  LeadSearchStatus,
} from '../../domain/sourcing/lead-search.js';
import { leadSearchWorkflowIdOf } from '../../domain/sourcing/lead-search.js';
import { getBalance, holdCredits, settleHold } from '../platform/credits.js';
import { landRecords, lockTableLanding, type LandRecord } from './landing.js';

export interface LeadSearchRow {
  id: string;
  workspace_id: string;
  table_id: string;
  provider: string;
  kind: LeadSearchKind;
  query: LeadSearchQuery;
  max_results: number;
  price_per_row: number;
  columns: Record<string, string>;
  status: LeadSearchStatus;
  next_page: number;
  pages_read: number;
  total_available: number | null;
  results_seen: number;
  rows_landed: number;
  duplicates: number;
  credits_charged: string | number;
  rate_limited: number;
  error: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function toLeadSearch(r: LeadSearchRow): LeadSearch {
  return {
    id: r.id,
    table_id: r.table_id,
    provider: r.provider,
    kind: r.kind,
    query: r.query,
    max_results: r.max_results,
    price_per_row: r.price_per_row,
    status: r.status,
    pages_read: r.pages_read,
    total_available: r.total_available,
    results_seen: r.results_seen,
    rows_landed: r.rows_landed,
    duplicates: r.duplicates,
    credits_charged: Number(r.credits_charged),
    rate_limited: r.rate_limited,
    error: r.error,
    created_at: r.created_at.toISOString(),
    started_at: iso(r.started_at),
    finished_at: iso(r.finished_at),
    workflow_id: leadSearchWorkflowIdOf(r.id),
  };
}

/** Inserts the search once: the same id again (a retried card) finds the one made before. */
export async function insertLeadSearch(
  tx: Db,
  s: {
    id: string;
    workspaceId: string;
    tableId: string;
    provider: string;
    kind: LeadSearchKind;
    query: LeadSearchQuery;
    maxResults: number;
    pricePerRow: number;
    columns: Record<string, string>;
    createdBy: string | null;
  },
): Promise<LeadSearchRow> {
  await tx`
    insert into lead_searches (id, workspace_id, table_id, provider, kind, query, max_results, price_per_row, columns, created_by)
    values (${s.id}, ${s.workspaceId}, ${s.tableId}, ${s.provider}, ${s.kind}, ${tx.json(s.query)}, ${s.maxResults}, ${s.pricePerRow},
            ${tx.json(s.columns)}, ${s.createdBy})
    on conflict (id) do nothing`;
  const [row] = await tx<LeadSearchRow[]>`select * from lead_searches where id = ${s.id}`;
  return row!;
}

export async function getLeadSearch(db: Db, workspaceId: string, id: string): Promise<LeadSearchRow | undefined> {
  const [row] = await db<
    LeadSearchRow[]
  >`select * from lead_searches where workspace_id = ${workspaceId} and id = ${id}`;
  return row;
}

export async function readLeadSearch(db: Db, id: string): Promise<LeadSearchRow | undefined> {
  const [row] = await db<LeadSearchRow[]>`select * from lead_searches where id = ${id}`;
  return row;
}

export async function listLeadSearches(
  db: Db,
  workspaceId: string,
  q: { table_id?: string | undefined; limit: number; offset: number },
) {
  const where = db`workspace_id = ${workspaceId} ${q.table_id ? db`and table_id = ${q.table_id}` : db``}`;
  const rows = await db<
    LeadSearchRow[]
  >`select * from lead_searches where ${where} order by created_at desc, id limit ${q.limit} offset ${q.offset}`;
  const [count] = await db<{ n: number }[]>`select count(*)::int as n from lead_searches where ${where}`;
  return { searches: rows.map(toLeadSearch), total_count: count!.n };
}

/** pending → running; false when the search is over already (a retry after it ended). */
export async function beginLeadSearch(db: Db, id: string): Promise<LeadSearchRow | undefined> {
  await db`update lead_searches set status = 'running', started_at = coalesce(started_at, now()), updated_at = now() where id = ${id} and status = 'pending'`;
  const [row] = await db<LeadSearchRow[]>`select * from lead_searches where id = ${id} and status = 'running'`;
  return row;
}

export async function countRateLimited(db: Db, id: string, page: number): Promise<void> {
  await db`update lead_searches set rate_limited = rate_limited + 1, updated_at = now() where id = ${id} and status = 'running' and next_page = ${page}`;
}

/** Ends a search that is not over yet (cancelled, failed, or succeeded with nothing more to read). */
export async function finishLeadSearch(
  db: Db,
  id: string,
  status: 'succeeded' | 'failed' | 'cancelled',
  error: string | null,
): Promise<LeadSearchRow | undefined> {
  await db`
    update lead_searches set status = ${status}, error = ${error}, finished_at = now(), updated_at = now()
    where id = ${id} and status in ('pending', 'running')`;
  return readLeadSearch(db, id);
}

export interface PageOutcome {
  /** False when the page had landed already (or the search ended): nothing changed. */
  applied: boolean;
  landed: number;
  duplicates: number;
  charged: number;
  /** The search is over: no more pages, max_results reached, or credits ran out. */
  done: boolean;
  search: LeadSearchRow;
}

/**
 * Lands one page of a running search. Only the first `max_results - results_seen` results count;
 * new rows are written only as far as the workspace's credits pay for them (price_per_row each),
 * and the search fails saying so when they run out.
 */
export async function landLeadPage(
  sql: Sql,
  p: {
    searchId: string;
    page: number;
    records: (LandRecord | null)[];
    resultsOnPage: number;
    lastPage: boolean;
    totalAvailable: number | null;
  },
): Promise<PageOutcome> {
  return sql.begin(async (tx) => {
    const [s] = await tx<LeadSearchRow[]>`select * from lead_searches where id = ${p.searchId} for update`;
    if (!s || s.status !== 'running' || s.next_page !== p.page)
      return { applied: false, landed: 0, duplicates: 0, charged: 0, done: !s || s.status !== 'running', search: s! };
    const room = Math.max(0, s.max_results - s.results_seen);
    const counted = Math.min(room, p.resultsOnPage);
    // Records keep the page's order; the ones past the room are not read.
    const records = p.records.slice(0, counted).filter((r): r is LandRecord => r !== null);
    await lockTableLanding(tx, s.table_id);
    const affordable =
      s.price_per_row > 0 ? Math.floor((await getBalance(tx, s.workspace_id)).available / s.price_per_row) : undefined;
    const landed = await landRecords(tx, {
      workspaceId: s.workspace_id,
      tableId: s.table_id,
      source: `lead_search:${s.id}`,
      records,
      mode: 'insert',
      ...(affordable === undefined ? {} : { limit: affordable }),
    });
    let charged = 0;
    if (landed.created > 0 && s.price_per_row > 0) {
      const amount = landed.created * s.price_per_row;
      const hold = await holdCredits(tx, {
        workspaceId: s.workspace_id,
        amount,
        causeKey: `lead-search:${s.id}:page:${p.page}`,
      });
      const settled = await settleHold(tx, hold.id, 'charged', amount);
      charged = Number(settled?.charged ?? amount);
    }
    const outOfCredits = landed.leftOut > 0;
    const done = outOfCredits || p.lastPage || s.results_seen + counted >= s.max_results;
    const status = outOfCredits ? 'failed' : done ? 'succeeded' : 'running';
    const error = outOfCredits
      ? `The workspace ran out of credits after ${s.rows_landed + landed.created} rows (${s.price_per_row} per row).`
      : null;
    const [after] = await tx<LeadSearchRow[]>`
      update lead_searches set next_page = next_page + 1, pages_read = pages_read + 1,
        results_seen = results_seen + ${counted}, rows_landed = rows_landed + ${landed.created},
        duplicates = duplicates + ${landed.duplicates}, credits_charged = credits_charged + ${charged},
        total_available = coalesce(${p.totalAvailable}, total_available),
        status = ${status}, error = ${error}, finished_at = ${done ? tx`now()` : null}, updated_at = now()
      where id = ${s.id}
      returning *`;
    return { applied: true, landed: landed.created, duplicates: landed.duplicates, charged, done, search: after! };
  });
}
