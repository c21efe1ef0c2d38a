import { Validator } from '@seriousme/openapi-schema-validator';
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestStack } from '../support/test-stack.js';

const { stack } = useTestStack({ workspaces: false });
let doc: {
  openapi: string;
  info: { version: string };
  paths: Record<string, Record<string, { operationId?: string; security?: Record<string, string[]>[]; responses: Record<string, unknown> }>>;
  components: { securitySchemes: Record<string, unknown>; schemas: Record<string, unknown> };
};
beforeAll(async () => {
  doc = (await stack.app.inject({ method: 'GET', url: '/openapi.json' })).json();
});

const operations = () => Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ path, method, op })));

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1.0 document of interface version 0.0', async () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('0.0');
    const result = await new Validator().validate(doc as never);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('declares both security schemes, an operationId and the error bodies on every operation', () => {
    expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['ApiKeyAuth', 'BearerAuth']);
    expect(operations().length).toBeGreaterThan(5);
    for (const { path, method, op } of operations()) {
      const schemes = (op.security ?? []).flatMap((s) => Object.keys(s));
      expect({ path, method, schemes }).toEqual({ path, method, schemes: expect.arrayContaining(['ApiKeyAuth', 'BearerAuth']) });
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
    for (const { path, method, op } of authenticated) expect(JSON.stringify(op.responses['422']), `${method} ${path}`).toContain('ValidationBody');
    expect(doc.components.schemas.ValidationBody).toMatchObject({ required: ['detail', 'issues'] });
  });

  it('documents the limits the schemas enforce, such as the API key name bounds', () => {
    expect(JSON.stringify(doc.paths['/api-keys/'])).toContain('ApiKeyCreateInput');
    expect(doc.components.schemas.ApiKeyCreateInput).toMatchObject({
      properties: { name: { type: 'string', minLength: 1, maxLength: 255 } },
      required: ['name'],
    });
  });

  it('serves an API reference page at /docs/', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/docs/' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
  });
});
