/**
 * Lead-search providers behind one small interface, like the enrichment providers: the registry is
 * built from the configuration, so a provider without its key does not exist (it is not listed,
 * and a search naming it is refused), never listed as broken.
 */
import type {
  LeadResult,
  LeadSearchKind,
  LeadSearchProviderInfo,
  LeadSearchQuery,
} from '../../domain/sourcing/lead-search.js';
import { apolloProvider, type ApolloConfig } from './apollo.js';

export interface LeadSearchPage {
  results: LeadResult[];
  /** The page asked for, from 1. */
  page: number;
  totalPages: number;
  totalEntries: number | null;
}

export interface LeadSearchProvider {
  info: LeadSearchProviderInfo;
  /**
   * One page of results. Throws SourceFailure (integrations/lead-search/http.ts): `rate_limited`
   * with the wait asked for, `unavailable`, `unauthorized` or `refused`.
   */
  search(
    kind: LeadSearchKind,
    query: LeadSearchQuery,
    page: number,
    perPage: number,
    signal?: AbortSignal,
  ): Promise<LeadSearchPage>;
}

export interface LeadSearchProviders {
  list(): LeadSearchProvider[];
  get(key: string): LeadSearchProvider | undefined;
}

export interface LeadSearchConfig {
  apollo: ApolloConfig | null;
}

export function leadSearchRegistry(providers: LeadSearchProvider[]): LeadSearchProviders {
  const sorted = [...providers].sort((a, b) => a.info.key.localeCompare(b.info.key));
  const byKey = new Map(sorted.map((p) => [p.info.key, p]));
  return { list: () => sorted, get: (key) => byKey.get(key) };
}

export function createLeadSearchProviders(config: LeadSearchConfig): LeadSearchProviders {
  return leadSearchRegistry([...(config.apollo ? [apolloProvider(config.apollo)] : [])]);
}
