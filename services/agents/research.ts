/**
 * Research on one contact: the facts the contact row carries, then the pages that can be read
 * (the company site, the profile URL) through the same page reader as the web-page enrichment
 * (so private addresses stay refused unless the environment allows them), then, when a chat model
 * is configured, the facts the model finds in those pages. Every fact names its source. A page
 * that cannot be read is skipped, never fatal: research is best effort and the writer judges
 * whether what was found is enough.
 */
import type { EnrichmentProvider } from '../../domain/tables/enrichments.js';
import {
  ModelFactsSchema,
  companyKeyOf,
  type ContactInput,
  type ResearchFact,
} from '../../domain/agents/outbound-agents.js';
import type { ChatModel } from '../../integrations/chat-model.js';

export interface ResearchDeps {
  chatModel: ChatModel | null;
  /** The web page reader of the enrichment providers; absent when this environment has none. */
  webPage?: EnrichmentProvider | undefined;
}

export interface Research {
  brief: ResearchFact[];
  sources: string[];
  companyKey: string;
  /** What the model was asked for, when it was (one call). */
  modelCalls: number;
}

interface Page {
  url: string;
  title: string;
  description: string;
  text: string;
}

const readTimeoutMs = 15_000;
const pageTextForModel = 6000;

async function readPage(reader: EnrichmentProvider, url: string): Promise<Page | null> {
  try {
    const outcome = await reader.run(
      { inputs: new Map([['url', url]]), options: new Map() },
      AbortSignal.timeout(readTimeoutMs),
    );
    if (outcome.kind !== 'result') return null;
    const v = outcome.values;
    return {
      url: String(v.final_url ?? url),
      title: String(v.title ?? ''),
      description: String(v.description ?? ''),
      text: String(v.text ?? ''),
    };
  } catch {
    return null;
  }
}

/** The first sentence of a page's description or text: what a person would quote. */
function summaryOf(page: Page): string {
  const source = page.description.trim() || page.text.trim();
  const sentence = source.split(/(?<=[.!?])\s+/)[0] ?? '';
  return sentence.length > 300 ? `${sentence.slice(0, 299)}…` : sentence;
}

async function modelFacts(
  model: ChatModel,
  pages: { page: Page; category: 'company' | 'profile' }[],
): Promise<ResearchFact[]> {
  const shown = pages
    .map(
      ({ page }, i) => `Page ${i + 1} (${page.url}) titled "${page.title}":\n${page.text.slice(0, pageTextForModel)}`,
    )
    .join('\n\n');
  try {
    const answer = await model.complete({
      json: true,
      temperature: 0,
      messages: [
        {
          role: 'system',
          content:
            'You extract facts about a sales prospect from web pages. Answer a JSON object {"facts":[{"category","fact","page"}]} ' +
            'with at most 8 short facts stated on the pages; category is one of role, company, industry, location, activity, other; ' +
            'page is the page number the fact is from. Never invent anything.',
        },
        { role: 'user', content: shown },
      ],
    });
    const raw = JSON.parse(answer.content) as { facts?: { page?: unknown }[] };
    const parsed = ModelFactsSchema.safeParse(raw);
    if (!parsed.success) return [];
    return parsed.data.facts.map((f, i) => {
      const index = Number(raw.facts?.[i]?.page ?? 1) - 1;
      const { page } = pages[Number.isInteger(index) && index >= 0 && index < pages.length ? index : 0]!;
      return { category: f.category, fact: f.fact, source_title: page.title || page.url, source_url: page.url };
    });
  } catch {
    // A model that fails or answers badly only means fewer facts; the row and page facts remain.
    return [];
  }
}

export async function researchContact(
  deps: ResearchDeps,
  contact: ContactInput,
  rowFacts: ResearchFact[],
): Promise<Research> {
  const brief = [...rowFacts];
  const pages: { page: Page; category: 'company' | 'profile' }[] = [];
  if (deps.webPage) {
    const site = brief.find((f) => f.category === 'website')?.fact;
    const targets: { url: string; category: 'company' | 'profile' }[] = [
      ...(site ? [{ url: site, category: 'company' as const }] : []),
      ...(contact.profileUrl?.trim() ? [{ url: contact.profileUrl.trim(), category: 'profile' as const }] : []),
    ];
    for (const target of targets) {
      const page = await readPage(deps.webPage, target.url);
      if (!page) continue;
      pages.push({ page, category: target.category });
      const summary = summaryOf(page);
      if (summary)
        brief.push({
          category: target.category,
          fact: summary,
          source_title: page.title || page.url,
          source_url: page.url,
        });
    }
  }
  let modelCalls = 0;
  if (deps.chatModel && pages.length > 0) {
    modelCalls = 1;
    const known = new Set(brief.map((f) => f.fact));
    for (const fact of await modelFacts(deps.chatModel, pages)) {
      if (!known.has(fact.fact)) brief.push(fact);
      known.add(fact.fact);
    }
  }
  const sources = [...new Set(brief.map((f) => f.source_url).filter((u): u is string => u !== null))];
  return { brief, sources, companyKey: companyKeyOf(contact, brief), modelCalls };
}
