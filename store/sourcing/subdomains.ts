/**
 * Subdomain discoveries (decision 042): a domain's live subdomains land with the domain marked
 * done, in one transaction.
 */
import type { Db, Sql } from '../../db/sql.js';
import { subdomainWorkflowIdOf, type SubdomainDiscovery } from '../../domain/sourcing/subdomains.js';
import { landRecords, lockTableLanding } from './landing.js';

export interface DiscoveryRow {
  id: string;
  workspace_id: string;
  table_id: string;
  domain: string | null;
  source_table_id: string | null;
  source_column_id: string | null;
  status: SubdomainDiscovery['status'];
  domains_total: number;
  domains_done: number;
  candidates: number;
  live: number;
  rows_landed: number;
  columns: Record<string, string>;
  error: string | null;
  created_at: Date;
  finished_at: Date | null;
}

export const toDiscovery = ({ workspace_id: _w, columns: _c, ...d }: DiscoveryRow): SubdomainDiscovery => ({
  ...d,
  created_at: d.created_at.toISOString(),
  finished_at: d.finished_at ? d.finished_at.toISOString() : null,
  workflow_id: subdomainWorkflowIdOf(d.id),
});

export async function insertDiscovery(
  db: Db,
  d: {
    workspaceId: string;
    tableId: string;
    domain: string | null;
    sourceTableId: string | null;
    sourceColumnId: string | null;
    columns: Record<string, string>;
    createdBy: string | null;
  },
) {
  const [row] = await db<DiscoveryRow[]>`
    insert into subdomain_discoveries (workspace_id, table_id, domain, source_table_id, source_column_id, columns, created_by)
    values (${d.workspaceId}, ${d.tableId}, ${d.domain}, ${d.sourceTableId}, ${d.sourceColumnId}, ${db.json(d.columns)}, ${d.createdBy}) returning *`;
  return row!;
}

export async function getDiscovery(db: Db, workspaceId: string, id: string): Promise<DiscoveryRow | undefined> {
  const [row] = await db<
    DiscoveryRow[]
  >`select * from subdomain_discoveries where workspace_id = ${workspaceId} and id = ${id}`;
  return row;
}

export async function readDiscovery(db: Db, id: string): Promise<DiscoveryRow | undefined> {
  const [row] = await db<DiscoveryRow[]>`select * from subdomain_discoveries where id = ${id}`;
  return row;
}

/** The domains to look at (a column's distinct values, cleaned by the caller) and the ones done already. */
export async function columnValues(db: Db, tableId: string, columnId: string, limit: number): Promise<string[]> {
  const rows = await db<{ v: string }[]>`
    select distinct cells ->> ${columnId} as v from table_rows where table_id = ${tableId} and cells ->> ${columnId} is not null limit ${limit}`;
  return rows.map((r) => r.v);
}

export async function doneDomains(db: Db, id: string): Promise<Set<string>> {
  const rows = await db<
    { domain: string }[]
  >`select domain from subdomain_discovery_domains where discovery_id = ${id}`;
  return new Set(rows.map((r) => r.domain));
}

export async function beginDiscovery(db: Db, id: string, total: number): Promise<void> {
  await db`update subdomain_discoveries set status = 'running', domains_total = ${total}, started_at = coalesce(started_at, now()), updated_at = now() where id = ${id} and status in ('pending', 'running')`;
}

/** Lands one domain's live subdomains and marks it done, once (a domain done before changes nothing). */
export async function landDomain(
  sql: Sql,
  d: DiscoveryRow,
  domain: string,
  candidates: number,
  live: { name: string; records: string }[],
  error: string | null,
): Promise<boolean> {
  return sql.begin<boolean>(async (tx) => {
    const marked = await tx`
      insert into subdomain_discovery_domains (discovery_id, domain, candidates, live, error) values (${d.id}, ${domain}, ${candidates}, ${live.length}, ${error})
      on conflict do nothing`;
    if (marked.count === 0) return false;
    await lockTableLanding(tx, d.table_id);
    const landed = await landRecords(tx, {
      workspaceId: d.workspace_id,
      tableId: d.table_id,
      source: `subdomains:${d.id}`,
      mode: 'upsert',
      records: live.map((l) => ({
        key: `subdomain:${l.name}`,
        cells: { [d.columns.subdomain!]: l.name, [d.columns.domain!]: domain, [d.columns.records!]: l.records },
      })),
    });
    await tx`
      update subdomain_discoveries set domains_done = domains_done + 1, candidates = candidates + ${candidates}, live = live + ${live.length},
        rows_landed = rows_landed + ${landed.created}, updated_at = now() where id = ${d.id}`;
    return true;
  });
}

export async function finishDiscovery(
  db: Db,
  id: string,
  status: 'succeeded' | 'failed',
  error: string | null,
): Promise<void> {
  await db`update subdomain_discoveries set status = ${status}, error = ${error}, finished_at = now(), updated_at = now() where id = ${id} and status in ('pending', 'running')`;
}
