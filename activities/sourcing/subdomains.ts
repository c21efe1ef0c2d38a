/** Activities of a subdomain discovery (workflows/sourcing/subdomains.ts). */
import { Context } from '@temporalio/activity';
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import { ctNames, discoveryDomains, liveNames } from '../../services/sourcing/subdomains.js';
import {
  beginDiscovery,
  doneDomains,
  finishDiscovery,
  landDomain,
  readDiscovery,
} from '../../store/sourcing/subdomains.js';

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
    async subdomainChunk({ discoveryId }: { discoveryId: string }): Promise<{ done: boolean; progress: string }> {
      const d = await readDiscovery(sql, discoveryId);
      if (!d || (d.status !== 'pending' && d.status !== 'running'))
        return { done: true, progress: d?.status ?? 'gone' };
      const domains = await discoveryDomains(sql, d);
      await beginDiscovery(sql, discoveryId, domains.length);
      const done = await doneDomains(sql, discoveryId);
      const todo = domains.filter((x) => !done.has(x)).slice(0, deps.domainsPerChunk ?? 20);
      for (const domain of todo) {
        const found = await ctNames(deps.integrations, domain, {
          beat,
          ...(deps.ctBaseDelayMs === undefined ? {} : { baseDelayMs: deps.ctBaseDelayMs }),
        });
        if ('error' in found) {
          await landDomain(sql, d, domain, 0, [], found.error);
          continue;
        }
        const live = await liveNames(deps.integrations, found.names);
        beat();
        await landDomain(sql, d, domain, found.names.length, live, null);
      }
      const after = await readDiscovery(sql, discoveryId);
      return {
        done: done.size + todo.length >= domains.length,
        progress: `${after?.domains_done ?? 0}/${domains.length} domains, ${after?.live ?? 0} live subdomains`,
      };
    },

    async endSubdomainDiscovery({
      discoveryId,
      status,
      error,
    }: {
      discoveryId: string;
      status: 'succeeded' | 'failed';
      error: string | null;
    }): Promise<void> {
      await finishDiscovery(sql, discoveryId, status, error);
    },
  };
}

export type SubdomainActivities = ReturnType<typeof createSubdomainActivities>;
