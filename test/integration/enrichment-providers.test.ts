/**
 * Each enrichment provider against a local server speaking its protocol: the page reader against
 * local HTTP, the AI column against a local chat-completions endpoint, the MX lookup against a
 * local DNS server (and a stub resolver for failures a server cannot be made to give).
 */
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aiColumn, aiColumnConfigFrom } from '../../integrations/enrichment-providers/ai-column.js';
import {
  defaultMxResolver,
  dnsMxLookup,
  domainOf,
  type MxResolver,
} from '../../integrations/enrichment-providers/dns-mx.js';
import { formulaProvider } from '../../integrations/enrichment-providers/formula.js';
import { createEnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import { readableText } from '../../integrations/web/readable-text.js';
import { webPageReader } from '../../integrations/web/web-page.js';
import { EnrichmentError, type EnrichmentOutcome, type EnrichmentProvider } from '../../domain/tables/enrichments.js';
import type { CellValue } from '../../domain/tables/tables.js';
import { serveChatCompletions, serveDns } from '../support/local-servers.js';
import { serveHttp, type LocalHttp } from '../../sim/local-http.js';

const run = (provider: EnrichmentProvider, inputs: Record<string, CellValue>, options: Record<string, string> = {}) =>
  provider.run(
    { inputs: new Map(Object.entries(inputs)), options: new Map(Object.entries(options)) },
    new AbortController().signal,
  );

/** The provider's failure, to check whether it is retried. */
async function failure(promise: Promise<EnrichmentOutcome>): Promise<EnrichmentError> {
  const error = await promise.then(
    (outcome) => new Error(`expected a failure, got ${JSON.stringify(outcome)}`),
    (e: unknown) => e,
  );
  if (!(error instanceof EnrichmentError)) throw error;
  return error;
}

describe('web page reader', () => {
  let site: LocalHttp;
  const article = `<!doctype html><html><head><title>Acme &amp; Sons</title>
    <meta name="description" content="Anvils since 1890">
    <style>body { color: red }</style><script>var hidden = "do not read";</script></head>
    <body><nav><a href="/">Home</a> <a href="/about">About</a></nav>
    <main><h1>Our anvils</h1><p>Forged in Ohio &mdash; shipped&nbsp;worldwide.</p><ul><li>Heavy</li><li>Light</li></ul></main>
    <footer>© footer text</footer></body></html>`;
  beforeAll(async () => {
    site = await serveHttp((req, res) => {
      const path = req.url ?? '/';
      if (path === '/article') return void res.setHeader('content-type', 'text/html; charset=utf-8').end(article);
      if (path === '/moved') return void res.writeHead(301, { location: '/article' }).end();
      if (path === '/loop') return void res.writeHead(302, { location: '/loop' }).end();
      if (path === '/gzip')
        return void res
          .writeHead(200, { 'content-type': 'text/html', 'content-encoding': 'gzip' })
          .end(gzipSync('<title>Zipped</title><p>Small and compressed</p>'));
      if (path === '/latin1')
        return void res
          .writeHead(200, { 'content-type': 'text/html; charset=iso-8859-1' })
          .end(Buffer.from('<p>Caf\xe9 cr\xe8me</p>', 'latin1'));
      if (path === '/plain') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('Just text.');
      if (path === '/empty')
        return void res
          .writeHead(200, { 'content-type': 'text/html' })
          .end('<html><body><script>x()</script></body></html>');
      if (path === '/pdf') return void res.writeHead(200, { 'content-type': 'application/pdf' }).end('%PDF-1.4');
      if (path === '/busy') return void res.writeHead(503).end('try later');
      if (path === '/endless') {
        // Never ends on its own: only a reader that stops at its size limit finishes.
        res.writeHead(200, { 'content-type': 'text/html' });
        const write = () => {
          while (res.write(`<p>${'word '.repeat(200)}</p>`)) if (res.destroyed) return;
          if (!res.destroyed) res.once('drain', write);
        };
        res.on('close', () => res.destroy());
        return write();
      }
      if (path === '/cut') {
        // Half a compressed body, then the connection drops.
        res.writeHead(200, { 'content-type': 'text/html', 'content-encoding': 'gzip' });
        res.write(gzipSync(`<p>${'cut short '.repeat(5000)}</p>`).subarray(0, 200));
        return void setImmediate(() => res.socket?.destroy());
      }
      if (path === '/silent') return; // never answers
      res.writeHead(404).end('no such page');
    });
  });
  afterAll(() => site?.close());

  const reader = (config = {}) => webPageReader({ allowPrivateNetworks: true, ...config });

  it('reads the title, the description and the text a person reads, without scripts, styles, navigation or footer', async () => {
    const outcome = await run(reader(), { url: `${site.url}/article` });
    expect(outcome).toEqual({
      kind: 'result',
      values: {
        title: 'Acme & Sons',
        description: 'Anvils since 1890',
        text: 'Our anvils\nForged in Ohio — shipped worldwide.\nHeavy\nLight',
        final_url: `${site.url}/article`,
      },
    });
  });

  it('follows redirects and says where it ended; a redirect loop is refused', async () => {
    const outcome = await run(reader(), { url: `${site.url}/moved` });
    expect(outcome).toMatchObject({
      kind: 'result',
      values: { title: 'Acme & Sons', final_url: `${site.url}/article` },
    });
    const loop = await failure(run(reader(), { url: `${site.url}/loop` }));
    expect(loop).toMatchObject({ retryable: false, message: expect.stringContaining('redirects') });
  });

  it('decodes compressed bodies and the declared charset; plain text is read as it is', async () => {
    expect(await run(reader(), { url: `${site.url}/gzip` })).toMatchObject({
      values: { title: 'Zipped', text: 'Small and compressed' },
    });
    expect(await run(reader(), { url: `${site.url}/latin1` })).toMatchObject({ values: { text: 'Café crème' } });
    expect(await run(reader(), { url: `${site.url}/plain` })).toMatchObject({
      values: { title: null, text: 'Just text.' },
    });
  });

  it('answers an empty result for a page with nothing to read', async () => {
    expect(await run(reader(), { url: `${site.url}/empty` })).toEqual({ kind: 'empty', reason: expect.any(String) });
  });

  it('retries a busy server, not a missing page, a non-page or a bad address', async () => {
    expect(await failure(run(reader(), { url: `${site.url}/busy` }))).toMatchObject({
      retryable: true,
      message: expect.stringContaining('503'),
    });
    expect(await failure(run(reader(), { url: `${site.url}/nowhere` }))).toMatchObject({
      retryable: false,
      message: expect.stringContaining('404'),
    });
    expect(await failure(run(reader(), { url: `${site.url}/pdf` }))).toMatchObject({
      retryable: false,
      message: expect.stringContaining('application/pdf'),
    });
    expect(await failure(run(reader(), { url: 'ftp://example.com/file' }))).toMatchObject({ retryable: false });
    expect(await failure(run(reader(), { url: 'not a url at all' }))).toMatchObject({ retryable: false });
  });

  it('stops reading at its size limit, so an endless page still gives a result', async () => {
    const outcome = await run(reader({ maxBytes: 64 * 1024 }), { url: `${site.url}/endless` });
    expect(outcome.kind).toBe('result');
    expect(outcome.kind === 'result' && String(outcome.values.text).length).toBeLessThanOrEqual(10_000);
  });

  it('fails retryably, without bringing the process down, when the connection drops mid-body', async () => {
    expect(await failure(run(reader(), { url: `${site.url}/cut` }))).toMatchObject({ retryable: true });
  });

  it('gives up on a server that never answers within its time limit, as a retryable failure', async () => {
    const error = await failure(run(reader({ timeoutSeconds: 1 }), { url: `${site.url}/silent` }));
    expect(error).toMatchObject({ retryable: true, message: expect.stringContaining('did not answer') });
  });

  it('refuses loopback and private addresses unless allowed, before sending anything', async () => {
    const before = site.requests.length;
    const guarded = webPageReader();
    const port = new URL(site.url).port;
    for (const url of [
      `${site.url}/article`,
      `http://localhost:${port}/article`,
      `http://[::1]:${port}/article`,
      'http://169.254.169.254/latest/meta-data/',
    ]) {
      expect(await failure(run(guarded, { url }))).toMatchObject({
        retryable: false,
        message: expect.stringContaining('private network'),
      });
    }
    expect(site.requests.length).toBe(before);
  });

  it('reads hostile markup in one pass (unclosed tags, comments, entities)', () => {
    const hostile = '<p>a'.repeat(50_000) + '<script>' + '<'.repeat(50_000);
    expect(readableText(hostile).text.startsWith('a\na')).toBe(true);
    expect(readableText('<!-- hidden --><p>&#x41;&#66;&unknown;</p>').text).toBe('AB&unknown;');
  });
});

describe('AI column', () => {
  let model: Awaited<ReturnType<typeof serveChatCompletions>>;
  let reply: { status?: number; content?: string | null } = { content: 'Anvils' };
  beforeAll(async () => {
    model = await serveChatCompletions(() => reply);
  });
  afterAll(() => model?.close());
  const provider = () => aiColumn({ apiKey: 'local-key', model: 'local-model', baseUrl: `${model.url}/v1` });

  it('exists only with a key and a model in the environment', () => {
    expect(aiColumnConfigFrom({})).toBeNull();
    expect(aiColumnConfigFrom({ OPENAI_API_KEY: 'k' })).toBeNull();
    expect(aiColumnConfigFrom({ OPENAI_MODEL: 'm', OPENAI_BASE_URL: 'http://127.0.0.1:1/v1' })).toBeNull();
    expect(aiColumnConfigFrom({ OPENAI_API_KEY: 'k', OPENAI_MODEL: 'm', OPENAI_BASE_URL: 'http://x/v1' })).toEqual({
      apiKey: 'k',
      model: 'm',
      baseUrl: 'http://x/v1',
    });
  });

  it("sends the prompt with the row's inputs filled in and answers the model's text", async () => {
    reply = { content: '  Anvils and hammers \n' };
    const outcome = await run(
      provider(),
      { company: 'Acme', city: null },
      { prompt: 'What does {company} of {city} sell? {not_mapped}' },
    );
    expect(outcome).toEqual({ kind: 'result', values: { answer: 'Anvils and hammers' } });
    const request = model.requests.at(-1)!;
    expect(request.headers.authorization).toBe('Bearer local-key');
    const body = JSON.parse(request.body);
    expect(body.model).toBe('local-model');
    expect(body.messages.at(-1)).toEqual({ role: 'user', content: 'What does Acme of  sell? {not_mapped}' });
  });

  it('answers an empty result when the model says nothing', async () => {
    reply = { content: '' };
    expect(await run(provider(), {}, { prompt: 'Anything?' })).toMatchObject({ kind: 'empty' });
    reply = { content: null };
    expect(await run(provider(), {}, { prompt: 'Anything?' })).toMatchObject({ kind: 'empty' });
  });

  it('retries server errors and rate limits, not refusals; the client itself never retries', async () => {
    const before = model.requests.length;
    reply = { status: 500 };
    expect(await failure(run(provider(), {}, { prompt: 'x' }))).toMatchObject({ retryable: true });
    reply = { status: 429 };
    expect(await failure(run(provider(), {}, { prompt: 'x' }))).toMatchObject({ retryable: true });
    reply = { status: 401 };
    expect(await failure(run(provider(), {}, { prompt: 'x' }))).toMatchObject({
      retryable: false,
      message: expect.stringContaining('401'),
    });
    expect(model.requests.length - before).toBe(3);
  });

  it('fails retryably when nothing listens at the base URL', async () => {
    const nowhere = aiColumn({ apiKey: 'k', model: 'm', baseUrl: 'http://127.0.0.1:9/v1' });
    expect(await failure(run(nowhere, {}, { prompt: 'x' }))).toMatchObject({ retryable: true });
  });
});

describe('mail servers (DNS MX)', () => {
  let dns: Awaited<ReturnType<typeof serveDns>>;
  beforeAll(async () => {
    dns = await serveDns({
      'acme.test': [
        { priority: 20, exchange: 'alt1.aspmx.l.google.com' },
        { priority: 10, exchange: 'aspmx.l.google.com' },
      ],
      'nomail.test': null,
      'example.test': [{ priority: 0, exchange: '' }],
    });
  });
  afterAll(() => dns?.close());

  it('reads a domain from a domain, an email address or a web address', () => {
    expect(domainOf('Acme.TEST')).toBe('acme.test');
    expect(domainOf('jo@sales.acme.test')).toBe('sales.acme.test');
    expect(domainOf('https://www.acme.test/about?x=1')).toBe('acme.test');
    expect(domainOf('www.test')).toBe('www.test');
    for (const bad of ['', 'localhost', 'acme..test', '1.2.3.4', 'a b.test'])
      expect(() => domainOf(bad)).toThrow(EnrichmentError);
  });

  it('asks a DNS server (DNS_SERVERS) and lists the mail servers in preference order with the mail service', async () => {
    const provider = dnsMxLookup({ resolver: defaultMxResolver([dns.server]) });
    expect(await run(provider, { domain: 'jo@acme.test' })).toEqual({
      kind: 'result',
      values: {
        primary_mx: 'aspmx.l.google.com',
        mx_hosts: 'aspmx.l.google.com, alt1.aspmx.l.google.com',
        mx_count: 2,
        mail_provider: 'Google Workspace',
      },
    });
    expect(dns.queries).toContain('acme.test');
  });

  it('answers an empty result for a domain with no mail servers, an unknown domain, or a null MX', async () => {
    const provider = dnsMxLookup({ resolver: defaultMxResolver([dns.server]) });
    for (const domain of ['nomail.test', 'unknown.test', 'example.test']) {
      expect(await run(provider, { domain })).toMatchObject({ kind: 'empty' });
    }
  });

  it('retries a lookup that timed out or failed at the server, and refuses a value that is not a domain', async () => {
    const failing = (code: string): MxResolver => ({
      resolveMx: async () => Promise.reject(Object.assign(new Error(code), { code })),
    });
    expect(await failure(run(dnsMxLookup({ resolver: failing('ETIMEOUT') }), { domain: 'acme.test' }))).toMatchObject({
      retryable: true,
    });
    expect(await failure(run(dnsMxLookup({ resolver: failing('ESERVFAIL') }), { domain: 'acme.test' }))).toMatchObject({
      retryable: true,
    });
    expect(await failure(run(dnsMxLookup({ resolver: failing('EBADNAME') }), { domain: 'acme.test' }))).toMatchObject({
      retryable: false,
    });
    expect(
      await failure(run(dnsMxLookup({ resolver: failing('ETIMEOUT') }), { domain: 'not a domain' })),
    ).toMatchObject({ retryable: false });
  });

  it('names well-known mail services by their MX hosts', async () => {
    const stub = (exchange: string): MxResolver => ({ resolveMx: async () => [{ exchange, priority: 0 }] });
    const provider = (exchange: string) => run(dnsMxLookup({ resolver: stub(exchange) }), { domain: 'acme.test' });
    expect(await provider('acme-test.mail.protection.outlook.com')).toMatchObject({
      values: { mail_provider: 'Microsoft 365' },
    });
    expect(await provider('mx.zoho.eu')).toMatchObject({ values: { mail_provider: 'Zoho Mail' } });
    expect(await provider('mail.acme.test')).toMatchObject({ values: { mail_provider: 'Other' } });
  });
});

describe('formula', () => {
  it('computes an expression over named inputs, empty inputs reading as empty', async () => {
    expect(await run(formulaProvider(), { price: 4, qty: '3' }, { formula: '{price} * {qty}' })).toEqual({
      kind: 'result',
      values: { result: 12 },
    });
    expect(
      await run(
        formulaProvider(),
        { first: 'Ada', last: null },
        { formula: 'concat({first}, " ", coalesce({last}, "?"))' },
      ),
    ).toEqual({
      kind: 'result',
      values: { result: 'Ada ?' },
    });
    expect(await run(formulaProvider(), { last: null }, { formula: '{last}' })).toMatchObject({ kind: 'empty' });
  });

  it('fails for good on a formula that cannot be used or a row it fails on', async () => {
    expect(await failure(run(formulaProvider(), { a: 1 }, { formula: '{b} + 1' }))).toMatchObject({
      retryable: false,
      message: expect.stringContaining('No column named "b"'),
    });
    expect(await failure(run(formulaProvider(), { a: 1 }, { formula: 'import("fs")' }))).toMatchObject({
      retryable: false,
    });
  });
});

describe('the registry', () => {
  it('lists what the environment configures, alphabetical by key', () => {
    const keys = (env: Record<string, string>) =>
      createEnrichmentProviders({ env })
        .list()
        .map((p) => p.info.key);
    expect(keys({})).toEqual(['dns_mx', 'formula', 'web_page_reader']);
    expect(keys({ OPENAI_API_KEY: 'k' })).toEqual(['dns_mx', 'formula', 'web_page_reader']);
    expect(keys({ OPENAI_API_KEY: 'k', OPENAI_MODEL: 'm' })).toEqual([
      'ai_column',
      'dns_mx',
      'formula',
      'web_page_reader',
    ]);
  });
});
