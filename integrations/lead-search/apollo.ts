/**
 * Apollo.io's search API (https://docs.apollo.io/reference/people-api-search and
 * .../organization-search): `POST {base}/api/v1/mixed_people/api_search` and
 * `POST {base}/api/v1/mixed_companies/search`, the key in the `x-api-key` header, filters in the
 * JSON body (`person_titles`, `person_seniorities`, `person_locations`,
 * `q_organization_domains_list`, `organization_num_employees_ranges`, `q_keywords`, ...), `page`
 * from 1 and `per_page` up to 100. The answer holds `people` (or `organizations`) and
 * `pagination: {page, per_page, total_entries, total_pages}`. Too many requests is 429.
 */
import type { LeadResult, LeadSearchKind, LeadSearchQuery } from '../../domain/sourcing/lead-search.js';
import { requestJson, SourceFailure } from './http.js';
import type { LeadSearchPage, LeadSearchProvider } from './index.js';

export interface ApolloConfig {
  apiKey: string;
  /** https://api.apollo.io by default; a test points it at the local twin (sim/lead-search-server.ts). */
  baseUrl: string;
  pricePerRow: number;
  timeoutMs?: number;
  /** Results asked per page (Apollo's most, 100, by default; a smaller one in tests). */
  pageSize?: number;
}

export const apolloPageSizeMax = 100;

interface ApolloOrganization {
  name?: string | null;
  primary_domain?: string | null;
  website_url?: string | null;
  linkedin_url?: string | null;
  industry?: string | null;
  estimated_num_employees?: number | null;
  city?: string | null;
  state?: string | null;
  country?: string | null;
}

interface ApolloPerson {
  name?: string | null;
  first_name?: string | null;
  last_name?: string | null;
  title?: string | null;
  seniority?: string | null;
  email?: string | null;
  linkedin_url?: string | null;
  city?: string | null;
  state?: string | null;
  country?: string | null;
  organization?: ApolloOrganization | null;
}

interface ApolloAnswer {
  people?: ApolloPerson[];
  organizations?: ApolloOrganization[];
  pagination?: { page?: number; per_page?: number; total_entries?: number; total_pages?: number };
}

const text = (v: unknown): string | null => (typeof v === 'string' && v.trim() !== '' ? v.trim() : null);
const place = (o: { city?: string | null; state?: string | null; country?: string | null }) =>
  [o.city, o.state, o.country].map(text).filter(Boolean).join(', ') || null;

/** The request body Apollo documents, from our query. */
export function apolloBody(
  kind: LeadSearchKind,
  q: LeadSearchQuery,
  page: number,
  perPage: number,
): Record<string, unknown> {
  const body: Record<string, unknown> = { page, per_page: perPage };
  if (kind === 'people') {
    if (q.titles?.length) body.person_titles = q.titles;
    if (q.seniorities?.length) body.person_seniorities = q.seniorities;
    if (q.departments?.length) body.person_department_or_subdepartments = q.departments;
    if (q.locations?.length) body.person_locations = q.locations;
    if (q.company_domains?.length) body.q_organization_domains_list = q.company_domains;
  } else {
    if (q.locations?.length) body.organization_locations = q.locations;
    if (q.company_domains?.length) body.q_organization_domains_list = q.company_domains;
  }
  if (q.industries?.length) body.q_organization_keyword_tags = q.industries;
  if (q.head_count_ranges?.length) body.organization_num_employees_ranges = q.head_count_ranges;
  if (q.keywords) body.q_keywords = q.keywords;
  return body;
}

function personResult(p: ApolloPerson): LeadResult {
  const o = p.organization ?? {};
  const first = text(p.first_name);
  const last = text(p.last_name);
  return {
    name: text(p.name) ?? ([first, last].filter(Boolean).join(' ') || null),
    first_name: first,
    last_name: last,
    title: text(p.title),
    seniority: text(p.seniority),
    // Apollo's placeholder for an email it will not reveal in search.
    email: text(p.email) && !/not_unlocked|domain\.com$/i.test(p.email!) ? text(p.email) : null,
    profile_url: text(p.linkedin_url),
    company: text(o.name),
    company_domain: text(o.primary_domain),
    website: text(o.website_url),
    industry: text(o.industry),
    head_count: typeof o.estimated_num_employees === 'number' ? o.estimated_num_employees : null,
    location: place(p),
  };
}

function companyResult(o: ApolloOrganization): LeadResult {
  return {
    name: text(o.name),
    first_name: null,
    last_name: null,
    title: null,
    seniority: null,
    email: null,
    profile_url: text(o.linkedin_url),
    company: text(o.name),
    company_domain: text(o.primary_domain),
    website: text(o.website_url),
    industry: text(o.industry),
    head_count: typeof o.estimated_num_employees === 'number' ? o.estimated_num_employees : null,
    location: place(o),
  };
}

export function apolloProvider(config: ApolloConfig): LeadSearchProvider {
  const base = config.baseUrl.replace(/\/+$/, '');
  return {
    info: {
      key: 'apollo',
      name: 'Apollo.io people and company search',
      kinds: ['people', 'companies'],
      price_per_row: config.pricePerRow,
      page_size: Math.min(apolloPageSizeMax, config.pageSize ?? apolloPageSizeMax),
    },
    async search(kind, query, page, perPage, signal): Promise<LeadSearchPage> {
      const path = kind === 'people' ? '/api/v1/mixed_people/api_search' : '/api/v1/mixed_companies/search';
      const answer = await requestJson(`${base}${path}`, {
        method: 'POST',
        headers: { 'x-api-key': config.apiKey, 'cache-control': 'no-cache' },
        body: apolloBody(kind, query, page, Math.min(perPage, apolloPageSizeMax)),
        timeoutMs: config.timeoutMs ?? 30_000,
        who: 'Apollo',
        ...(signal ? { signal } : {}),
      });
      const body = (answer.body ?? {}) as ApolloAnswer;
      const list = kind === 'people' ? body.people : body.organizations;
      if (!Array.isArray(list))
        throw new SourceFailure(
          'refused',
          `Apollo answered without a list of ${kind === 'people' ? 'people' : 'organizations'}.`,
        );
      const results =
        kind === 'people'
          ? (list as ApolloPerson[]).map(personResult)
          : (list as ApolloOrganization[]).map(companyResult);
      return {
        results,
        page: body.pagination?.page ?? page,
        totalPages: body.pagination?.total_pages ?? (results.length < perPage ? page : page + 1),
        totalEntries: body.pagination?.total_entries ?? null,
      };
    },
  };
}
