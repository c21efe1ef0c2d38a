/**
 * Activities of a lead search (workflows/sourcing/lead-search.ts): begin, one page (read from the
 * provider and landed in one guarded transaction), end. A retried page finds the cursor moved
 * and changes nothing; a 429 is answered to the workflow, which waits on a durable timer.
 */
import { ApplicationFailure } from '@temporalio/activity';
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import { SourceFailure } from '../../integrations/lead-search/http.js';
import { leadRecords, leadSearchPageSize } from '../../services/sourcing/lead-search.js';
import {
  beginLeadSearch,
  countRateLimited,
  finishLeadSearch,
  landLeadPage,
  readLeadSearch,
  type LeadSearchRow,
} from '../../store/sourcing/lead-searches.js';
import { leadSearchRefusedFailure, type LeadSearchProgress } from '../../workflows/sourcing/lead-search.contract.js';

export interface LeadSearchActivityDeps {
  sql: Sql;
  integrations: Pick<Integrations, 'sourcing'>;
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

/** The wait after a 429: what the provider asked (Retry-After), else 30 s; 1 s to 1 h. */
export const rateLimitWaitSeconds = (asked: number | null) => Math.min(3600, Math.max(1, asked ?? 30));

export function createLeadSearchActivities(deps: LeadSearchActivityDeps) {
  const { sql } = deps;
  return {
    async beginLeadSearchRun({
      searchId,
    }: {
      searchId: string;
    }): Promise<{ nextPage: number; progress: LeadSearchProgress } | null> {
      const s = await beginLeadSearch(sql, searchId);
      return s ? { nextPage: s.next_page, progress: progressOf(s) } : null;
    },

    async leadSearchPage({ searchId, page }: { searchId: string; page: number }): Promise<LeadPageStep> {
      const s = await readLeadSearch(sql, searchId);
      if (!s || s.status !== 'running')
        return {
          kind: 'ended',
          progress: s ? progressOf(s) : { ...progressOf({ status: 'failed' } as LeadSearchRow) },
        };
      if (s.next_page !== page) return { kind: 'landed', nextPage: s.next_page, progress: progressOf(s) };
      const provider = deps.integrations.sourcing.leadSearch.get(s.provider);
      if (!provider)
        throw ApplicationFailure.nonRetryable(
          `The search provider ${s.provider} is no longer configured on this service.`,
          leadSearchRefusedFailure,
        );
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
          if (!error.retryable) throw ApplicationFailure.nonRetryable(error.message, leadSearchRefusedFailure);
        }
        throw error;
      }
      const lastPage = answer.results.length === 0 || answer.results.length < perPage || page >= answer.totalPages;
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
    },

    async endLeadSearch({
      searchId,
      status,
      error,
    }: {
      searchId: string;
      status: 'failed' | 'cancelled';
      error: string | null;
    }): Promise<void> {
      await finishLeadSearch(sql, searchId, status, error);
    },
  };
}

export type LeadSearchActivities = ReturnType<typeof createLeadSearchActivities>;
