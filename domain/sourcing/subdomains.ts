/** Subdomain discovery (decision 042): certificate-transparency names of a domain, each confirmed by DNS. */
import { z } from 'zod';
import { NameSchema, TimestampSchema, UuidSchema } from '../shared/common.js';
import { DomainNameSchema } from './lead-search.js';

export const subdomainDomainsMax = 1000;
export const subdomainCandidatesMax = 2000;

export const SubdomainDiscoveryCreateSchema = z
  .strictObject({
    domain: DomainNameSchema.optional().describe('One company domain'),
    source_table_id: UuidSchema.optional().describe(
      'A table whose column holds company domains (with source_column_id)',
    ),
    source_column_id: UuidSchema.optional(),
    table_id: UuidSchema.optional().describe('Land the subdomains in this table; omit to make a new table'),
    table_name: NameSchema.optional(),
  })
  .refine((v) => (v.domain === undefined) !== (v.source_column_id === undefined && v.source_table_id === undefined), {
    message: 'give either domain, or source_table_id with source_column_id',
    path: ['domain'],
  })
  .refine((v) => (v.source_table_id === undefined) === (v.source_column_id === undefined), {
    message: 'source_table_id and source_column_id go together',
    path: ['source_column_id'],
  })
  .refine((v) => !(v.table_id && v.table_name), {
    message: 'give table_id or table_name, not both',
    path: ['table_name'],
  })
  .meta({ id: 'SubdomainDiscoveryCreate' });
export type SubdomainDiscoveryCreate = z.infer<typeof SubdomainDiscoveryCreateSchema>;

export const SubdomainDiscoverySchema = z
  .object({
    id: UuidSchema,
    table_id: UuidSchema,
    domain: z.string().nullable(),
    source_table_id: UuidSchema.nullable(),
    source_column_id: UuidSchema.nullable(),
    status: z.enum(['pending', 'running', 'succeeded', 'failed', 'cancelled']),
    domains_total: z.int(),
    domains_done: z.int(),
    candidates: z.int().describe('Names found in certificate-transparency logs'),
    live: z.int().describe('Names that answer in DNS (A, AAAA or CNAME)'),
    rows_landed: z.int().describe('New rows (a subdomain the table has already is not added again)'),
    error: z.string().nullable(),
    created_at: TimestampSchema,
    finished_at: TimestampSchema.nullable(),
    workflow_id: z.string(),
  })
  .meta({ id: 'SubdomainDiscovery' });
export type SubdomainDiscovery = z.infer<typeof SubdomainDiscoverySchema>;

export const subdomainColumns: [string, string][] = [
  ['subdomain', 'Subdomain'],
  ['domain', 'Domain'],
  ['records', 'DNS answer'],
];

export const subdomainWorkflowIdOf = (id: string) => `subdomain-discovery/${id}`;
