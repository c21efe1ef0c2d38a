import { Validator } from '@seriousme/openapi-schema-validator';
import { beforeAll, describe, expect, it } from 'vitest';
import { backendErrorCodeList } from '../../domain/pnet/steps.js';
import { useTestStack } from '../support/test-stack.js';

const { stack } = useTestStack({ workspaces: false });
let doc: {
  openapi: string;
  info: { version: string };
  paths: Record<
    string,
    Record<string, { operationId?: string; security?: Record<string, string[]>[]; responses: Record<string, unknown> }>
  >;
  components: { securitySchemes: Record<string, unknown>; schemas: Record<string, unknown> };
};
beforeAll(async () => {
  doc = (await stack.app.inject({ method: 'GET', url: '/openapi.json' })).json();
});

const operations = () =>
  Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ path, method, op })));

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1.0 document of interface version 0.0', async () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('0.0');
    const result = await new Validator().validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('declares both security schemes, an operationId and the error bodies on every operation', () => {
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['ApiKeyAuth', 'BearerAuth']);
    expect(operations().length).toBeGreaterThan(5);
    for (const { path, method, op } of operations()) {
      const schemes = (op.security ?? []).flatMap((s) => Object.keys(s));
      expect({ path, method, schemes }).toEqual({
        path,
        method,
        schemes: expect.arrayContaining(['ApiKeyAuth', 'BearerAuth']),
      });
      expect(op.operationId).toBeTruthy();
      expect(op.responses['500']).toBeDefined();
      expect(op.responses['503']).toBeDefined();
    }
  });

  it('keeps every path slashed and documents 422 with the issues shape', () => {
    for (const { path } of operations()) expect(path.endsWith('/')).toBe(true);
    // Every operation that needs a credential (no empty alternative) documents 422; they are most of them.
    const authenticated = operations().filter(({ op }) => op.security?.every((s) => Object.keys(s).length > 0));
    expect(authenticated.length).toBeGreaterThan(operations().length / 2);
    for (const { path, method, op } of authenticated)
      expect(JSON.stringify(op.responses['422']), `${method} ${path}`).toContain('ValidationBody');
    expect(doc.components.schemas.ValidationBody).toMatchObject({ required: ['detail', 'issues'] });
  });

  it('documents the limits the schemas enforce, such as the API key name bounds', () => {
    expect(JSON.stringify(doc.paths['/api-keys/'])).toContain('ApiKeyCreateInput');
    expect(doc.components.schemas.ApiKeyCreateInput).toMatchObject({
      properties: { name: { type: 'string', minLength: 1, maxLength: 255 } },
      required: ['name'],
    });
  });

  it("lists in the result report only the error codes a browser may send, not the service's own", () => {
    const report = JSON.stringify(doc.components.schemas.ResultReport);
    for (const code of backendErrorCodeList) expect(report).not.toContain(`"${code}"`);
    expect(report).toContain('"selector_missing"');
  });

  it('names only components it has, and describes each event of a stream as Server-Sent Events frame it', () => {
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThan(10);
    expect(refs.filter((name) => !(name in doc.components.schemas))).toEqual([]);
    // An OpenAPI 3.1 event-stream schema describes one event: its `data` line is a string (the JSON
    // it holds is the contentSchema), so a schema of the JSON itself fails every client's validator.
    type Schema = {
      $ref?: string;
      anyOf?: Schema[];
      oneOf?: Schema[];
      properties?: Record<string, Schema>;
      type?: string;
    };
    const resolve = (s: Schema): Schema => (s.$ref ? (doc.components.schemas[s.$ref.split('/').pop()!] as Schema) : s);
    const streams = operations().flatMap(({ path, method, op }) =>
      Object.values(op.responses as Record<string, { content?: Record<string, { schema: Schema }> }>).flatMap(
        (response) => {
          const stream = response.content?.['text/event-stream'];
          return stream ? [{ at: `${method.toUpperCase()} ${path}`, schema: resolve(stream.schema) }] : [];
        },
      ),
    );
    expect(streams.map((s) => s.at)).toEqual(
      expect.arrayContaining([
        'GET /tables/{table_id}/events/',
        'POST /assistant/conversations/{conversation_id}/messages/',
      ]),
    );
    for (const { at, schema } of streams) {
      const events = (schema.anyOf ?? schema.oneOf ?? [schema]).map(resolve);
      expect({ at, data: events.map((event) => event.properties?.data?.type) }).toEqual({
        at,
        data: events.map(() => 'string'),
      });
    }
  });

  it('marks admin-only operations with x-admin-only, says so in their words, and documents their 403', () => {
    const marked = operations().flatMap(({ path, method, op }) => {
      const o = op as typeof op & { 'x-admin-only'?: unknown; summary?: string; description?: string };
      return o['x-admin-only'] === undefined ? [] : [{ at: `${method.toUpperCase()} ${path}`, o }];
    });
    // test/integration/admin-only.test.ts calls each as a member; here only the document's shape.
    expect(marked.length).toBeGreaterThan(10);
    for (const { at, o } of marked) {
      const adminOnly = o['x-admin-only'];
      expect({ at, ok: adminOnly === true || (typeof adminOnly === 'string' && adminOnly.length > 0) }).toEqual({
        at,
        ok: true,
      });
      expect(`${o.summary ?? ''} ${o.description ?? ''}`, at).toMatch(/\(admins\)|admins only/i);
      expect(o.responses['403'], at).toBeDefined();
    }
    const agentSending = doc.paths['/pnet/agent-sending/']!.patch as { 'x-admin-only'?: unknown };
    expect(agentSending['x-admin-only']).toBe('when unpausing');
    expect((doc.paths['/webhooks/endpoints/']!.get as { 'x-admin-only'?: unknown })['x-admin-only']).toBeUndefined();
  });

  it('serves an API reference page at /docs/', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/docs/' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
  });
});

/**
 * Every string a request may carry (a body property, a query or path parameter) either has a
 * format, an enum or a pattern: Postgres cannot store a NUL character, and a field whose schema
 * allowed one would answer a schema-valid request with 422 (Schemathesis's "schema-valid request
 * rejected"). Free strings with no pattern are listed by where they are.
 */
describe('request strings', () => {
  type Node = Record<string, unknown>;
  const resolve = (node: Node): Node => {
    const ref = node.$ref as string | undefined;
    return ref ? resolve(doc.components.schemas[ref.split('/').pop()!] as Node) : node;
  };
  function freeStrings(node: Node, at: string, seen: Set<Node>, out: string[]) {
    const n = resolve(node);
    if (seen.has(n)) return;
    seen.add(n);
    const types = ([] as unknown[]).concat(n.type ?? []);
    const patterned = Boolean(n.pattern) || ((n.allOf as Node[] | undefined) ?? []).some((sub) => Boolean(sub.pattern));
    if (types.includes('string') && !patterned && !n.format && !n.enum && n.const === undefined && !n.contentMediaType)
      out.push(at);
    for (const key of ['anyOf', 'oneOf', 'allOf'] as const)
      for (const [i, sub] of ((n[key] as Node[] | undefined) ?? []).entries())
        freeStrings(sub, `${at}|${i}`, seen, out);
    for (const [name, sub] of Object.entries((n.properties as Record<string, Node> | undefined) ?? {}))
      freeStrings(sub, `${at}.${name}`, seen, out);
    if (n.items && typeof n.items === 'object') freeStrings(n.items as Node, `${at}[]`, seen, out);
    if (n.additionalProperties && typeof n.additionalProperties === 'object')
      freeStrings(n.additionalProperties as Node, `${at}{}`, seen, out);
    if (n.propertyNames && typeof n.propertyNames === 'object')
      freeStrings(n.propertyNames as Node, `${at}{key}`, seen, out);
  }

  it('refuse a NUL character in their schema, so the document says what is stored', () => {
    const out: string[] = [];
    for (const { path, method, op } of operations()) {
      const full = op as {
        requestBody?: { content?: Record<string, { schema?: Node }> };
        parameters?: { in: string; name: string; schema?: Node }[];
      };
      const body = full.requestBody?.content?.['application/json']?.schema;
      if (body) freeStrings(body, `${method.toUpperCase()} ${path} body`, new Set(), out);
      for (const p of full.parameters ?? [])
        if (p.schema && p.in !== 'header')
          freeStrings(p.schema, `${method.toUpperCase()} ${path} ${p.in} ${p.name}`, new Set(), out);
    }
    // Checked one by one, so a bad one is answered in its own result and never sinks the others.
    const checkedOneByOne = [
      'POST /tables/{table_id}/rows/bulk/ body.rows[].cells{key}',
      'PATCH /tables/{table_id}/rows/bulk/ body.rows[].id',
      'PATCH /tables/{table_id}/rows/bulk/ body.rows[].cells{key}',
      'POST /tables/{table_id}/rows/bulk-delete/ body.row_ids[]',
      'POST /do-not-contact/bulk/ body.entries[].value',
    ];
    expect(out.filter((at) => !checkedOneByOne.includes(at))).toEqual([]);
  });
});
