/** The lead-search workflow's contract (workflows/sourcing/lead-search.ts): its id, input, query and outcome. */
import { defineQuery } from '@temporalio/workflow';
import { leadSearchWorkflowIdOf } from '../../domain/sourcing/lead-search.js';

export const leadSearchWorkflowId = leadSearchWorkflowIdOf;

export interface LeadSearchInput {
  searchId: string;
  workspaceId: string;
}

/** What the search has done so far: the query `progress` and the memo `progress` (Temporal UI). */
export interface LeadSearchProgress {
  status: string;
  pages_read: number;
  rows_landed: number;
  duplicates: number;
  credits_charged: number;
  rate_limited: number;
  total_available: number | null;
}

export const leadSearchProgressQuery = defineQuery<LeadSearchProgress>('progress');

export type LeadSearchOutcome = { status: 'succeeded' | 'failed' | 'cancelled'; error?: string } | { status: 'ended' };

/** The ApplicationFailure type of a provider's refusal (bad key, bad query): never retried, recorded as the error. */
export const leadSearchRefusedFailure = 'lead_search_refused';
