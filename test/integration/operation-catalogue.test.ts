/**
 * The catalogue of operations built from the document the real app serves: known operations with
 * the access auth.ts gives them, nothing of the browser extension's or public, unique names, and
 * an object schema for every input.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import {
  operationCatalogue,
  operationRequest,
  type CatalogueOperation,
  type OpenApiDocument,
} from '../../domain/assistant/operations.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid } = useTestStack();
let document: OpenApiDocument & {
  paths: Record<string, Record<string, { operationId?: string; tags?: string[]; 'x-access'?: string }>>;
};
let catalogue: CatalogueOperation[];

beforeAll(async () => {
  document = (await stack.app.inject({ method: 'GET', url: '/openapi.json' })).json();
  catalogue = operationCatalogue(document);
});

const named = (name: string) => catalogue.find((o) => o.name === name);

describe('the catalogue of the app’s own operations', () => {
  it('holds known operations with the access their routes need', () => {
    expect(named('listTables')).toMatchObject({ method: 'GET', path: '/tables/', access: 'read', tags: ['tables'] });
    expect(named('createTable')).toMatchObject({ method: 'POST', path: '/tables/', access: 'write' });
    expect(named('listTableRows')).toMatchObject({ access: 'read', path: '/tables/{table_id}/rows/' });
    expect(named('createTableRow')).toMatchObject({ access: 'write' });
    expect(catalogue.length).toBeGreaterThan(100);
  });

  it('says every operation’s access in the document, as auth.ts decides it', () => {
    const operations = Object.values(document.paths).flatMap((item) => Object.values(item));
    expect(
      operations.every((op) => ['read', 'write', 'public', 'extension', 'identity'].includes(op['x-access'] ?? '')),
    ).toBe(true);
    expect(
      operations.filter((op) => op.tags?.includes('pnet-agent')).every((op) => op['x-access'] === 'extension'),
    ).toBe(true);
    expect(operations.find((op) => op.operationId === 'getHealth')?.['x-access']).toBe('public');
  });

  it('has no operation of the browser extension and no public one', () => {
    expect(catalogue.filter((o) => o.tags.includes('pnet-agent'))).toEqual([]);
    expect(named('agentHeartbeat')).toBeUndefined();
    expect(named('getHealth')).toBeUndefined();
    expect(named('receiveInboundEmail')).toBeUndefined();
    expect(named('streamTableEvents')).toBeUndefined();
    expect(catalogue.every((o) => o.access === 'read' || o.access === 'write')).toBe(true);
  });

  it('names each operation once, in order', () => {
    const names = catalogue.map((o) => o.name);
    expect(new Set(names).size).toBe(names.length);
    expect([...names].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(names);
  });

  it('gives every operation an object schema, with no reference left and its path parameters required', () => {
    for (const op of catalogue) {
      expect(op.input_schema, op.name).toMatchObject({ type: 'object', properties: expect.any(Object) });
      expect(JSON.stringify(op.input_schema), op.name).not.toContain('"$ref"');
      for (const [, param] of op.path.matchAll(/\{([^}]+)\}/g))
        expect(op.input_schema.required, `${op.name} ${param}`).toContain(param);
    }
    const body = (named('createTable')!.input_schema.properties as Record<string, Record<string, unknown>>).body!;
    expect(body).toMatchObject({ type: 'object', required: ['name'], properties: { name: { type: 'string' } } });
  });

  it('builds requests the app answers', async () => {
    const create = operationRequest(named('createTable')!, { body: { name: 'From the catalogue' } });
    const created = await stack.app.inject({
      method: create.method,
      url: create.url,
      payload: create.body as object,
      headers: withKey(paid.apiKey),
    });
    expect(created.statusCode).toBe(201);
    const table = created.json<{ id: string }>();
    const list = operationRequest(named('listTables')!, { limit: 10, order: 'name' });
    const listed = await stack.app.inject({ method: list.method, url: list.url, headers: withKey(paid.apiKey) });
    expect(listed.statusCode).toBe(200);
    expect(JSON.stringify(listed.json())).toContain(table.id);
    const rows = operationRequest(named('listTableRows')!, { table_id: table.id, limit: 5 });
    expect(
      (await stack.app.inject({ method: rows.method, url: rows.url, headers: withKey(paid.apiKey) })).statusCode,
    ).toBe(200);
  });
});
