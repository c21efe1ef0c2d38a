/**
 * Lead searches from the API and the assistant (decision 041): check the provider and the table,
 * make the table (or match its columns), record the search pending, start its workflow; cancel it.
 * Then the steps its workflow (workflows/sourcing/lead-search.ts) runs: begin, and one page at a
 * time, read from the provider and landed in one guarded transaction.
 */
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import { randomUUID } from 'node:crypto';
import type { Sql } from '../../db/sql.js';
import { ApiError, notFound, ValidationRefusal } from '../../domain/shared/errors.js';
import {
  isLastLeadPage,
  leadColumns,
  leadKey,
  rateLimitWaitSeconds,
  searchTableName,
  type LeadResult,
  type LeadSearchCreate,
  type LeadSearchKind,
} from '../../domain/sourcing/lead-search.js';
import type { Integrations } from '../../integrations/config.js';
import { SourceFailure } from '../../integrations/lead-search/http.js';
import type { LeadSearchProvider } from '../../integrations/lead-search/index.js';
import { ensureInputColumns, type LandRecord } from '../../store/sourcing/landing.js';
import {
  beginLeadSearch,
  countRateLimited,
  finishLeadSearch,
  getLeadSearch,
  insertLeadSearch,
  landLeadPage,
  readLeadSearch,
  toLeadSearch,
  type LeadSearchRow,
} from '../../store/sourcing/lead-searches.js';
import { createTable, requireTable } from '../../store/tables/tables.js';
import { leadSearchWorkflow } from '../../workflows/sourcing/lead-search.js';
import {
  leadSearchWorkflowId,
  type LeadSearchInput,
  type LeadSearchProgress,
} from '../../workflows/sourcing/lead-search.contract.js';
import { WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';
import type { TemporalHandle } from '../deps.js';

/** The page size a search asks for: the provider's, or max_results when smaller; the same for every page of a search. */
export const leadSearchPageSize = (provider: LeadSearchProvider, maxResults: number) =>
  Math.max(1, Math.min(provider.info.page_size, maxResults));

/** Results as table records: cells by the search's columns, keyed by profile URL, email or domain; null for a result nothing identifies. */
export function leadRecords(
  kind: LeadSearchKind,
  columns: Record<string, string>,
  results: LeadResult[],
): (LandRecord | null)[] {
  return results.map((r) => {
    const key = leadKey(kind, r);
    if (!key) return null;
    const cells: Record<string, string | number> = {};
    for (const [field] of leadColumns[kind]) {
      const value = r[field];
      const column = columns[field];
      if (column && value !== null && value !== '')
        cells[column] = typeof value === 'string' ? value.slice(0, 10_000) : value;
    }
    return { key, cells };
  });
}

/** The provider a search runs on: the one named, or the first configured; 422 when there is none or it cannot search this kind. */
export function pickProvider(
  integrations: Pick<Integrations, 'sourcing'>,
  key: string | undefined,
  kind: LeadSearchKind,
): LeadSearchProvider {
  const providers = integrations.sourcing.leadSearch;
  const provider = key ? providers.get(key) : providers.list().find((p) => p.info.kinds.includes(kind));
  const refuse = (msg: string) =>
    new ValidationRefusal([{ loc: ['body', 'provider'], msg, type: 'value_error', input: key ?? null }]);
  if (!provider) {
    throw refuse(
      key
        ? `there is no search provider "${key}" on this service (see GET /lead-searches/providers/)`
        : 'no search provider is configured on this service (set APOLLO_API_KEY)',
    );
  }
  if (!provider.info.kinds.includes(kind)) throw refuse(`the provider ${provider.info.key} does not search ${kind}`);
  return provider;
}

export async function startLeadSearchWorkflow(
  temporal: TemporalHandle,
  search: { id: string; workspace_id: string },
  sql?: Sql,
): Promise<void> {
  const input: LeadSearchInput = { searchId: search.id, workspaceId: search.workspace_id };
  try {
    await temporal.client.workflow.start(leadSearchWorkflow, {
      taskQueue: temporal.taskQueue,
      workflowId: leadSearchWorkflowId(search.id),
      args: [input],
      typedSearchAttributes: [{ key: WorkspaceIdKey, value: search.workspace_id }],
      memo: { progress: 'pending' },
    });
  } catch (error) {
    if (error instanceof WorkflowExecutionAlreadyStartedError) return;
    if (sql)
      await finishLeadSearch(
        sql,
        search.id,
        'failed',
        'The search could not be started (the workflow service did not answer); start it again.',
      ).catch(() => undefined);
    throw error;
  }
}

/**
 * Records a search and starts it. `id` makes the call repeatable (an assistant card passes its
 * own id: a retried apply finds the search it started). A new table is made unless `table_id`.
 */
export async function createLeadSearch(
  sql: Sql,
  temporal: TemporalHandle,
  integrations: Pick<Integrations, 'sourcing'>,
  caller: { workspaceId: string; memberId: string | null },
  input: LeadSearchCreate,
  id: string = randomUUID(),
): Promise<LeadSearchRow> {
  const provider = pickProvider(integrations, input.provider, input.kind);
  const again = await getLeadSearch(sql, caller.workspaceId, id);
  if (again) return again;
  let tableId = input.table_id;
  if (tableId) await requireTable(sql, caller.workspaceId, tableId);
  else
    tableId = (
      await createTable(sql, caller, {
        name: input.table_name ?? searchTableName(input.kind, input.query),
        description: 'Made by a lead search',
      })
    ).id;
  const search = await sql.begin<LeadSearchRow>(async (tx) => {
    await requireTable(tx, caller.workspaceId, tableId);
    const names = leadColumns[input.kind].map(([, name]) => name);
    const byName = await ensureInputColumns(tx, caller.workspaceId, tableId, names);
    const columns = Object.fromEntries(leadColumns[input.kind].map(([field, name]) => [field, byName[name]!]));
    return insertLeadSearch(tx, {
      id,
      workspaceId: caller.workspaceId,
      tableId,
      provider: provider.info.key,
      kind: input.kind,
      query: input.query,
      maxResults: input.max_results,
      pricePerRow: provider.info.price_per_row,
      columns,
      createdBy: caller.memberId,
    });
  });
  await startLeadSearchWorkflow(temporal, search, sql);
  return search;
}

/** Cancels a pending or running search: ended in Postgres at once (no page lands after this), then its workflow is cancelled. 409 when it is over. */
export async function cancelLeadSearch(sql: Sql, temporal: TemporalHandle, workspaceId: string, id: string) {
  const search = await getLeadSearch(sql, workspaceId, id);
  if (!search) throw notFound('Lead search');
  if (search.status !== 'pending' && search.status !== 'running')
    throw new ApiError('conflict', `The search is ${search.status} already.`);
  const ended = await finishLeadSearch(sql, id, 'cancelled', null);
  try {
    await temporal.client.workflow.getHandle(leadSearchWorkflowId(id)).cancel();
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) throw error;
  }
  return toLeadSearch(ended!);
}

// ---------------------------------------------------------------------------------------------
// The search's run, page by page. A retried page finds the cursor moved and changes nothing; a 429
// is answered to the workflow, which waits on a durable timer.

/** A refusal no retry fixes (the provider gone from the service, a refused key or query): the search fails with it. */
export class LeadSearchRefusal extends Error {
  override name = 'LeadSearchRefusal';
}

const progressOf = (s: LeadSearchRow): LeadSearchProgress => ({
  status: s.status,
  pages_read: s.pages_read,
  rows_landed: s.rows_landed,
  duplicates: s.duplicates,
  credits_charged: Number(s.credits_charged),
  rate_limited: s.rate_limited,
  total_available: s.total_available,
});

export type LeadPageStep =
  | { kind: 'landed'; nextPage: number; progress: LeadSearchProgress }
  | { kind: 'ended'; progress: LeadSearchProgress }
  | { kind: 'rate_limited'; waitSeconds: number };

/** Pending → running; the page to read next and the progress so far, or null when the search is not running. */
export async function beginLeadSearchRun(
  sql: Sql,
  searchId: string,
): Promise<{ nextPage: number; progress: LeadSearchProgress } | null> {
  const s = await beginLeadSearch(sql, searchId);
  return s ? { nextPage: s.next_page, progress: progressOf(s) } : null;
}

/**
 * Reads page `page` of the search from its provider and lands it (landLeadPage: the records, the
 * cursor and the credits in one transaction). A page landed already answers where the search is;
 * a search over answers `ended`; a 429 is counted and answered with the wait it asks for.
 */
export async function landLeadSearchPage(
  sql: Sql,
  integrations: Pick<Integrations, 'sourcing'>,
  { searchId, page }: { searchId: string; page: number },
): Promise<LeadPageStep> {
  const s = await readLeadSearch(sql, searchId);
  if (!s || s.status !== 'running')
    return {
      kind: 'ended',
      progress: s ? progressOf(s) : { ...progressOf({ status: 'failed' } as LeadSearchRow) },
    };
  if (s.next_page !== page) return { kind: 'landed', nextPage: s.next_page, progress: progressOf(s) };
  const provider = integrations.sourcing.leadSearch.get(s.provider);
  if (!provider)
    throw new LeadSearchRefusal(`The search provider ${s.provider} is no longer configured on this service.`);
  const perPage = leadSearchPageSize(provider, s.max_results);
  let answer;
  try {
    answer = await provider.search(s.kind, s.query, page, perPage);
  } catch (error) {
    if (error instanceof SourceFailure) {
      if (error.reason === 'rate_limited') {
        await countRateLimited(sql, searchId, page);
        return { kind: 'rate_limited', waitSeconds: rateLimitWaitSeconds(error.retryAfterSeconds) };
      }
      if (!error.retryable) throw new LeadSearchRefusal(error.message);
    }
    throw error;
  }
  const lastPage = isLastLeadPage(page, {
    resultsOnPage: answer.results.length,
    perPage,
    totalPages: answer.totalPages,
  });
  const outcome = await landLeadPage(sql, {
    searchId,
    page,
    records: leadRecords(s.kind, s.columns, answer.results),
    resultsOnPage: answer.results.length,
    lastPage,
    totalAvailable: answer.totalEntries,
  });
  const after = outcome.search ?? s;
  return after.status === 'running'
    ? { kind: 'landed', nextPage: after.next_page, progress: progressOf(after) }
    : { kind: 'ended', progress: progressOf(after) };
}
