/**
 * Data sourcing's outside services (decisions 041, 042), from the configuration: the lead-search
 * providers (Apollo with APOLLO_API_KEY), the CRM's API address (HubSpot's by default), the
 * certificate-transparency source (crt.sh by default) and the DNS resolver subdomains are
 * confirmed with (DNS_SERVERS, the one DNS setting). Read by integrations/config.ts, which passes
 * the environment.
 */
import { createLeadSearchProviders, type LeadSearchProviders } from './lead-search/index.js';
import type { ApolloConfig } from './lead-search/apollo.js';
import { ctLogClient, type CtLogClient } from './ct-log/ct-log.js';
import { hostResolver, type HostResolver } from './ct-log/resolve.js';

export interface SourcingConfig {
  apollo: ApolloConfig | null;
  /** HUBSPOT_API_URL: https://api.hubapi.com by default. */
  crmApiUrl: string;
  /** CT_LOG_URL: https://crt.sh by default. */
  ctLogUrl: string;
}

type Env = Readonly<Record<string, string | undefined>>;

function wholeFrom(env: Env, name: string, fallback: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a whole number, not "${raw}".`);
  return value;
}

export function sourcingConfigFrom(env: Env): SourcingConfig {
  const apolloKey = env.APOLLO_API_KEY?.trim();
  return {
    apollo: apolloKey
      ? {
          apiKey: apolloKey,
          baseUrl: env.APOLLO_API_URL?.trim() || 'https://api.apollo.io',
          pricePerRow: wholeFrom(env, 'LEAD_SEARCH_PRICE_PER_ROW', 1),
        }
      : null,
    crmApiUrl: env.HUBSPOT_API_URL?.trim() || 'https://api.hubapi.com',
    ctLogUrl: env.CT_LOG_URL?.trim() || 'https://crt.sh',
  };
}

export interface Sourcing {
  leadSearch: LeadSearchProviders;
  crm: { apiUrl: string; timeoutMs: number };
  /** A CSV import's address may be on a private network (WEB_READER_ALLOW_PRIVATE_NETWORKS, the page reader's setting). */
  csvAllowPrivateNetworks: boolean;
  ctLog: CtLogClient;
  /** The first back-off after a busy CT log (429 without Retry-After, 502, timeout), doubled each try: 1 s. */
  ctLogBackoffMs: number;
  dns: HostResolver;
}

export function createSourcing(
  config: SourcingConfig,
  options: { dnsServers?: string[] | undefined; allowPrivateNetworks?: boolean },
): Sourcing {
  return {
    leadSearch: createLeadSearchProviders({ apollo: config.apollo }),
    crm: { apiUrl: config.crmApiUrl, timeoutMs: 30_000 },
    csvAllowPrivateNetworks: options.allowPrivateNetworks === true,
    ctLog: ctLogClient({ baseUrl: config.ctLogUrl }),
    ctLogBackoffMs: 1000,
    dns: hostResolver(options.dnsServers),
  };
}
