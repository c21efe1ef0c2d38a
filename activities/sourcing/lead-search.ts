/**
 * Activities of a lead search (workflows/sourcing/lead-search.ts): begin, one page, end; doors to
 * services/sourcing/lead-search.ts. A refusal no retry fixes fails the search.
 */
import { ApplicationFailure } from '@temporalio/activity';
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import { beginLeadSearchRun, landLeadSearchPage, LeadSearchRefusal } from '../../services/sourcing/lead-search.js';
import { finishLeadSearch } from '../../store/sourcing/lead-searches.js';
import { leadSearchRefusedFailure } from '../../workflows/sourcing/lead-search.contract.js';

export interface LeadSearchActivityDeps {
  sql: Sql;
  integrations: Pick<Integrations, 'sourcing'>;
}

const refused = (error: unknown): never => {
  if (error instanceof LeadSearchRefusal)
    throw ApplicationFailure.nonRetryable(error.message, leadSearchRefusedFailure);
  throw error;
};

export function createLeadSearchActivities(deps: LeadSearchActivityDeps) {
  const { sql } = deps;
  return {
    beginLeadSearchRun: ({ searchId }: { searchId: string }) => beginLeadSearchRun(sql, searchId),
    leadSearchPage: (input: { searchId: string; page: number }) =>
      landLeadSearchPage(sql, deps.integrations, input).catch(refused),
    endLeadSearch: async ({
      searchId,
      status,
      error,
    }: {
      searchId: string;
      status: 'failed' | 'cancelled';
      error: string | null;
    }): Promise<void> => {
      await finishLeadSearch(sql, searchId, status, error);
    },
  };
}

export type LeadSearchActivities = ReturnType<typeof createLeadSearchActivities>;
