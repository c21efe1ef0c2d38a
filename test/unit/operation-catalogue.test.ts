/**
 * The catalogue of operations offered to a model, read from a small hand-written OpenAPI
 * document: inlined references (cycles included), required inputs, what is left out, and the
 * request a tool call stands for.
 */
import { describe, expect, it } from 'vitest';
import {
  offeredTo,
  operationCatalogue,
  operationRequest,
  type CatalogueOperation,
  type OpenApiDocument,
} from '../../domain/assistant/operations.js';

const uuidParam = (name: string) => ({ name, in: 'path', required: true, schema: { type: 'string', format: 'uuid' } });
const json = (schema: unknown) => ({ required: true, content: { 'application/json': { schema } } });
const ok = { '200': { description: 'OK', content: { 'application/json': { schema: { type: 'object' } } } } };
const secured = [{ ApiKeyAuth: [] }, { BearerAuth: [] }];

const document: OpenApiDocument = {
  paths: {
    '/tables/': {
      get: {
        operationId: 'listTables',
        summary: 'List tables',
        tags: ['tables'],
        'x-access': 'read',
        parameters: [
          {
            name: 'limit',
            in: 'query',
            required: false,
            schema: { type: 'integer' },
            description: 'At most this many',
          },
          { name: 'tag', in: 'query', schema: { type: 'array', items: { type: 'string' } } },
        ],
        security: secured,
        responses: ok,
      },
      post: {
        operationId: 'createTable',
        summary: 'Create a table',
        description: 'A new table.',
        tags: ['tables'],
        'x-access': 'write',
        requestBody: json({ $ref: '#/components/schemas/TableInput' }),
        security: secured,
        responses: ok,
      },
    },
    '/tables/{table_id}/rows/{row_id}/': {
      parameters: [uuidParam('table_id')],
      get: {
        operationId: 'getRow',
        tags: ['table-rows'],
        'x-access': 'read',
        parameters: [uuidParam('row_id'), { name: 'fields', in: 'query', required: true, schema: { type: 'string' } }],
        security: secured,
        responses: ok,
      },
      patch: {
        operationId: 'updateRow',
        tags: ['table-rows'],
        // No x-access: derived from the method.
        'x-admin-only': 'when the row is locked',
        parameters: [uuidParam('row_id'), { name: 'x-trace', in: 'header', schema: { type: 'string' } }],
        requestBody: {
          content: { 'application/json': { schema: { type: 'object', properties: { cells: { type: 'object' } } } } },
        },
        security: secured,
        responses: ok,
      },
    },
    '/folders/{folder_id}/': {
      put: {
        operationId: 'replaceFolder',
        tags: ['table-folders'],
        'x-access': 'write',
        'x-price-credits': 3,
        'x-admin-only': true,
        parameters: [{ $ref: '#/components/parameters/FolderId' }],
        requestBody: json({ $ref: '#/components/schemas/Folder', description: 'The folder as it should be' }),
        security: secured,
        responses: ok,
      },
    },
    '/health/': { get: { operationId: 'getHealth', tags: ['platform'], 'x-access': 'public', responses: ok } },
    '/status/': {
      get: { operationId: 'getStatus', tags: ['platform'], security: [{ ApiKeyAuth: [] }, {}], responses: ok },
    },
    '/pnet/agent/heartbeat/': {
      post: {
        operationId: 'agentHeartbeat',
        tags: ['pnet-agent'],
        'x-access': 'extension',
        requestBody: json({ type: 'object' }),
        responses: ok,
      },
    },
    '/pnet/agent/config/': {
      get: { operationId: 'agentConfig', tags: ['pnet-agent'], security: secured, responses: ok },
    },
    '/uploads/': {
      post: {
        operationId: 'uploadFile',
        tags: ['attachments'],
        'x-access': 'write',
        requestBody: { required: true, content: { 'multipart/form-data': { schema: { type: 'object' } } } },
        responses: ok,
      },
    },
    '/tables/{table_id}/csv/': {
      post: {
        operationId: 'importCsv',
        tags: ['table-rows'],
        'x-access': 'write',
        parameters: [uuidParam('table_id')],
        requestBody: { content: { 'text/csv': { schema: { type: 'string' } } } },
        responses: ok,
      },
    },
    '/tables/{table_id}/events/': {
      get: {
        operationId: 'streamEvents',
        tags: ['table-events'],
        'x-access': 'read',
        parameters: [uuidParam('table_id')],
        responses: {
          '200': { description: 'Events', content: { 'text/event-stream': { schema: { type: 'string' } } } },
          '404': { description: 'No', content: { 'application/json': { schema: {} } } },
        },
      },
    },
    '/unnamed/': { get: { tags: ['x'], responses: ok } },
  },
  components: {
    parameters: {
      FolderId: {
        name: 'folder_id',
        in: 'path',
        required: true,
        schema: { type: 'string' },
        description: 'The folder',
      },
    },
    schemas: {
      TableInput: {
        type: 'object',
        properties: {
          name: { $ref: '#/components/schemas/Name' },
          folder: { $ref: '#/components/schemas/Folder' },
          status: { enum: [{ $ref: 'not a reference, a value' }] },
        },
        required: ['name'],
      },
      Name: { type: 'string', minLength: 1 },
      // A folder holds folders: a cycle.
      Folder: {
        type: 'object',
        properties: {
          name: { $ref: '#/components/schemas/Name' },
          children: { type: 'array', items: { $ref: '#/components/schemas/Folder' } },
        },
      },
    },
  },
};

const catalogue = operationCatalogue(document);
const named = (name: string) => {
  const op = catalogue.find((o) => o.name === name);
  if (!op) throw new Error(`no ${name}`);
  return op;
};

describe('operationCatalogue', () => {
  it('keeps the operations a credential may call, sorted by name', () => {
    expect(catalogue.map((o) => o.name)).toEqual(['createTable', 'getRow', 'listTables', 'replaceFolder', 'updateRow']);
  });

  it('leaves out public, extension, upload, event-stream and unnamed operations', () => {
    const names = catalogue.map((o) => o.name);
    for (const left of [
      'getHealth',
      'getStatus',
      'agentHeartbeat',
      'agentConfig',
      'uploadFile',
      'importCsv',
      'streamEvents',
    ])
      expect(names).not.toContain(left);
  });

  it('reads who may call it, and offers a member all but the admin-only ones', () => {
    expect(named('replaceFolder').admin_only).toBe(true);
    expect(named('updateRow').admin_only).toBe('when the row is locked');
    expect(named('listTables').admin_only).toBeNull();
    expect(offeredTo(catalogue, 'admin')).toEqual(catalogue);
    expect(offeredTo(catalogue, 'member').map((o) => o.name)).toEqual([
      'createTable',
      'getRow',
      'listTables',
      'updateRow',
    ]);
  });

  it('describes each operation: method, path, texts, tags, access and price', () => {
    expect(named('createTable')).toMatchObject({
      method: 'POST',
      path: '/tables/',
      summary: 'Create a table',
      description: 'A new table.',
      tags: ['tables'],
      access: 'write',
      price_credits: null,
    });
    expect(named('listTables')).toMatchObject({ method: 'GET', description: '', access: 'read' });
    expect(named('updateRow')).toMatchObject({ method: 'PATCH', access: 'write', summary: '' });
    expect(named('replaceFolder')).toMatchObject({ method: 'PUT', price_credits: 3 });
  });

  it('takes path and query parameters as top-level properties, required as the document says, and no headers', () => {
    expect(named('listTables').input_schema).toEqual({
      type: 'object',
      properties: {
        limit: { type: 'integer', description: 'At most this many' },
        tag: { type: 'array', items: { type: 'string' } },
      },
      additionalProperties: false,
    });
    // The path item's parameter joins the operation's; path parameters are always required.
    const getRow = named('getRow').input_schema;
    expect(Object.keys(getRow.properties as object)).toEqual(['table_id', 'row_id', 'fields']);
    expect(getRow.required).toEqual(['table_id', 'row_id', 'fields']);
    const updateRow = named('updateRow').input_schema;
    expect(Object.keys(updateRow.properties as object)).toEqual(['table_id', 'row_id', 'body']);
    // A body the document does not mark required is optional.
    expect(updateRow.required).toEqual(['table_id', 'row_id']);
  });

  it('puts the JSON body under `body` with every reference inlined, and values left as they are', () => {
    const input = named('createTable').input_schema;
    expect(input.required).toEqual(['body']);
    const body = (input.properties as Record<string, Record<string, unknown>>).body!;
    expect(body).toMatchObject({
      type: 'object',
      required: ['name'],
      properties: { name: { type: 'string', minLength: 1 } },
    });
    expect(JSON.stringify(input)).not.toContain('#/components');
    expect((body.properties as Record<string, unknown>).status).toEqual({
      enum: [{ $ref: 'not a reference, a value' }],
    });
  });

  it('stops a cycle at its second visit, and keeps a reference’s own keywords', () => {
    const input = named('replaceFolder').input_schema;
    const properties = input.properties as Record<string, Record<string, unknown>>;
    expect(properties.folder_id).toEqual({ type: 'string', description: 'The folder' });
    const folder = properties.body!;
    expect(folder.description).toBe('The folder as it should be');
    const children = (folder.properties as Record<string, Record<string, unknown>>).children!;
    expect(children.type).toBe('array');
    expect(children.items).toEqual({ description: expect.stringContaining('Folder again') });
    // The inner folder of createTable's body is cut the same way, one level down.
    const nested = (
      (named('createTable').input_schema.properties as Record<string, Record<string, unknown>>).body!
        .properties as Record<string, Record<string, unknown>>
    ).folder!;
    expect((nested.properties as Record<string, Record<string, unknown>>).name).toEqual({
      type: 'string',
      minLength: 1,
    });
    expect(
      ((nested.properties as Record<string, Record<string, unknown>>).children!.items as Record<string, unknown>)
        .properties,
    ).toBeUndefined();
  });

  it('leaves the document as it was', () => {
    const copy = structuredClone(document);
    operationCatalogue(document);
    expect(document).toEqual(copy);
  });

  it('refuses a reference to nothing and two inputs of one name', () => {
    const broken = {
      paths: {
        '/a/': {
          get: {
            operationId: 'a',
            'x-access': 'read',
            parameters: [{ name: 'q', in: 'query', schema: { $ref: '#/components/schemas/Missing' } }],
          },
        },
      },
    };
    expect(() => operationCatalogue(broken)).toThrow(/#\/components\/schemas\/Missing/);
    const clash = {
      paths: {
        '/a/': {
          post: {
            operationId: 'a',
            'x-access': 'write',
            parameters: [{ name: 'body', in: 'query', schema: {} }],
            requestBody: json({}),
          },
        },
      },
    };
    expect(() => operationCatalogue(clash)).toThrow(/two inputs are named body/);
  });

  it('reads an empty document as an empty catalogue', () => {
    expect(operationCatalogue({})).toEqual([]);
  });
});

describe('operationRequest', () => {
  it('fills the path with its parameters percent-encoded', () => {
    expect(operationRequest(named('getRow'), { table_id: 'a/b c', row_id: 'ü?#%', fields: 'x' })).toEqual({
      method: 'GET',
      url: '/tables/a%2Fb%20c/rows/%C3%BC%3F%23%25/?fields=x',
    });
  });

  it('adds the declared query parameters, repeating an array, leaving out absent ones and undeclared keys', () => {
    const op = named('listTables');
    expect(operationRequest(op, {})).toEqual({ method: 'GET', url: '/tables/' });
    expect(operationRequest(op, { limit: 5, tag: ['a b', 'c&d'], other: 'ignored', body: { no: 'body' } })).toEqual({
      method: 'GET',
      url: '/tables/?limit=5&tag=a%20b&tag=c%26d',
    });
    expect(operationRequest(op, { limit: null, tag: [] })).toEqual({ method: 'GET', url: '/tables/' });
    expect(operationRequest(op, { limit: 0 }).url).toBe('/tables/?limit=0');
  });

  it('returns the body as given, without checking it', () => {
    expect(operationRequest(named('createTable'), { body: { name: '' } })).toEqual({
      method: 'POST',
      url: '/tables/',
      body: { name: '' },
    });
    expect(operationRequest(named('updateRow'), { table_id: 't', row_id: 'r' })).toEqual({
      method: 'PATCH',
      url: '/tables/t/rows/r/',
    });
  });

  it('refuses a missing path parameter, naming it', () => {
    expect(() => operationRequest(named('getRow'), { table_id: 't' })).toThrow(
      'Operation getRow needs the path parameter row_id.',
    );
    expect(() => operationRequest(named('getRow'), { table_id: '', row_id: null })).toThrow(
      'needs the path parameters table_id, row_id',
    );
  });

  it('works on an operation built by hand', () => {
    const op: CatalogueOperation = {
      name: 'x',
      method: 'DELETE',
      path: '/x/{id}/',
      summary: '',
      description: '',
      tags: [],
      access: 'write',
      admin_only: null,
      price_credits: null,
      input_schema: { type: 'object', properties: { id: {} } },
    };
    expect(operationRequest(op, { id: 42 })).toEqual({ method: 'DELETE', url: '/x/42/' });
  });
});
