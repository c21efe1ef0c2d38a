/**
 * Certificate-transparency names of a domain from a crt.sh-shaped JSON source:
 * `GET {base}/?q=%25.<domain>&output=json` answers an array of certificates, each with
 * `name_value` (the certificate's names, one per line) and `common_name`. The source is slow and
 * often busy: 429, 502 and timeouts are `unavailable`/`rate_limited` SourceFailures the caller
 * backs off from.
 */
import { requestJson, SourceFailure } from '../lead-search/http.js';

export interface CtLogClient {
  /** The distinct names under `domain` (the domain itself and wildcards left out), lower case, sorted. */
  names(domain: string, signal?: AbortSignal): Promise<string[]>;
}

/** Names of certificates that fall under the domain: wildcards stripped, the apex and other domains left out. */
export function subdomainsOf(domain: string, entries: unknown): string[] {
  if (!Array.isArray(entries))
    throw new SourceFailure('refused', 'The CT log answered something that is not a list of certificates.');
  const apex = domain.toLowerCase();
  const found = new Set<string>();
  for (const entry of entries) {
    const e = entry as { name_value?: unknown; common_name?: unknown };
    const values = [e.name_value, e.common_name]
      .filter((v): v is string => typeof v === 'string')
      .flatMap((v) => v.split(/\s+/));
    for (const raw of values) {
      const name = raw.trim().toLowerCase().replace(/^\*\./, '').replace(/\.$/, '');
      if (name === apex || !name.endsWith(`.${apex}`) || name.includes('*') || name.length > 253) continue;
      if (!name.split('.').every((l) => /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9])?$/.test(l))) continue;
      found.add(name);
    }
  }
  return [...found].sort();
}

export function ctLogClient(config: { baseUrl: string; timeoutMs?: number }): CtLogClient {
  const base = config.baseUrl.replace(/\/+$/, '');
  return {
    async names(domain, signal) {
      const answer = await requestJson(`${base}/?q=${encodeURIComponent(`%.${domain}`)}&output=json`, {
        timeoutMs: config.timeoutMs ?? 60_000,
        who: 'The CT log',
        ...(signal ? { signal } : {}),
      });
      return subdomainsOf(domain, answer.body ?? []);
    },
  };
}
