/**
 * Lead searches (decision 041): a query for people or companies run against a search provider and
 * landed in a table, one row per result, deduplicated by a stable key. Pure schemas and rules.
 */
import { z } from 'zod';
import { lineSchema, NameSchema, queryInteger, textSchema, TimestampSchema, UuidSchema } from '../shared/common.js';

export const LeadSearchKindSchema = z
  .enum(['people', 'companies'])
  .describe('What the search finds: people (contacts) or companies');
export type LeadSearchKind = z.infer<typeof LeadSearchKindSchema>;

export const leadSearchMaxResults = 10_000;
export const leadSearchListMax = 25;
const term = textSchema(1, 200);
const terms = (what: string) =>
  z.array(term).max(leadSearchListMax).optional().describe(`${what} (any of them; at most ${leadSearchListMax})`);

/** A head-count range as "min,max" (e.g. "11,50"; "10001," for no upper bound). */
export const HeadCountRangeSchema = z
  .string()
  .regex(/^\d{1,7},\d{0,7}$/, 'must be "min,max" head counts, e.g. "11,50" (max may be empty)')
  .refine((s) => {
    const [lo, hi] = s.split(',');
    return hi === '' || Number(lo) <= Number(hi);
  }, 'the minimum must not exceed the maximum');

export const SenioritySchema = z.enum([
  'owner',
  'founder',
  'c_suite',
  'partner',
  'vp',
  'head',
  'director',
  'manager',
  'senior',
  'entry',
  'intern',
]);

export const DomainNameSchema = z
  .string()
  .min(3)
  .max(253)
  .regex(
    /^(?=.{3,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$/i,
    'must be a domain name such as example.com',
  )
  .transform((d) => d.toLowerCase());

export const LeadSearchQuerySchema = z
  .strictObject({
    titles: terms('Job titles'),
    seniorities: z.array(SenioritySchema).max(11).optional().describe('Seniorities (people only)'),
    departments: terms('Departments (people only)'),
    locations: terms('Locations: cities, states or countries'),
    company_domains: z
      .array(DomainNameSchema)
      .max(leadSearchListMax)
      .optional()
      .describe(`Company domains (at most ${leadSearchListMax})`),
    industries: terms('Industries'),
    head_count_ranges: z
      .array(HeadCountRangeSchema)
      .max(10)
      .optional()
      .describe('Company head-count ranges, "min,max"'),
    keywords: textSchema(1, 500).optional().describe('Free-text keywords'),
  })
  .meta({ id: 'LeadSearchQuery' });
export type LeadSearchQuery = z.infer<typeof LeadSearchQuerySchema>;

export const LeadSearchCreateSchema = z
  .strictObject({
    kind: LeadSearchKindSchema.default('people'),
    provider: lineSchema(1, 64)
      .optional()
      .describe('A provider key from GET /lead-searches/providers/; the first listed when omitted'),
    query: LeadSearchQuerySchema,
    max_results: z
      .int()
      .min(1)
      .max(leadSearchMaxResults)
      .default(100)
      .describe(`Stop after this many results (1 to ${leadSearchMaxResults})`),
    table_id: UuidSchema.optional().describe('Land results in this table; omit to make a new table'),
    table_name: NameSchema.optional().describe(
      'The new table’s name (with no table_id); made from the query when omitted',
    ),
  })
  .refine((v) => !(v.table_id && v.table_name), {
    message: 'give table_id or table_name, not both',
    path: ['table_name'],
  })
  .meta({ id: 'LeadSearchCreate' });
export type LeadSearchCreate = z.infer<typeof LeadSearchCreateSchema>;

export const LeadSearchStatusSchema = z.enum(['pending', 'running', 'succeeded', 'failed', 'cancelled']);
export type LeadSearchStatus = z.infer<typeof LeadSearchStatusSchema>;

export const LeadSearchSchema = z
  .object({
    id: UuidSchema,
    table_id: UuidSchema,
    provider: z.string(),
    kind: LeadSearchKindSchema,
    query: LeadSearchQuerySchema,
    max_results: z.int(),
    price_per_row: z.int().describe('Credits charged per row landed (a duplicate costs nothing)'),
    status: LeadSearchStatusSchema,
    pages_read: z.int(),
    total_available: z.int().nullable().describe('How many results the provider says match'),
    results_seen: z.int(),
    rows_landed: z.int().describe('New rows written to the table'),
    duplicates: z.int().describe('Results whose key (profile URL, email or domain) the table already had'),
    credits_charged: z.int(),
    rate_limited: z.int().describe('Times the provider asked to slow down (each waited out)'),
    error: z.string().nullable(),
    created_at: TimestampSchema,
    started_at: TimestampSchema.nullable(),
    finished_at: TimestampSchema.nullable(),
    workflow_id: z.string().describe('The Temporal workflow running it'),
  })
  .meta({ id: 'LeadSearch' });
export type LeadSearch = z.infer<typeof LeadSearchSchema>;

export const LeadSearchListQuerySchema = z.object({
  table_id: UuidSchema.optional(),
  limit: queryInteger(z.int().min(1).max(100).default(25)),
  offset: queryInteger(z.int().min(0).max(100_000).default(0)),
});
export const LeadSearchPageSchema = z
  .object({ searches: z.array(LeadSearchSchema), total_count: z.int() })
  .meta({ id: 'LeadSearchPage' });

export const LeadSearchProviderSchema = z
  .object({
    key: z.string(),
    name: z.string(),
    kinds: z.array(LeadSearchKindSchema),
    price_per_row: z.int(),
    page_size: z.int(),
  })
  .meta({ id: 'LeadSearchProvider' });
export type LeadSearchProviderInfo = z.infer<typeof LeadSearchProviderSchema>;
export const LeadSearchProvidersSchema = z.object({ providers: z.array(LeadSearchProviderSchema) });

/** One result as a provider answers it, in our words. */
export interface LeadResult {
  name: string | null;
  first_name: string | null;
  last_name: string | null;
  title: string | null;
  seniority: string | null;
  email: string | null;
  profile_url: string | null;
  company: string | null;
  company_domain: string | null;
  website: string | null;
  industry: string | null;
  head_count: number | null;
  location: string | null;
}

/** The table's columns a search fills, by result field, in order. */
export const leadColumns: Record<LeadSearchKind, [keyof LeadResult, string][]> = {
  people: [
    ['name', 'Name'],
    ['title', 'Title'],
    ['seniority', 'Seniority'],
    ['company', 'Company'],
    ['company_domain', 'Company domain'],
    ['email', 'Email'],
    ['profile_url', 'Profile URL'],
    ['location', 'Location'],
  ],
  companies: [
    ['company', 'Company'],
    ['company_domain', 'Domain'],
    ['website', 'Website'],
    ['industry', 'Industry'],
    ['head_count', 'Head count'],
    ['profile_url', 'Profile URL'],
    ['location', 'Location'],
  ],
};

/** A profile URL without its scheme, www., query and trailing slash, lower case: one person, one key. */
export function normaliseProfileUrl(url: string): string {
  return url
    .trim()
    .toLowerCase()
    .replace(/^https?:\/\//, '')
    .replace(/^www\./, '')
    .replace(/[?#].*$/, '')
    .replace(/\/+$/, '');
}

export function normaliseDomain(value: string): string {
  return value
    .trim()
    .toLowerCase()
    .replace(/^https?:\/\//, '')
    .replace(/^www\./, '')
    .replace(/[/?#:].*$/, '')
    .replace(/\.$/, '');
}

/**
 * A result's stable key: a person by profile URL, else email, else name at company domain; a
 * company by domain, else profile URL. Null when nothing stable identifies it (not landed).
 */
export function leadKey(kind: LeadSearchKind, r: LeadResult): string | null {
  if (kind === 'people') {
    if (r.profile_url) return `profile:${normaliseProfileUrl(r.profile_url)}`;
    if (r.email) return `email:${r.email.trim().toLowerCase()}`;
    if (r.name && r.company_domain) return `person:${r.name.trim().toLowerCase()}@${normaliseDomain(r.company_domain)}`;
    return null;
  }
  if (r.company_domain) return `domain:${normaliseDomain(r.company_domain)}`;
  if (r.profile_url) return `profile:${normaliseProfileUrl(r.profile_url)}`;
  return null;
}

/** A name for a new table made by a search. */
export function searchTableName(kind: LeadSearchKind, q: LeadSearchQuery): string {
  const parts = [
    ...(q.titles ?? []),
    ...(q.industries ?? []),
    ...(q.company_domains ?? []),
    ...(q.locations ?? []),
    ...(q.keywords ? [q.keywords] : []),
  ];
  const what = kind === 'people' ? 'People' : 'Companies';
  const name = parts.length ? `${what}: ${parts.slice(0, 4).join(', ')}` : `${what} search`;
  return name.length > 255 ? `${name.slice(0, 254)}…` : name;
}

export const leadSearchWorkflowIdOf = (id: string) => `lead-search/${id}`;

/** The wait after a provider's 429: what it asked (Retry-After), else 30 s; 1 s to 1 h. */
export const rateLimitWaitSeconds = (asked: number | null) => Math.min(3600, Math.max(1, asked ?? 30));

/**
 * Whether a page read is the search's last: it came back empty or short of the page size asked, or
 * it is the provider's last page.
 */
export function isLastLeadPage(
  page: number,
  answer: { resultsOnPage: number; perPage: number; totalPages: number },
): boolean {
  return answer.resultsOnPage === 0 || answer.resultsOnPage < answer.perPage || page >= answer.totalPages;
}
