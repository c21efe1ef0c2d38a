/** Activities of a subdomain discovery (workflows/sourcing/subdomains.ts): doors to services/sourcing/subdomains.ts. */
import { Context } from '@temporalio/activity';
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import { discoverSubdomainChunk } from '../../services/sourcing/subdomains.js';
import { finishDiscovery } from '../../store/sourcing/subdomains.js';

function beat(): void {
  try {
    Context.current().heartbeat();
  } catch {
    // outside an activity
  }
}

export function createSubdomainActivities(deps: {
  sql: Sql;
  integrations: Pick<Integrations, 'sourcing'>;
  domainsPerChunk?: number;
  ctBaseDelayMs?: number;
}) {
  const { sql } = deps;
  return {
    subdomainChunk: ({ discoveryId }: { discoveryId: string }) =>
      discoverSubdomainChunk(sql, deps.integrations, discoveryId, {
        domainsPerChunk: deps.domainsPerChunk,
        ctBaseDelayMs: deps.ctBaseDelayMs,
        beat,
      }),
    endSubdomainDiscovery: ({
      discoveryId,
      status,
      error,
    }: {
      discoveryId: string;
      status: 'succeeded' | 'failed';
      error: string | null;
    }) => finishDiscovery(sql, discoveryId, status, error),
  };
}

export type SubdomainActivities = ReturnType<typeof createSubdomainActivities>;
