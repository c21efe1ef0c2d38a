/**
 * The web page reader: fetches a page and answers its readable text. node:http rather than
 * fetch, because the connection must go to an address that was checked: the lookup refuses
 * private, loopback and link-local addresses (a cell value must not reach the service's own
 * network), and the check runs on the very address connected to, on every redirect. The body is
 * read up to a size limit (decompressed bytes, so a compressed bomb stops too) and the whole
 * read up to a time limit.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { textOf } from '../../domain/shared/text.js';
import { EnrichmentError, type EnrichmentProvider } from '../../domain/tables/enrichments.js';
import { cellTextMax } from '../../domain/tables/tables.js';
import { readableText } from './readable-text.js';

export interface WebPageReaderConfig {
  /** Let the reader fetch private and loopback addresses (local development and tests only). */
  allowPrivateNetworks?: boolean;
  maxBytes?: number;
  timeoutSeconds?: number;
  maxRedirects?: number;
}

const privateRanges = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  privateRanges.addSubnet(net, prefix, 'ipv4');
// No `::ffff:0:0/96`: BlockList judges IPv4-mapped addresses by the IPv4 rules above, and checks
// every IPv4 address against that subnet too, so listing it made every IPv4 address private.
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['100::', 64],
  ['2001:db8::', 32],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const)
  privateRanges.addSubnet(net, prefix, 'ipv6');

export function isPrivateAddress(address: string): boolean {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped) return privateRanges.check(mapped[1]!, 'ipv4');
  const family = isIP(address);
  if (family === 0) return true;
  return privateRanges.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

const privateRefusal = (host: string) =>
  new EnrichmentError(`${host} is in a private network; the page reader reads public pages only.`, false);

/** An address written as an IP is never looked up, so the lookup's check cannot see it: refused here. */
export function checkLiteralAddress(url: URL, allowPrivate: boolean): void {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!allowPrivate && isIP(host) !== 0 && isPrivateAddress(host)) throw privateRefusal(host);
}

/** dns.lookup that refuses private addresses, for http.request's `lookup` option (every outbound call of the service uses it). */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses: LookupAddress[]) => {
      const answer = callback as (error: Error | null, address?: string | LookupAddress[], family?: number) => void;
      if (error) return answer(error);
      if (!allowPrivate && addresses.some((a) => isPrivateAddress(a.address))) return answer(privateRefusal(hostname));
      if (options.all) return answer(null, addresses);
      const first = addresses[0];
      if (!first) return answer(Object.assign(new Error(`No address for ${hostname}`), { code: 'ENOTFOUND' }));
      answer(null, first.address, first.family);
    });
  };
}

interface Fetched {
  url: URL;
  status: number;
  location: string | null;
  contentType: string;
  body: Buffer;
}

const retryableCodes = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNABORTED',
  'UND_ERR_SOCKET',
]);

function networkFailure(error: unknown, url: URL, timeoutSeconds: number): EnrichmentError {
  if (error instanceof EnrichmentError) return error;
  const { code, name, message } = error as { code?: string; name?: string; message?: string };
  if (name === 'AbortError' || code === 'ABORT_ERR')
    return new EnrichmentError(`${url.host} did not answer within ${timeoutSeconds} seconds.`, true);
  if (code === 'ENOTFOUND') return new EnrichmentError(`No host named ${url.hostname}.`, false);
  if (code && retryableCodes.has(code)) return new EnrichmentError(`Could not read ${url.host}: ${code}.`, true);
  return new EnrichmentError(
    `Could not read ${url.host}: ${message ?? code ?? 'unknown error'}.`,
    code === undefined || !/^(ERR_TLS|CERT_|DEPTH_|UNABLE_|SELF_SIGNED|ERR_SSL)/.test(code),
  );
}

function decoded(response: http.IncomingMessage): Readable {
  switch ((response.headers['content-encoding'] ?? '').toLowerCase().trim()) {
    case 'gzip':
    case 'x-gzip':
      return response.pipe(zlib.createGunzip());
    case 'deflate':
      return response.pipe(zlib.createInflate());
    case 'br':
      return response.pipe(zlib.createBrotliDecompress());
    default:
      return response;
  }
}

/** One GET: the status and, for a 2xx, the body's first `maxBytes` bytes. */
function get(url: URL, options: { signal: AbortSignal; lookup: LookupFunction; maxBytes: number }): Promise<Fetched> {
  return new Promise((resolve, reject) => {
    const transport = url.protocol === 'https:' ? https : http;
    const request = transport.request(url, {
      method: 'GET',
      lookup: options.lookup,
      signal: options.signal,
      headers: {
        'user-agent': 'OutreachWorkspaceBot/0.0 (page reader)',
        accept: 'text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1',
        'accept-encoding': 'gzip, deflate, br',
      },
    });
    request.on('error', (error) => reject(error));
    request.once('response', (response) => {
      const status = response.statusCode ?? 0;
      const base = {
        url,
        status,
        location: response.headers.location ?? null,
        contentType: String(response.headers['content-type'] ?? ''),
      };
      if (status < 200 || status >= 300) {
        response.resume();
        request.destroy();
        return resolve({ ...base, body: Buffer.alloc(0) });
      }
      const chunks: Buffer[] = [];
      let size = 0;
      let settled = false;
      const finish = () => {
        if (settled) return;
        settled = true;
        request.destroy();
        resolve({ ...base, body: Buffer.concat(chunks).subarray(0, options.maxBytes) });
      };
      // Listeners stay for the life of the streams: an error after the answer (our own destroy
      // at the size limit) must not go unhandled.
      const fail = (error: Error) => {
        if (!settled) reject(error);
        settled = true;
      };
      const body = decoded(response);
      body.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        size += chunk.length;
        // Enough to read: the rest of a huge (or endless) page is never downloaded.
        if (size >= options.maxBytes) finish();
      });
      body.once('end', finish);
      body.on('error', fail);
      if (body !== response) response.on('error', fail);
      response.once('aborted', () =>
        fail(Object.assign(new Error('The connection closed early.'), { code: 'ECONNRESET' })),
      );
    });
    request.end();
  });
}

function charsetOf(contentType: string, head: string): string {
  const declared =
    /charset\s*=\s*["']?([\w.:-]+)/i.exec(contentType)?.[1] ??
    /<meta[^>]+charset\s*=\s*["']?([\w.:-]+)/i.exec(head)?.[1];
  return declared ?? 'utf-8';
}

function decodeBody(body: Buffer, contentType: string): string {
  const charset = charsetOf(contentType, body.subarray(0, 2048).toString('latin1'));
  try {
    return new TextDecoder(charset).decode(body);
  } catch {
    return new TextDecoder('utf-8').decode(body);
  }
}

/** A cell's value as a web address: a bare domain gets https://; only http and https. */
export function pageUrl(value: unknown): URL {
  const text = textOf(value).trim();
  let url: URL;
  try {
    url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `https://${text}`);
  } catch {
    throw new EnrichmentError(`"${text.slice(0, 200)}" is not a web address.`, false);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new EnrichmentError(`Only http and https pages are read, not ${url.protocol}.`, false);
  if (!url.hostname.includes('.') && isIP(url.hostname.replace(/^\[|\]$/g, '')) === 0 && url.hostname !== 'localhost') {
    throw new EnrichmentError(`"${text.slice(0, 200)}" is not a web address.`, false);
  }
  return url;
}

const clip = (text: string, max: number) => (text.length <= max ? text : `${text.slice(0, max - 1)}…`);

export function webPageReader(config: WebPageReaderConfig = {}): EnrichmentProvider {
  const maxBytes = config.maxBytes ?? 2 * 1024 * 1024;
  const timeoutSeconds = config.timeoutSeconds ?? 15;
  const maxRedirects = config.maxRedirects ?? 5;
  const allowPrivate = config.allowPrivateNetworks ?? false;
  const lookup = guardedLookup(allowPrivate);
  return {
    info: {
      key: 'web_page_reader',
      display_name: 'Web page reader',
      description:
        'Reads a web page and gives its title, description and readable text (scripts, styles and navigation left out).',
      credentials: 'platform',
      inputs: [{ name: 'url', description: 'The page address; a bare domain is read over https', required: true }],
      named_inputs: false,
      outputs: [
        { name: 'title', description: "The page's title", type: 'text' },
        { name: 'description', description: "The page's meta description", type: 'text' },
        { name: 'text', description: `The readable text, at most ${cellTextMax} characters`, type: 'text' },
        { name: 'final_url', description: 'The address read after redirects', type: 'text' },
      ],
      options: [],
      price_credits: 1,
      concurrency: 8,
      timeout_seconds: timeoutSeconds,
    },
    async run(request, signal) {
      let url = pageUrl(request.inputs.get('url'));
      const limited = AbortSignal.any([signal, AbortSignal.timeout(timeoutSeconds * 1000)]);
      for (let redirects = 0; ; redirects += 1) {
        checkLiteralAddress(url, allowPrivate);
        let page: Fetched;
        try {
          page = await get(url, { signal: limited, lookup, maxBytes });
        } catch (error) {
          throw networkFailure(error, url, timeoutSeconds);
        }
        if (page.status >= 300 && page.status < 400 && page.location) {
          if (redirects >= maxRedirects)
            throw new EnrichmentError(`More than ${maxRedirects} redirects from ${url.host}.`, false);
          url = pageUrl(new URL(page.location, url).toString());
          continue;
        }
        if (page.status === 408 || page.status === 425 || page.status === 429 || page.status >= 500) {
          throw new EnrichmentError(`${url.host} answered ${page.status}.`, true);
        }
        if (page.status < 200 || page.status >= 300)
          throw new EnrichmentError(`${url.host} answered ${page.status}.`, false);
        const type = page.contentType.split(';')[0]!.trim().toLowerCase();
        const text = decodeBody(page.body, page.contentType);
        const html = type === 'text/html' || type === 'application/xhtml+xml' || (type === '' && /^\s*</.test(text));
        if (!html && type !== 'text/plain')
          throw new EnrichmentError(`${url.href} is not a web page (${type || 'no content type'}).`, false);
        const read = html ? readableText(text) : { title: null, description: null, text: text.trim() };
        if (!read.text && !read.title) return { kind: 'empty', reason: 'The page has no readable text.' };
        return {
          kind: 'result',
          values: {
            title: read.title && clip(read.title, 1000),
            description: read.description && clip(read.description, 2000),
            text: read.text ? clip(read.text, cellTextMax) : null,
            final_url: clip(url.href, 2000),
          },
        };
      }
    },
  };
}
