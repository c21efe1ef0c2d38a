/**
 * A local twin of Apollo.io's search API (the subset integrations/lead-search/apollo.ts uses):
 * `POST /api/v1/mixed_people/api_search` and `POST /api/v1/mixed_companies/search`, the key in
 * `x-api-key` (else 401), `page` from 1 and `per_page` up to 100, answers `{people|organizations,
 * pagination: {page, per_page, total_entries, total_pages}}`. Filters narrow by title and domain.
 * `rateLimit` answers 429 with Retry-After to the requests it picks, as Apollo does when a plan's
 * per-minute allowance is spent.
 */
import { serveHttp } from './local-http.js';

export interface TwinPerson {
  id: string;
  name: string;
  first_name: string;
  last_name: string;
  title: string;
  seniority: string;
  email: string | null;
  linkedin_url: string | null;
  city: string;
  country: string;
  organization: {
    name: string;
    primary_domain: string;
    website_url: string;
    industry: string;
    estimated_num_employees: number;
    linkedin_url: string;
  };
}

/** `n` people at `companies` companies; person i is the same person in every call. */
export function twinPeople(n: number, companies = 10): TwinPerson[] {
  return Array.from({ length: n }, (_, i) => {
    const c = i % companies;
    const domain = `company${c}.example`;
    return {
      id: `p${i}`,
      name: `Person ${i}`,
      first_name: 'Person',
      last_name: String(i),
      title: i % 2 ? 'Head of Sales' : 'VP Marketing',
      seniority: i % 2 ? 'head' : 'vp',
      email: i % 3 === 0 ? `person${i}@${domain}` : null,
      linkedin_url: `https://www.linkedin.com/in/person-${i}`,
      city: 'Berlin',
      country: 'Germany',
      organization: {
        name: `Company ${c}`,
        primary_domain: domain,
        website_url: `https://${domain}`,
        industry: 'Software',
        estimated_num_employees: 50 + c,
        linkedin_url: `https://www.linkedin.com/company/company-${c}`,
      },
    };
  });
}

export interface LeadSearchTwinOptions {
  apiKey: string;
  people: TwinPerson[];
  /** Answers 429 (Retry-After: retryAfter seconds, 1 by default) when this says so for the n-th search request (from 1). */
  rateLimit?: (n: number) => boolean;
  retryAfter?: number;
}

export async function serveLeadSearchTwin(options: LeadSearchTwinOptions) {
  let searches = 0;
  const server = await serveHttp((req, res, body) => {
    res.setHeader('content-type', 'application/json');
    const send = (status: number, payload: unknown) => {
      res.statusCode = status;
      res.end(JSON.stringify(payload));
    };
    const path = (req.url ?? '').split('?')[0];
    const people = path === '/api/v1/mixed_people/api_search';
    if (req.method !== 'POST' || (!people && path !== '/api/v1/mixed_companies/search'))
      return send(404, { error: 'Not found' });
    if (req.headers['x-api-key'] !== options.apiKey)
      return send(401, { error: 'Invalid access credentials.', error_code: 'INVALID_API_KEY' });
    searches += 1;
    if (options.rateLimit?.(searches)) {
      res.setHeader('retry-after', String(options.retryAfter ?? 1));
      return send(429, {
        message: 'The maximum number of api calls allowed for api/v1/mixed_people/api_search is 50 times per minute.',
      });
    }
    let q: Record<string, unknown>;
    try {
      q = JSON.parse(body || '{}') as Record<string, unknown>;
    } catch {
      return send(422, { error: 'Invalid JSON' });
    }
    const page = Number(q.page ?? 1);
    const perPage = Number(q.per_page ?? 10);
    if (
      !Number.isInteger(page) ||
      page < 1 ||
      page > 500 ||
      !Number.isInteger(perPage) ||
      perPage < 1 ||
      perPage > 100
    ) {
      return send(422, { error: 'page must be 1 to 500 and per_page 1 to 100' });
    }
    const titles = (q.person_titles as string[] | undefined)?.map((t) => t.toLowerCase());
    const domains = q.q_organization_domains_list as string[] | undefined;
    let found = options.people.filter(
      (p) =>
        (!people || !titles?.length || titles.some((t) => p.title.toLowerCase().includes(t))) &&
        (!domains?.length || domains.includes(p.organization.primary_domain)),
    );
    if (!people) found = [...new Map(found.map((p) => [p.organization.primary_domain, p])).values()];
    const slice = found.slice((page - 1) * perPage, page * perPage);
    const pagination = {
      page,
      per_page: perPage,
      total_entries: found.length,
      total_pages: Math.ceil(found.length / perPage),
    };
    if (people) return send(200, { people: slice, pagination });
    return send(200, {
      organizations: slice.map((p) => ({ ...p.organization, city: p.city, country: p.country })),
      pagination,
    });
  });
  return { ...server, searchCount: () => searches };
}
