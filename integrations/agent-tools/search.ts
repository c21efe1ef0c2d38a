/**
 * Web search behind a small interface: a search API over HTTP JSON (SEARCH_API_URL). It is POSTed
 * `{query, limit}` and answers `{results: [{title, url, snippet}]}`.
 */
import { postJson, ToolFailure } from './http-json.js';
import { textOf } from '../../domain/shared/text.js';

export interface SearchResult {
  title: string;
  url: string;
  snippet: string;
}

export interface SearchSupplier {
  search(query: string, signal: AbortSignal): Promise<SearchResult[]>;
}

export function httpSearchSupplier(url: string, timeoutSeconds = 20): SearchSupplier {
  return {
    async search(query, signal) {
      const { body } = await postJson(url, { query, limit: 8 }, { signal, timeoutSeconds });
      const results = (body as { results?: unknown })?.results;
      if (!Array.isArray(results)) throw new ToolFailure('The search API answered without a results list.', false);
      return results.slice(0, 8).map((r: { title?: unknown; url?: unknown; snippet?: unknown }) => ({
        title: textOf(r.title),
        url: textOf(r.url),
        snippet: textOf(r.snippet),
      }));
    },
  };
}
