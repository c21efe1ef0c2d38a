/**
 * Subdomain discovery (decision 042): the domains to look at, each one's certificate-transparency
 * names (backing off on 429, 502 and timeouts), each name confirmed by DNS (A, AAAA, CNAME through
 * the one DNS setting), one row per live subdomain.
 */
import { randomUUID } from 'node:crypto';
import type { Sql } from '../../db/sql.js';
import { notFound, ValidationRefusal } from '../../domain/shared/errors.js';
import { normaliseDomain } from '../../domain/sourcing/lead-search.js';
import {
  subdomainCandidatesMax,
  subdomainColumns,
  subdomainDomainsMax,
  subdomainWorkflowIdOf,
  type SubdomainDiscoveryCreate,
} from '../../domain/sourcing/subdomains.js';
import type { Integrations } from '../../integrations/config.js';
import type { HostAnswer } from '../../integrations/ct-log/resolve.js';
import { SourceFailure } from '../../integrations/lead-search/http.js';
import { ensureInputColumns } from '../../store/sourcing/landing.js';
import {
  beginDiscovery,
  columnValues,
  doneDomains,
  insertDiscovery,
  landDomain,
  readDiscovery,
  type DiscoveryRow,
} from '../../store/sourcing/subdomains.js';
import { loadColumns } from '../../store/tables/columns.js';
import { createTable, requireTable } from '../../store/tables/tables.js';
import { WorkspaceIdKey } from '../../workflows/shared/search-attributes.js';
import { subdomainDiscoveryWorkflow } from '../../workflows/sourcing/subdomains.js';
import type { TemporalHandle } from '../deps.js';

const domainPattern = /^([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$/;

/** A cell's value as a domain (an address or email reduced to its host), or null. */
export function domainFromCell(value: string): string | null {
  const text = value.includes('@') ? value.slice(value.lastIndexOf('@') + 1) : value;
  const d = normaliseDomain(text);
  return d.length <= 253 && domainPattern.test(d) ? d : null;
}

export async function createSubdomainDiscovery(
  sql: Sql,
  temporal: TemporalHandle,
  caller: { workspaceId: string; memberId: string | null },
  input: SubdomainDiscoveryCreate,
) {
  if (input.source_table_id) {
    await requireTable(sql, caller.workspaceId, input.source_table_id);
    const columns = await loadColumns(sql, input.source_table_id);
    if (!columns.byId.has(input.source_column_id!.toLowerCase())) {
      throw new ValidationRefusal([
        {
          loc: ['body', 'source_column_id'],
          msg: 'the source table has no such column',
          type: 'value_error',
          input: input.source_column_id,
        },
      ]);
    }
  }
  let tableId = input.table_id;
  if (tableId) await requireTable(sql, caller.workspaceId, tableId);
  else
    tableId = (
      await createTable(sql, caller, {
        name: input.table_name ?? `Subdomains of ${input.domain ?? 'a column'}`,
        description: 'Made by subdomain discovery',
      })
    ).id;
  const row = await sql.begin<DiscoveryRow>(async (tx) => {
    const byName = await ensureInputColumns(
      tx,
      caller.workspaceId,
      tableId,
      subdomainColumns.map(([, n]) => n),
    );
    return insertDiscovery(tx, {
      workspaceId: caller.workspaceId,
      tableId,
      domain: input.domain ?? null,
      sourceTableId: input.source_table_id ?? null,
      sourceColumnId: input.source_column_id?.toLowerCase() ?? null,
      columns: Object.fromEntries(subdomainColumns.map(([field, name]) => [field, byName[name]!])),
      createdBy: caller.memberId,
    });
  });
  await temporal.client.workflow.start(subdomainDiscoveryWorkflow, {
    taskQueue: temporal.taskQueue,
    workflowId: subdomainWorkflowIdOf(row.id),
    args: [{ discoveryId: row.id, workspaceId: caller.workspaceId }],
    typedSearchAttributes: [{ key: WorkspaceIdKey, value: caller.workspaceId }],
  });
  return row;
}

export async function discoveryDomains(sql: Sql, d: DiscoveryRow): Promise<string[]> {
  if (d.domain) return [d.domain];
  const values = await columnValues(sql, d.source_table_id!, d.source_column_id!, subdomainDomainsMax * 2);
  return [...new Set(values.map(domainFromCell).filter((v): v is string => v !== null))]
    .sort()
    .slice(0, subdomainDomainsMax);
}

/** The CT log's names for a domain, backing off on 429 (as asked), 502 and timeouts: 1, 2, 4, 8 s. Null with why after the last try. */
export async function ctNames(
  integrations: Pick<Integrations, 'sourcing'>,
  domain: string,
  o: { tries?: number; baseDelayMs?: number; beat?: () => void } = {},
): Promise<{ names: string[] } | { error: string }> {
  const tries = o.tries ?? 5;
  for (let n = 1; ; n += 1) {
    try {
      return { names: (await integrations.sourcing.ctLog.names(domain)).slice(0, subdomainCandidatesMax) };
    } catch (error) {
      if (!(error instanceof SourceFailure)) throw error;
      if (!error.retryable || n >= tries) return { error: error.message };
      const wait =
        error.reason === 'rate_limited' && error.retryAfterSeconds !== null
          ? error.retryAfterSeconds * 1000
          : (o.baseDelayMs ?? integrations.sourcing.ctLogBackoffMs) * 2 ** (n - 1);
      o.beat?.();
      await new Promise((r) => setTimeout(r, Math.min(wait, 60_000)));
    }
  }
}

const describe = (a: HostAnswer) =>
  [...a.a.map((x) => `A ${x}`), ...a.aaaa.map((x) => `AAAA ${x}`), ...a.cname.map((x) => `CNAME ${x}`)].join('; ');

/** The names that answer in DNS, with what answered; a name whose lookup failed (not "no such name") is left out. */
export async function liveNames(
  integrations: Pick<Integrations, 'sourcing'>,
  names: string[],
  concurrency = 16,
): Promise<{ name: string; records: string }[]> {
  const out = new Array<{ name: string; records: string } | null>(names.length).fill(null);
  let next = 0;
  const worker = async () => {
    while (next < names.length) {
      const i = next++;
      try {
        const answer = await integrations.sourcing.dns.resolveHost(names[i]!);
        if (answer) out[i] = { name: names[i]!, records: describe(answer) };
      } catch {
        // SERVFAIL or a timeout: not confirmed live.
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, names.length) }, worker));
  return out.filter((x): x is { name: string; records: string } => x !== null);
}

/**
 * One chunk of a discovery, as its workflow (workflows/sourcing/subdomains.ts) runs it: the next
 * `domainsPerChunk` domains not landed yet, each one's CT names confirmed in DNS and landed (a
 * domain whose CT log did not answer is landed with why). `done` once every domain is landed, or
 * the discovery is over or gone. `beat` keeps the activity alive between the slow calls.
 */
export async function discoverSubdomainChunk(
  sql: Sql,
  integrations: Pick<Integrations, 'sourcing'>,
  discoveryId: string,
  o: { domainsPerChunk?: number | undefined; ctBaseDelayMs?: number | undefined; beat: () => void },
): Promise<{ done: boolean; progress: string }> {
  const d = await readDiscovery(sql, discoveryId);
  if (!d || (d.status !== 'pending' && d.status !== 'running')) return { done: true, progress: d?.status ?? 'gone' };
  const domains = await discoveryDomains(sql, d);
  await beginDiscovery(sql, discoveryId, domains.length);
  const done = await doneDomains(sql, discoveryId);
  const todo = domains.filter((x) => !done.has(x)).slice(0, o.domainsPerChunk ?? 20);
  for (const domain of todo) {
    const found = await ctNames(integrations, domain, {
      beat: o.beat,
      ...(o.ctBaseDelayMs === undefined ? {} : { baseDelayMs: o.ctBaseDelayMs }),
    });
    if ('error' in found) {
      await landDomain(sql, d, domain, 0, [], found.error);
      continue;
    }
    const live = await liveNames(integrations, found.names);
    o.beat();
    await landDomain(sql, d, domain, found.names.length, live, null);
  }
  const after = await readDiscovery(sql, discoveryId);
  return {
    done: done.size + todo.length >= domains.length,
    progress: `${after?.domains_done ?? 0}/${domains.length} domains, ${after?.live ?? 0} live subdomains`,
  };
}

export const newDiscoveryId = () => randomUUID();
export const discoveryNotFound = () => notFound('Subdomain discovery');
