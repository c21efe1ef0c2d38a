/**
 * A business-context document written from a company's own site (POST /business-context/documents/generate/):
 * the home page and a few same-site pages (about, pricing, products, customers) read with the web
 * page reader (its address checks: no loopback, private or link-local address, on every redirect),
 * then the company's facts (what it does, for whom, its offers), each with its source page and a
 * confidence: written by the chat model when one is configured, else the local extract, which says so.
 */
import { z } from 'zod';
import {
  companyDocument,
  CompanyFactsSchema,
  localCompanyFacts,
  type CompanyFacts,
  type SitePage,
} from '../../domain/documents/documents.js';
import { EnrichmentError, type EnrichmentProvider } from '../../domain/tables/enrichments.js';
import type { ChatModel } from '../../integrations/chat-model.js';

export class SiteUnreadable extends Error {
  override name = 'SiteUnreadable';
}

const candidatePaths: { path: string; role: SitePage['role'] }[] = [
  { path: '/about', role: 'about' },
  { path: '/pricing', role: 'pricing' },
  { path: '/products', role: 'products' },
  { path: '/customers', role: 'customers' },
];

async function readPage(
  reader: EnrichmentProvider,
  url: string,
  signal: AbortSignal,
): Promise<Omit<SitePage, 'role'> | string> {
  try {
    const outcome = await reader.run({ inputs: new Map([['url', url]]), options: new Map() }, signal);
    if (outcome.kind === 'empty') return outcome.reason;
    const v = outcome.values;
    return {
      url: String(v.final_url ?? url),
      title: (v.title as string | null) ?? null,
      description: (v.description as string | null) ?? null,
      text: String(v.text ?? ''),
    };
  } catch (error) {
    if (error instanceof EnrichmentError) return error.message;
    return (error as Error).message ?? String(error);
  }
}

export interface GeneratedDocument {
  markdown: string;
  pagesRead: string[];
}

export async function generateCompanyDocument(
  deps: { reader: EnrichmentProvider; siteOrigin: (domain: string) => string; chatModel: ChatModel | null },
  domain: string,
  signal: AbortSignal = AbortSignal.timeout(60_000),
): Promise<GeneratedDocument> {
  const origin = deps.siteOrigin(domain).replace(/\/+$/, '');
  const home = await readPage(deps.reader, `${origin}/`, signal);
  if (typeof home === 'string') throw new SiteUnreadable(`The home page of ${domain} could not be read: ${home}`);
  const homeOrigin = new URL(home.url).origin;
  const pages: SitePage[] = [{ ...home, role: 'home' }];
  // Same-site pages only: one that redirects to another site is left out.
  const others = await Promise.all(
    candidatePaths.map(async ({ path, role }) => ({
      role,
      page: await readPage(deps.reader, `${homeOrigin}${path}`, signal),
    })),
  );
  for (const { role, page } of others) {
    if (typeof page !== 'string' && new URL(page.url).origin === homeOrigin && page.text) pages.push({ ...page, role });
  }
  const pagesRead = pages.map((p) => p.url);
  let facts: CompanyFacts | null = null;
  if (deps.chatModel) facts = await modelFacts(deps.chatModel, domain, pages, signal);
  const markdown = facts
    ? companyDocument(domain, facts, { model: deps.chatModel!.key }, pagesRead, new Date())
    : companyDocument(domain, localCompanyFacts(pages), 'local', pagesRead, new Date());
  return { markdown, pagesRead };
}

/** The model's facts, each kept only when its source is one of the pages read; null when its answer cannot be used (the local extract is written instead). */
async function modelFacts(
  model: ChatModel,
  domain: string,
  pages: SitePage[],
  signal: AbortSignal,
): Promise<CompanyFacts | null> {
  const content = pages
    .map((p) => `URL: ${p.url}\nTitle: ${p.title ?? ''}\nDescription: ${p.description ?? ''}\n${p.text.slice(0, 6000)}`)
    .join('\n\n---\n\n');
  try {
    const answer = await model.complete({
      json: true,
      maxTokens: 1500,
      temperature: 0.1,
      signal,
      messages: [
        {
          role: 'system',
          content:
            `From the pages of ${domain}'s own site, list what the company does, for whom, and its offers. Answer a JSON object ` +
            '{"does": [...], "for_whom": [...], "offers": [...]}, each item {"fact": string, "source_url": the URL of the page stating it, "confidence": "high"|"medium"|"low"}. ' +
            'high: stated plainly; medium: implied; low: a guess from indirect hints. Only facts the pages support.',
        },
        { role: 'user', content },
      ],
    });
    const parsed = CompanyFactsSchema.safeParse(JSON.parse(answer.content.replace(/^```(?:json)?\s*|\s*```$/g, '')));
    if (!parsed.success) return null;
    const urls = new Set(pages.map((p) => p.url));
    const keep = (list: z.infer<typeof CompanyFactsSchema>['does']) => list.filter((f) => urls.has(f.source_url));
    return { does: keep(parsed.data.does), for_whom: keep(parsed.data.for_whom), offers: keep(parsed.data.offers) };
  } catch {
    return null;
  }
}
