/**
 * A HubSpot-shaped CRM v3 client (the subset the sourcing area uses), for objects `contacts` and
 * `companies`, authorised by a private app token (Bearer):
 * - `GET /account-info/v3/details` (the token's account: `portalId`);
 * - `GET /crm/v3/objects/{type}?limit&after&properties` (list, paged by `paging.next.after`);
 * - `POST /crm/v3/objects/{type}/search` (`filterGroups`, `sorts`, `properties`, `limit` <= 200, `after`);
 * - `POST /crm/v3/objects/{type}/batch/read` (`inputs: [{id}]`, `properties`; up to 100);
 * - `POST /crm/v3/objects/{type}/batch/upsert` (`inputs: [{id, idProperty, properties}]`; up to 100;
 *   200, or 207 Multi-Status with `errors` naming the inputs that failed);
 * - `GET /crm/v3/lists/{listId}/memberships?after&limit` (a list's record ids).
 * 429 carries Retry-After; failures are SourceFailures (integrations/lead-search/http.ts).
 */
import { requestJson, SourceFailure } from '../lead-search/http.js';
import { textOf } from '../../domain/shared/text.js';

export type CrmObjectType = 'contacts' | 'companies';

export interface CrmObject {
  id: string;
  properties: Record<string, string | null>;
  createdAt: string;
  updatedAt: string;
}

export interface CrmFilter {
  propertyName: string;
  operator: string;
  value?: string;
}

export interface UpsertInput {
  /** The id property's value (for example the email). */
  id: string;
  idProperty: string;
  properties: Record<string, string>;
}

export interface UpsertOutcome {
  results: CrmObject[];
  /** Each failed input: the id values it names (context.ids) and why. */
  errors: { ids: string[]; message: string; category: string }[];
}

export interface CrmClient {
  accountId(token: string): Promise<string | null>;
  list(
    token: string,
    type: CrmObjectType,
    o: { after?: string | null; limit: number; properties: string[] },
  ): Promise<{ results: CrmObject[]; after: string | null }>;
  search(
    token: string,
    type: CrmObjectType,
    o: {
      filters: CrmFilter[];
      sort?: { propertyName: string; direction: 'ASCENDING' | 'DESCENDING' };
      after?: string | null;
      limit: number;
      properties: string[];
    },
  ): Promise<{ results: CrmObject[]; after: string | null; total: number }>;
  batchRead(token: string, type: CrmObjectType, ids: string[], properties: string[]): Promise<CrmObject[]>;
  listMembers(token: string, listId: string, after?: string | null): Promise<{ ids: string[]; after: string | null }>;
  batchUpsert(token: string, type: CrmObjectType, inputs: UpsertInput[]): Promise<UpsertOutcome>;
}

/** The property whose change time a watermark follows. */
export const modifiedProperty: Record<CrmObjectType, string> = {
  contacts: 'lastmodifieddate',
  companies: 'hs_lastmodifieddate',
};

export const crmBatchMax = 100;
export const crmSearchLimitMax = 200;

interface Paged {
  results?: CrmObject[];
  paging?: { next?: { after?: string } };
  total?: number;
}

function objects(body: unknown): CrmObject[] {
  const list = (body as Paged | null)?.results;
  if (!Array.isArray(list)) throw new SourceFailure('refused', 'The CRM answered without `results`.');
  return list.map((o) => ({
    id: String(o.id),
    properties: o.properties ?? {},
    createdAt: o.createdAt,
    updatedAt: o.updatedAt,
  }));
}

export function hubspotClient(config: { apiUrl: string; timeoutMs?: number }): CrmClient {
  const base = config.apiUrl.replace(/\/+$/, '');
  const call = (token: string, path: string, o: { method?: string; body?: unknown; accept?: number[] } = {}) =>
    requestJson(`${base}${path}`, {
      ...o,
      headers: { authorization: `Bearer ${token}` },
      timeoutMs: config.timeoutMs ?? 30_000,
      who: 'The CRM',
    });
  return {
    async accountId(token) {
      const answer = await call(token, '/account-info/v3/details');
      const id = (answer.body as { portalId?: unknown } | null)?.portalId;
      return id === undefined || id === null ? null : textOf(id);
    },
    async list(token, type, o) {
      const q = new URLSearchParams({ limit: String(o.limit), properties: o.properties.join(',') });
      if (o.after) q.set('after', o.after);
      const answer = await call(token, `/crm/v3/objects/${type}?${q}`);
      return { results: objects(answer.body), after: (answer.body as Paged).paging?.next?.after ?? null };
    },
    async search(token, type, o) {
      const body = {
        filterGroups: o.filters.length ? [{ filters: o.filters }] : [],
        ...(o.sort ? { sorts: [o.sort] } : {}),
        properties: o.properties,
        limit: o.limit,
        ...(o.after ? { after: o.after } : {}),
      };
      const answer = await call(token, `/crm/v3/objects/${type}/search`, { method: 'POST', body });
      return {
        results: objects(answer.body),
        after: (answer.body as Paged).paging?.next?.after ?? null,
        total: Number((answer.body as Paged).total ?? 0),
      };
    },
    async batchRead(token, type, ids, properties) {
      if (ids.length === 0) return [];
      const answer = await call(token, `/crm/v3/objects/${type}/batch/read`, {
        method: 'POST',
        body: { inputs: ids.map((id) => ({ id })), properties },
      });
      return objects(answer.body);
    },
    async listMembers(token, listId, after) {
      const q = new URLSearchParams({ limit: '100' });
      if (after) q.set('after', after);
      const answer = await call(token, `/crm/v3/lists/${encodeURIComponent(listId)}/memberships?${q}`);
      const body = answer.body as {
        results?: { recordId?: string | number }[];
        paging?: { next?: { after?: string } };
      };
      return { ids: (body.results ?? []).map((r) => String(r.recordId)), after: body.paging?.next?.after ?? null };
    },
    async batchUpsert(token, type, inputs) {
      const answer = await call(token, `/crm/v3/objects/${type}/batch/upsert`, {
        method: 'POST',
        body: { inputs },
        accept: [207],
      });
      const body = answer.body as {
        results?: CrmObject[];
        errors?: { message?: string; category?: string; context?: { ids?: string[] } }[];
      };
      return {
        results: objects({ results: body.results ?? [] }),
        errors: (body.errors ?? []).map((e) => ({
          ids: e.context?.ids ?? [],
          message: e.message ?? 'The CRM refused this record.',
          category: e.category ?? 'ERROR',
        })),
      };
    },
  };
}
