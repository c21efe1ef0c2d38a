/**
 * The providers this environment can run, built once from its configuration. A provider whose
 * model, key or service is not configured is simply not built, so it is absent from
 * listEnrichmentProviders and refused for new columns, never listed as broken. The API and the
 * worker build the same registry from the same environment; tests build it from an environment of
 * their own.
 */
import type { EnrichmentProvider } from '../../domain/tables/enrichments.js';
import { aiColumn, aiColumnConfigFrom } from './ai-column.js';
import { defaultMxResolver, dnsMxLookup, type MxResolver } from './dns-mx.js';
import { formulaProvider } from './formula.js';
import { webPageReader, type WebPageReaderConfig } from '../web/web-page.js';

export interface EnrichmentProviders {
  /** Available providers, alphabetical by key. */
  list(): EnrichmentProvider[];
  get(key: string): EnrichmentProvider | undefined;
}

export interface EnrichmentEnvironment {
  /** OPENAI_API_KEY, OPENAI_MODEL, OPENAI_BASE_URL, DNS_SERVERS, WEB_READER_ALLOW_PRIVATE_NETWORKS. */
  env: Record<string, string | undefined>;
  /** Answers MX lookups instead of node:dns (tests). */
  mxResolver?: MxResolver;
  webPage?: Omit<WebPageReaderConfig, 'allowPrivateNetworks'>;
}

export function providerRegistry(providers: EnrichmentProvider[]): EnrichmentProviders {
  const sorted = [...providers].sort((a, b) => (a.info.key < b.info.key ? -1 : a.info.key > b.info.key ? 1 : 0));
  const byKey = new Map(sorted.map((p) => [p.info.key, p]));
  return { list: () => sorted, get: (key) => byKey.get(key) };
}

export function createEnrichmentProviders({ env, mxResolver, webPage }: EnrichmentEnvironment): EnrichmentProviders {
  const servers = env.DNS_SERVERS?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const ai = aiColumnConfigFrom(env);
  return providerRegistry([
    webPageReader({ ...webPage, allowPrivateNetworks: env.WEB_READER_ALLOW_PRIVATE_NETWORKS === 'true' }),
    dnsMxLookup({ resolver: mxResolver ?? defaultMxResolver(servers) }),
    formulaProvider(),
    ...(ai ? [aiColumn(ai)] : []),
  ]);
}
