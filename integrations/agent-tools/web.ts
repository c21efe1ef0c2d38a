/**
 * Reading the web for a research run: scrape (one page's readable text, through the enrichment
 * page reader), map (the links on a page) and crawl (a page and the pages it links to on its own
 * site). Real HTTP fetching; private and loopback addresses are refused unless the environment
 * allows them (local development and tests), and every redirect is checked again.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { EnrichmentError } from '../../domain/tables/enrichments.js';
import { isPrivateAddress, pageUrl, webPageReader } from '../web/web-page.js';
import { decodeEntities } from '../web/readable-text.js';
import { ToolFailure } from './http-json.js';

export interface PageRead {
  url: string;
  title: string | null;
  text: string;
}

export interface WebReader {
  scrape(url: string, signal: AbortSignal): Promise<PageRead>;
  map(url: string, signal: AbortSignal): Promise<{ url: string; links: string[] }>;
}

const linksMax = 100;
const htmlBytesMax = 2 * 1024 * 1024;

function asToolFailure(error: unknown): ToolFailure {
  if (error instanceof ToolFailure) return error;
  if (error instanceof EnrichmentError) return new ToolFailure(error.message, error.retryable);
  return new ToolFailure((error as Error).message ?? String(error), true);
}

export function toolUrl(value: string): URL {
  try {
    return pageUrl(value);
  } catch (error) {
    throw asToolFailure(error);
  }
}

/** Links of an HTML page, absolute, http(s) only, fragments dropped, in page order without repeats. */
export function pageLinks(html: string, base: URL): string[] {
  const seen = new Set<string>();
  for (const match of html.matchAll(/<a\s[^>]*?href\s*=\s*("([^"]*)"|'([^']*)'|([^\s>]+))/gi)) {
    const href = decodeEntities(match[2] ?? match[3] ?? match[4] ?? '').trim();
    try {
      const url = new URL(href, base);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') continue;
      url.hash = '';
      seen.add(url.href);
    } catch {
      // not an address
    }
    if (seen.size >= linksMax) break;
  }
  return [...seen];
}

export function webReader(config: { allowPrivateNetworks: boolean; timeoutSeconds?: number }): WebReader {
  const timeoutSeconds = config.timeoutSeconds ?? 15;
  const reader = webPageReader({ allowPrivateNetworks: config.allowPrivateNetworks, timeoutSeconds });

  async function checkHost(url: URL) {
    if (config.allowPrivateNetworks) return;
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((a) => a.address);
    if (addresses.some(isPrivateAddress))
      throw new ToolFailure(`${host} is in a private network; research reads public pages only.`, false);
  }

  return {
    async scrape(url, signal) {
      try {
        const outcome = await reader.run({ inputs: new Map([['url', url]]), options: new Map() }, signal);
        if (outcome.kind === 'empty') return { url, title: null, text: '' };
        return {
          url: String(outcome.values.final_url ?? url),
          title: (outcome.values.title as string | null) ?? null,
          text: String(outcome.values.text ?? ''),
        };
      } catch (error) {
        throw asToolFailure(error);
      }
    },

    async map(start, signal) {
      let url = toolUrl(start);
      const limited = AbortSignal.any([signal, AbortSignal.timeout(timeoutSeconds * 1000)]);
      for (let hops = 0; hops <= 5; hops += 1) {
        await checkHost(url);
        let response: Response;
        try {
          response = await fetch(url, { redirect: 'manual', signal: limited, headers: { accept: 'text/html' } });
        } catch (error) {
          throw new ToolFailure(`${url.host} could not be read: ${(error as Error).message}`, true);
        }
        const location = response.headers.get('location');
        if (response.status >= 300 && response.status < 400 && location) {
          await response.body?.cancel();
          url = toolUrl(new URL(location, url).href);
          continue;
        }
        if (response.status === 429 || response.status >= 500)
          throw new ToolFailure(`${url.host} answered ${response.status}.`, true);
        if (!response.ok) throw new ToolFailure(`${url.host} answered ${response.status}.`, false);
        const html = (await response.text()).slice(0, htmlBytesMax);
        return { url: url.href, links: pageLinks(html, url) };
      }
      throw new ToolFailure(`Too many redirects from ${start}.`, false);
    },
  };
}

/** The domain a run that stays on domain may read: the starting URL's host without `www.`. */
export function siteDomain(url: string): string | null {
  try {
    return toolUrl(url)
      .hostname.replace(/^www\./, '')
      .toLowerCase();
  } catch {
    return null;
  }
}

export function onDomain(url: string, domain: string): boolean {
  try {
    const host = new URL(url).hostname.toLowerCase();
    return host === domain || host === `www.${domain}` || host.endsWith(`.${domain}`);
  } catch {
    return false;
  }
}
