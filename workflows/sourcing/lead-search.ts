/**
 * One lead search (decision 041): page after page from the provider, each page landed in the table
 * in one guarded transaction (rows, keys, credits, counters), until the provider has no more,
 * max_results is reached or credits run out. A 429 is waited out on a durable timer for as long as
 * the provider asked. Cancelling the workflow ends the search `cancelled` (rows landed so far stay,
 * and were paid for). Progress is the query `progress` and the memo.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  isCancellation,
  proxyActivities,
  setHandler,
  sleep,
  upsertMemo,
} from '@temporalio/workflow';
import type { LeadSearchActivities } from '../../activities/sourcing/lead-search.js';
import {
  leadSearchProgressQuery,
  leadSearchRefusedFailure,
  type LeadSearchInput,
  type LeadSearchOutcome,
  type LeadSearchProgress,
} from './lead-search.contract.js';

const { leadSearchPage } = proxyActivities<LeadSearchActivities>({
  startToCloseTimeout: '2 minutes',
  retry: {
    initialInterval: '2 seconds',
    backoffCoefficient: 2,
    maximumInterval: '2 minutes',
    maximumAttempts: 8,
    nonRetryableErrorTypes: [leadSearchRefusedFailure],
  },
});
const { beginLeadSearchRun, endLeadSearch } = proxyActivities<LeadSearchActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 20 },
});

function failureMessage(error: unknown): string {
  if (error instanceof ActivityFailure && error.cause instanceof ApplicationFailure) return error.cause.message;
  return 'The search stopped because the provider could not be reached after several tries; start it again later.';
}

export async function leadSearchWorkflow(input: LeadSearchInput): Promise<LeadSearchOutcome> {
  const progress: LeadSearchProgress = {
    status: 'pending',
    pages_read: 0,
    rows_landed: 0,
    duplicates: 0,
    credits_charged: 0,
    rate_limited: 0,
    total_available: null,
  };
  setHandler(leadSearchProgressQuery, () => progress);
  const show = (p: Partial<LeadSearchProgress>) => {
    Object.assign(progress, p);
    upsertMemo({
      progress: `${progress.status}: ${progress.rows_landed} rows, ${progress.duplicates} duplicates, ${progress.pages_read} pages, ${progress.credits_charged} credits`,
    });
  };
  try {
    const begun = await beginLeadSearchRun({ searchId: input.searchId });
    if (!begun) return { status: 'ended' };
    show(begun.progress);
    let page = begun.nextPage;
    for (;;) {
      const step = await leadSearchPage({ searchId: input.searchId, page });
      if (step.kind === 'rate_limited') {
        show({ rate_limited: progress.rate_limited + 1 });
        await sleep(step.waitSeconds * 1000);
        continue;
      }
      show(step.progress);
      if (step.kind === 'ended')
        return step.progress.status === 'succeeded' ||
          step.progress.status === 'failed' ||
          step.progress.status === 'cancelled'
          ? { status: step.progress.status }
          : { status: 'ended' };
      page = step.nextPage;
    }
  } catch (error) {
    if (isCancellation(error)) {
      await CancellationScope.nonCancellable(() =>
        endLeadSearch({ searchId: input.searchId, status: 'cancelled', error: null }),
      );
      show({ status: 'cancelled' });
      return { status: 'cancelled' };
    }
    const message = failureMessage(error);
    await endLeadSearch({ searchId: input.searchId, status: 'failed', error: message });
    show({ status: 'failed' });
    return { status: 'failed', error: message };
  }
}
