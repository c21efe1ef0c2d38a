/**
 * Mail servers of a domain (DNS MX, node:dns): who receives its mail, in preference order, and
 * which mail service that is. The resolver is injected, so tests answer with a local DNS server
 * or a stub; the default one uses the system's servers or DNS_SERVERS.
 */
import { Resolver } from 'node:dns/promises';
import { textOf } from '../../domain/shared/text.js';
import { EnrichmentError, type EnrichmentProvider } from '../../domain/tables/enrichments.js';

export interface MxResolver {
  resolveMx(hostname: string): Promise<{ exchange: string; priority: number }[]>;
}

export function defaultMxResolver(servers?: string[]): MxResolver {
  const resolver = new Resolver({ timeout: 3000, tries: 2 });
  if (servers && servers.length > 0) resolver.setServers(servers);
  return resolver;
}

/** A domain from what a cell holds: a domain, an email address or a web address. */
export function domainOf(value: unknown): string {
  let text = textOf(value).trim().toLowerCase();
  if (text.includes('@')) text = text.slice(text.lastIndexOf('@') + 1);
  let host: string;
  try {
    host = new URL(/^[a-z][a-z0-9+.-]*:\/\//.test(text) ? text : `http://${text}`).hostname;
  } catch {
    throw new EnrichmentError(`"${text.slice(0, 200)}" is not a domain.`, false);
  }
  host = host.replace(/\.$/, '');
  // www.acme.com's mail goes to acme.com; www.com stays as it is.
  if (host.startsWith('www.') && host.split('.').length > 2) host = host.slice(4);
  const labels = host.split('.');
  const valid =
    host.length <= 253 &&
    labels.length >= 2 &&
    labels.every((l) => /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(l)) &&
    !/^\d+$/.test(labels.at(-1)!);
  if (!valid) throw new EnrichmentError(`"${text.slice(0, 200)}" is not a domain.`, false);
  return host;
}

/** Mail services known by the host names of their MX records. */
const services: [RegExp, string][] = [
  [/(^|\.)(google\.com|googlemail\.com)$/, 'Google Workspace'],
  [/(^|\.)(outlook\.com|protection\.outlook\.com)$/, 'Microsoft 365'],
  [/(^|\.)zoho\.(com|eu|in)$/, 'Zoho Mail'],
  [/(^|\.)pphosted\.com$/, 'Proofpoint'],
  [/(^|\.)mimecast\.com$/, 'Mimecast'],
  [/(^|\.)messagingengine\.com$/, 'Fastmail'],
  [/(^|\.)protonmail\.ch$/, 'Proton Mail'],
  [/(^|\.)secureserver\.net$/, 'GoDaddy'],
  [/(^|\.)amazonaws\.com$/, 'Amazon SES'],
  [/(^|\.)yandex\.(net|ru)$/, 'Yandex 360'],
  [/(^|\.)barracudanetworks\.com$/, 'Barracuda'],
];

export function mailServiceOf(host: string): string {
  return services.find(([pattern]) => pattern.test(host))?.[1] ?? 'Other';
}

/** Answers that mean "this domain has no mail servers": nothing to charge for. */
const emptyCodes = new Set(['ENODATA', 'ENOTFOUND', 'NXDOMAIN']);
const refusedCodes = new Set(['EBADNAME', 'EFORMERR', 'ENOTIMP', 'EBADQUERY', 'EBADFAMILY']);

export function dnsMxLookup(config: { resolver: MxResolver; timeoutSeconds?: number }): EnrichmentProvider {
  const timeoutSeconds = config.timeoutSeconds ?? 10;
  return {
    info: {
      key: 'dns_mx',
      display_name: 'Mail servers (DNS MX)',
      description:
        "Looks up a domain's mail servers and names the mail service behind them. Takes a domain, an email address or a web address.",
      credentials: 'platform',
      inputs: [{ name: 'domain', description: 'A domain, an email address or a web address', required: true }],
      named_inputs: false,
      outputs: [
        { name: 'primary_mx', description: 'The preferred mail server', type: 'text' },
        { name: 'mx_hosts', description: 'Every mail server, in preference order, comma separated', type: 'text' },
        { name: 'mx_count', description: 'How many mail servers', type: 'number' },
        {
          name: 'mail_provider',
          description: 'The mail service (Google Workspace, Microsoft 365, ...) or Other',
          type: 'text',
        },
      ],
      options: [],
      price_credits: 1,
      concurrency: 16,
      timeout_seconds: timeoutSeconds,
    },
    async run(request, signal) {
      const domain = domainOf(request.inputs.get('domain'));
      const limited = AbortSignal.any([signal, AbortSignal.timeout(timeoutSeconds * 1000)]);
      let records: { exchange: string; priority: number }[];
      try {
        records = await new Promise((resolve, reject) => {
          const stop = () => reject(Object.assign(new Error('aborted'), { code: 'ETIMEOUT' }));
          if (limited.aborted) return stop();
          limited.addEventListener('abort', stop, { once: true });
          config.resolver
            .resolveMx(domain)
            .then(resolve, reject)
            .finally(() => limited.removeEventListener('abort', stop));
        });
      } catch (error) {
        const code = (error as { code?: string }).code ?? '';
        if (emptyCodes.has(code)) return { kind: 'empty', reason: `${domain} has no mail servers.` };
        if (refusedCodes.has(code))
          throw new EnrichmentError(`The DNS lookup of ${domain} was refused (${code}).`, false);
        throw new EnrichmentError(
          `The DNS lookup of ${domain} failed (${code || (error as Error).message}); it is tried again.`,
          true,
        );
      }
      // A "null MX" (RFC 7505: one record with an empty host) says the domain takes no mail.
      const hosts = records
        .map((r) => ({ host: r.exchange.toLowerCase().replace(/\.$/, ''), priority: r.priority }))
        .filter((r) => r.host !== '')
        .sort((a, b) => a.priority - b.priority || a.host.localeCompare(b.host));
      if (hosts.length === 0) return { kind: 'empty', reason: `${domain} takes no mail.` };
      return {
        kind: 'result',
        values: {
          primary_mx: hosts[0]!.host,
          mx_hosts: hosts.map((h) => h.host).join(', '),
          mx_count: hosts.length,
          mail_provider: mailServiceOf(hosts[0]!.host),
        },
      };
    },
  };
}
