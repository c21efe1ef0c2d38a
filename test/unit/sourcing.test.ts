/** Data sourcing's pure rules: a result's stable key, CT names under a domain, Retry-After, the Apollo request body. */
import { describe, expect, it } from 'vitest';
import {
  leadKey,
  LeadSearchCreateSchema,
  normaliseProfileUrl,
  type LeadResult,
} from '../../domain/sourcing/lead-search.js';
import { subdomainsOf } from '../../integrations/ct-log/ct-log.js';
import { retryAfterSeconds } from '../../integrations/lead-search/http.js';
import { apolloBody } from '../../integrations/lead-search/apollo.js';

const person = (p: Partial<LeadResult>): LeadResult => ({
  name: null,
  first_name: null,
  last_name: null,
  title: null,
  seniority: null,
  email: null,
  profile_url: null,
  company: null,
  company_domain: null,
  website: null,
  industry: null,
  head_count: null,
  location: null,
  ...p,
});

describe('lead keys', () => {
  it('keys a person by profile URL however it is written, else email, else name at domain; a company by domain', () => {
    const a = leadKey('people', person({ profile_url: 'https://www.linkedin.com/in/ada/?utm=x', email: 'a@x.com' }));
    expect(a).toBe('profile:linkedin.com/in/ada');
    expect(leadKey('people', person({ profile_url: 'http://LinkedIn.com/in/ada' }))).toBe(a);
    expect(leadKey('people', person({ email: ' Ada@X.com ' }))).toBe('email:ada@x.com');
    expect(leadKey('people', person({ name: 'Ada L', company_domain: 'https://www.x.com/' }))).toBe(
      'person:ada l@x.com',
    );
    expect(leadKey('people', person({ name: 'Ada' }))).toBeNull();
    expect(
      leadKey(
        'companies',
        person({ company_domain: 'WWW.Acme.com', profile_url: 'https://linkedin.com/company/acme' }),
      ),
    ).toBe('domain:acme.com');
    expect(normaliseProfileUrl('https://www.linkedin.com/in/ada///')).toBe('linkedin.com/in/ada');
  });

  it('bounds a search request at and past its limits', () => {
    const ok = (v: unknown) => LeadSearchCreateSchema.safeParse(v).success;
    expect(ok({ query: {}, max_results: 1 })).toBe(true);
    expect(ok({ query: {}, max_results: 10_000 })).toBe(true);
    expect(ok({ query: {}, max_results: 10_001 })).toBe(false);
    expect(ok({ query: { head_count_ranges: ['11,50', '10001,'] } })).toBe(true);
    expect(ok({ query: { head_count_ranges: ['50,11'] } })).toBe(false);
    expect(ok({ query: { keywords: 'x'.repeat(500) } })).toBe(true);
    expect(ok({ query: { keywords: 'x'.repeat(501) } })).toBe(false);
  });
});

describe('CT names', () => {
  it('keeps names under the domain only: wildcards stripped, the apex, other domains and bad labels left out, deduplicated', () => {
    const names = subdomainsOf('acme.com', [
      { name_value: 'acme.com\nwww.acme.com', common_name: 'acme.com' },
      { name_value: '*.acme.com\nAPI.acme.com.' },
      { name_value: 'evilacme.com\nx.other.com\nbad_-.acme.com\na*b.acme.com' },
      { common_name: 'www.acme.com' },
    ]);
    expect(names).toEqual(['api.acme.com', 'www.acme.com']);
    expect(() => subdomainsOf('acme.com', { not: 'a list' })).toThrow(/not a list/);
  });
});

describe('Retry-After', () => {
  it('reads seconds or an HTTP date, and nothing else', () => {
    expect(retryAfterSeconds('3')).toBe(3);
    expect(retryAfterSeconds(new Date(10_000).toUTCString(), 0)).toBe(10);
    expect(retryAfterSeconds('soon')).toBeNull();
    expect(retryAfterSeconds(null)).toBeNull();
  });
});

describe('the Apollo request', () => {
  it('names the documented filters and pages', () => {
    expect(
      apolloBody(
        'people',
        {
          titles: ['vp sales'],
          seniorities: ['vp'],
          company_domains: ['acme.com'],
          head_count_ranges: ['11,50'],
          keywords: 'saas',
        },
        2,
        100,
      ),
    ).toEqual({
      page: 2,
      per_page: 100,
      person_titles: ['vp sales'],
      person_seniorities: ['vp'],
      q_organization_domains_list: ['acme.com'],
      organization_num_employees_ranges: ['11,50'],
      q_keywords: 'saas',
    });
    expect(apolloBody('companies', { locations: ['Berlin'], industries: ['software'] }, 1, 10)).toEqual({
      page: 1,
      per_page: 10,
      organization_locations: ['Berlin'],
      q_organization_keyword_tags: ['software'],
    });
  });
});
