/**
 * Whether a host name answers in DNS (A, AAAA, CNAME), through the one DNS setting (DNS_SERVERS,
 * else the system's resolvers). A name with none of the three is not live.
 */
import { Resolver } from 'node:dns/promises';

export interface HostAnswer {
  a: string[];
  aaaa: string[];
  cname: string[];
}

export interface HostResolver {
  /** Null when the name does not exist or has none of A, AAAA, CNAME; throws when DNS itself failed (timeout, SERVFAIL). */
  resolveHost(name: string): Promise<HostAnswer | null>;
}

const absent = new Set(['ENODATA', 'ENOTFOUND', 'NXDOMAIN']);

export function hostResolver(servers?: string[], options: { timeoutMs?: number } = {}): HostResolver {
  const resolver = new Resolver({ timeout: options.timeoutMs ?? 3000, tries: 2 });
  if (servers && servers.length > 0) resolver.setServers(servers);
  const ask = async (fn: () => Promise<string[]>): Promise<string[]> => {
    try {
      return await fn();
    } catch (error) {
      if (absent.has((error as { code?: string }).code ?? '')) return [];
      throw error;
    }
  };
  return {
    async resolveHost(name) {
      const [a, aaaa, cname] = await Promise.all([
        ask(() => resolver.resolve4(name)),
        ask(() => resolver.resolve6(name)),
        ask(() => resolver.resolveCname(name)),
      ]);
      return a.length || aaaa.length || cname.length ? { a, aaaa, cname } : null;
    },
  };
}
