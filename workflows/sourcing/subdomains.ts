/**
 * One subdomain discovery (decision 042): its domains in chunks, each domain's live subdomains
 * landed with the domain marked done in one transaction, so a retried chunk skips what it did.
 */
import { proxyActivities, upsertMemo } from '@temporalio/workflow';
import type { SubdomainActivities } from '../../activities/sourcing/subdomains.js';

const { subdomainChunk } = proxyActivities<SubdomainActivities>({
  startToCloseTimeout: '15 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '2 minutes', maximumAttempts: 5 },
});
const { endSubdomainDiscovery } = proxyActivities<SubdomainActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { maximumAttempts: 20 },
});

export async function subdomainDiscoveryWorkflow(input: {
  discoveryId: string;
  workspaceId: string;
}): Promise<{ status: 'succeeded' | 'failed' }> {
  try {
    for (;;) {
      const chunk = await subdomainChunk({ discoveryId: input.discoveryId });
      upsertMemo({ progress: chunk.progress });
      if (chunk.done) break;
    }
  } catch {
    await endSubdomainDiscovery({
      discoveryId: input.discoveryId,
      status: 'failed',
      error: 'The discovery stopped after several failed tries; start it again.',
    });
    return { status: 'failed' };
  }
  await endSubdomainDiscovery({ discoveryId: input.discoveryId, status: 'succeeded', error: null });
  return { status: 'succeeded' };
}
