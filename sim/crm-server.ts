/**
 * A local twin of a HubSpot-shaped CRM v3 API (the subset integrations/crm/hubspot.ts uses):
 * account info, list, search, batch read and batch upsert of contacts and companies, and list
 * memberships. A private app token is a Bearer token it knows (else 401). It answers 429 with
 * Retry-After when `rateLimit` says so, and 207 Multi-Status with `errors` when some inputs of a
 * batch upsert are invalid (an email without "@", or any property value "INVALID"), the others
 * written. Plain node:http with no request log, so a benchmark measures the service, not the twin.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type TwinType = 'contacts' | 'companies';

export interface TwinObject {
  id: string;
  properties: Record<string, string | null>;
  createdAt: string;
  updatedAt: string;
}

export interface CrmTwinOptions {
  tokens: string[];
  portalId?: number;
  /** Answers 429 for the n-th request (from 1) when this says so. */
  rateLimit?: (n: number, path: string) => boolean;
  retryAfter?: number;
}

const modified: Record<TwinType, string> = { contacts: 'lastmodifieddate', companies: 'hs_lastmodifieddate' };

export async function serveCrmTwin(options: CrmTwinOptions) {
  const store: Record<TwinType, Map<string, TwinObject>> = { contacts: new Map(), companies: new Map() };
  const lists = new Map<string, string[]>();
  const indexes: Record<TwinType, Map<string, Map<string, string>>> = { contacts: new Map(), companies: new Map() };
  const sorted: Record<TwinType, { version: number; list: TwinObject[] | null }> = {
    contacts: { version: 0, list: null },
    companies: { version: 0, list: null },
  };
  let nextId = 1000;
  let requests = 0;
  let clock = Date.parse('2026-01-01T00:00:00.000Z');
  const counts = { upserted: 0, created: 0, updated: 0, unchanged: 0, rateLimited: 0 };
  const now = () => {
    clock = Math.max(clock + 1, Date.now());
    return new Date(clock).toISOString();
  };

  function index(type: TwinType, property: string): Map<string, string> {
    let idx = indexes[type].get(property);
    if (!idx) {
      idx = new Map();
      for (const o of store[type].values()) {
        const v = o.properties[property];
        if (v) idx.set(v.toLowerCase(), o.id);
      }
      indexes[type].set(property, idx);
    }
    return idx;
  }

  function put(type: TwinType, o: TwinObject) {
    const before = store[type].get(o.id);
    for (const [property, idx] of indexes[type]) {
      const old = before?.properties[property];
      if (old) idx.delete(old.toLowerCase());
      const v = o.properties[property];
      if (v) idx.set(v.toLowerCase(), o.id);
    }
    store[type].set(o.id, o);
    sorted[type].list = null;
  }

  /** Adds an object as the CRM had it (seeding): its id is answered. */
  function add(type: TwinType, properties: Record<string, string>): string {
    const id = String(nextId++);
    const at = now();
    put(type, {
      id,
      properties: { ...properties, hs_object_id: id, [modified[type]]: at, createdate: at },
      createdAt: at,
      updatedAt: at,
    });
    return id;
  }

  function update(type: TwinType, id: string, properties: Record<string, string>) {
    const o = store[type].get(id)!;
    const at = now();
    put(type, { ...o, properties: { ...o.properties, ...properties, [modified[type]]: at }, updatedAt: at });
  }

  const byUpdated = (type: TwinType) => {
    if (!sorted[type].list)
      sorted[type].list = [...store[type].values()].sort((a, b) =>
        a.updatedAt < b.updatedAt ? -1 : a.updatedAt > b.updatedAt ? 1 : Number(a.id) - Number(b.id),
      );
    return sorted[type].list;
  };

  const shown = (
    o: TwinObject,
    properties: string[] | undefined,
    type: TwinType = o.properties.hs_lastmodifieddate !== undefined ? 'companies' : 'contacts',
  ) => ({
    id: o.id,
    properties: Object.fromEntries(
      (properties?.length
        ? [...properties, 'hs_object_id', 'createdate', modified[type]]
        : Object.keys(o.properties)
      ).map((p) => [p, o.properties[p] ?? null]),
    ),
    createdAt: o.createdAt,
    updatedAt: o.updatedAt,
    archived: false,
  });

  function matches(o: TwinObject, f: { propertyName: string; operator: string; value?: string }): boolean {
    const v = f.propertyName === 'hs_object_id' ? o.id : (o.properties[f.propertyName] ?? null);
    const x = f.value ?? '';
    switch (f.operator) {
      case 'EQ':
        return v !== null && v.toLowerCase() === x.toLowerCase();
      case 'NEQ':
        return v === null || v.toLowerCase() !== x.toLowerCase();
      case 'GT':
        return v !== null && v > x;
      case 'GTE':
        return v !== null && v >= x;
      case 'LT':
        return v !== null && v < x;
      case 'LTE':
        return v !== null && v <= x;
      case 'CONTAINS_TOKEN':
        return v !== null && v.toLowerCase().includes(x.toLowerCase().replace(/\*/g, ''));
      case 'HAS_PROPERTY':
        return v !== null && v !== '';
      case 'NOT_HAS_PROPERTY':
        return v === null || v === '';
      default:
        return false;
    }
  }

  const invalid = (properties: Record<string, string>) =>
    Object.values(properties).some((v) => v === 'INVALID') ||
    (properties.email !== undefined && !properties.email.includes('@'));

  function handle(req: IncomingMessage, res: ServerResponse, raw: string) {
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(body));
    };
    const url = new URL(req.url ?? '/', 'http://twin');
    requests += 1;
    const auth = req.headers.authorization ?? '';
    if (!options.tokens.includes(auth.replace(/^Bearer /, ''))) {
      return send(401, {
        status: 'error',
        message: 'Authentication credentials not found.',
        category: 'INVALID_AUTHENTICATION',
      });
    }
    if (options.rateLimit?.(requests, url.pathname)) {
      counts.rateLimited += 1;
      return send(
        429,
        {
          status: 'error',
          message: 'You have reached your secondly limit.',
          errorType: 'RATE_LIMIT',
          policyName: 'SECONDLY',
        },
        { 'retry-after': String(options.retryAfter ?? 1) },
      );
    }
    let body: Record<string, unknown> = {};
    if (raw) {
      try {
        body = JSON.parse(raw) as Record<string, unknown>;
      } catch {
        return send(400, { status: 'error', message: 'Invalid input JSON', category: 'VALIDATION_ERROR' });
      }
    }
    if (url.pathname === '/account-info/v3/details')
      return send(200, { portalId: options.portalId ?? 4242, accountType: 'STANDARD', timeZone: 'UTC' });
    const member = /^\/crm\/v3\/lists\/([^/]+)\/memberships$/.exec(url.pathname);
    if (member && req.method === 'GET') {
      const ids = lists.get(decodeURIComponent(member[1]!));
      if (!ids) return send(404, { status: 'error', message: 'List not found', category: 'OBJECT_NOT_FOUND' });
      const from = Number(url.searchParams.get('after') ?? 0);
      const limit = Math.min(250, Number(url.searchParams.get('limit') ?? 100));
      const page = ids.slice(from, from + limit);
      return send(200, {
        results: page.map((recordId) => ({ recordId, membershipTimestamp: '2026-01-01T00:00:00Z' })),
        ...(from + limit < ids.length ? { paging: { next: { after: String(from + limit) } } } : {}),
      });
    }
    const m = /^\/crm\/v3\/objects\/(contacts|companies)(\/search|\/batch\/read|\/batch\/upsert)?$/.exec(url.pathname);
    if (!m) return send(404, { status: 'error', message: 'Not found', category: 'OBJECT_NOT_FOUND' });
    const type = m[1] as TwinType;
    const action = m[2] ?? '';
    if (action === '' && req.method === 'GET') {
      const limit = Number(url.searchParams.get('limit') ?? 10);
      if (!Number.isInteger(limit) || limit < 1 || limit > 100)
        return send(400, { status: 'error', message: 'limit must be 1 to 100', category: 'VALIDATION_ERROR' });
      const after = url.searchParams.get('after');
      const props = url.searchParams.get('properties')?.split(',').filter(Boolean);
      const all = [...store[type].keys()];
      const start = after ? all.indexOf(after) + 1 : 0;
      const page = all.slice(start, start + limit).map((id) => shown(store[type].get(id)!, props));
      return send(200, {
        results: page,
        ...(start + limit < all.length ? { paging: { next: { after: page.at(-1)!.id } } } : {}),
      });
    }
    if (action === '/search' && req.method === 'POST') {
      const limit = Number(body.limit ?? 10);
      if (!Number.isInteger(limit) || limit < 1 || limit > 200)
        return send(400, { status: 'error', message: 'limit must be 1 to 200', category: 'VALIDATION_ERROR' });
      const filters = (
        (body.filterGroups as
          { filters: { propertyName: string; operator: string; value?: string }[] }[] | undefined) ?? []
      ).flatMap((g) => g.filters);
      const sort = (body.sorts as { propertyName: string; direction: string }[] | undefined)?.[0];
      let found: TwinObject[];
      const onModified = sort?.propertyName === modified[type] && sort.direction === 'ASCENDING';
      if (onModified) {
        const list = byUpdated(type);
        const gte = filters.find(
          (f) => f.propertyName === modified[type] && (f.operator === 'GTE' || f.operator === 'GT'),
        );
        let lo = 0;
        if (gte?.value) {
          let hi = list.length;
          while (lo < hi) {
            const mid = (lo + hi) >> 1;
            if (list[mid]!.updatedAt < gte.value) lo = mid + 1;
            else hi = mid;
          }
        }
        const rest = filters.filter((f) => f !== gte);
        found = rest.length ? list.slice(lo).filter((o) => rest.every((f) => matches(o, f))) : list.slice(lo);
        if (gte?.operator === 'GT') found = found.filter((o) => o.updatedAt > gte.value!);
      } else {
        found = [...store[type].values()].filter((o) => filters.every((f) => matches(o, f)));
      }
      const from = Number(body.after ?? 0);
      if (from >= 10_000)
        return send(400, {
          status: 'error',
          message: 'Paging past 10,000 results is not supported.',
          category: 'VALIDATION_ERROR',
        });
      const props = body.properties as string[] | undefined;
      const page = found.slice(from, from + limit).map((o) => shown(o, props));
      return send(200, {
        total: found.length,
        results: page,
        ...(from + limit < found.length ? { paging: { next: { after: String(from + limit) } } } : {}),
      });
    }
    if (action === '/batch/read' && req.method === 'POST') {
      const inputs = (body.inputs as { id: string }[] | undefined) ?? [];
      if (inputs.length > 100)
        return send(400, { status: 'error', message: 'At most 100 inputs', category: 'VALIDATION_ERROR' });
      const props = body.properties as string[] | undefined;
      const results = inputs.flatMap((i) =>
        store[type].has(String(i.id)) ? [shown(store[type].get(String(i.id))!, props)] : [],
      );
      return send(200, { status: 'COMPLETE', results, startedAt: now(), completedAt: now() });
    }
    if (action === '/batch/upsert' && req.method === 'POST') {
      const inputs =
        (body.inputs as { id: string; idProperty: string; properties: Record<string, string> }[] | undefined) ?? [];
      if (inputs.length === 0 || inputs.length > 100)
        return send(400, { status: 'error', message: 'Between 1 and 100 inputs', category: 'VALIDATION_ERROR' });
      const results: unknown[] = [];
      const errors: unknown[] = [];
      for (const input of inputs) {
        const properties = { ...input.properties, [input.idProperty]: input.properties[input.idProperty] ?? input.id };
        if (invalid(properties) || !input.idProperty || !input.id) {
          errors.push({
            status: 'error',
            category: 'VALIDATION_ERROR',
            message: `Property values were not valid: ${JSON.stringify(input.properties).slice(0, 200)}`,
            context: { ids: [input.id] },
          });
          continue;
        }
        counts.upserted += 1;
        const existing = index(type, input.idProperty).get(String(input.id).toLowerCase());
        if (existing) {
          const o = store[type].get(existing)!;
          const changed = Object.entries(properties).some(([k, v]) => o.properties[k] !== v);
          if (changed) {
            update(type, existing, properties);
            counts.updated += 1;
          } else counts.unchanged += 1;
          results.push({ ...shown(store[type].get(existing)!, undefined), new: false });
        } else {
          const id = add(type, properties);
          counts.created += 1;
          results.push({ ...shown(store[type].get(id)!, undefined), new: true });
        }
      }
      const status = errors.length ? 207 : 200;
      return send(status, {
        status: 'COMPLETE',
        results,
        ...(errors.length ? { errors, numErrors: errors.length } : {}),
        startedAt: now(),
        completedAt: now(),
      });
    }
    return send(405, { status: 'error', message: 'Method not allowed', category: 'VALIDATION_ERROR' });
  }

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(req, res, Buffer.concat(chunks).toString('utf8')));
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    store,
    lists,
    counts,
    add,
    update,
    requestCount: () => requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
export type CrmTwin = Awaited<ReturnType<typeof serveCrmTwin>>;
