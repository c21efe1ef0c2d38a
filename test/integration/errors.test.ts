import { Client, Connection } from '@temporalio/client';
import { connect } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/app.js';
import { createSql } from '../../db/sql.js';
import { freePort } from '../../worker/ports.js';
import { useTestStack, withKey, type TestWorkspace } from '../support/test-stack.js';
import { testIntegrations } from '../support/integrations.js';

const { stack } = useTestStack({
  workspaces: false,
  extendApp: (app) => {
    app.get('/test-only/boom/', async () => {
      throw new Error('secret internals at /srv/app.ts:42');
    });
  },
});
let ws: TestWorkspace;
beforeAll(async () => {
  ws = await stack.createWorkspace('paid');
});

const expectValidationShape = (body: { detail: unknown; issues: unknown[] }) => {
  expect(typeof body.detail).toBe('string');
  expect(body.detail).not.toContain('\n');
  expect(body.issues.length).toBeGreaterThan(0);
  for (const issue of body.issues as Record<string, unknown>[]) {
    expect(Object.keys(issue).sort()).toEqual(['input', 'loc', 'msg', 'type']);
    const loc = issue.loc as string[];
    expect(loc.length === 1 || loc.length === 2).toBe(true);
    expect(['body', 'query', 'path', 'header']).toContain(loc[0]);
  }
};

describe("error shapes (the interface spec's Errors section)", () => {
  it('turns a zod failure in the body into 422 issues naming the field', async () => {
    const res = await stack.app.inject({
      method: 'POST',
      url: '/api-keys/',
      headers: withKey(ws.apiKey),
      payload: { name: 5 },
    });
    expect(res.statusCode).toBe(422);
    expectValidationShape(res.json());
    expect(res.json().issues[0]).toMatchObject({ loc: ['body', 'name'], input: 5 });
    expect(res.json().detail).toMatch(/^Invalid body field "name"/);
  });

  it('turns a query failure into 422 with loc query', async () => {
    const at = async (limit: string) =>
      stack.app.inject({ method: 'GET', url: `/credits/ledger/?limit=${limit}`, headers: withKey(ws.apiKey) });
    for (const ok of ['1', '200']) expect((await at(ok)).statusCode).toBe(200);
    for (const bad of ['0', '201', 'ten']) {
      const res = await at(bad);
      expect(res.statusCode).toBe(422);
      expectValidationShape(res.json());
      expect(res.json().issues[0]).toMatchObject({ loc: ['query', 'limit'], input: bad });
    }
  });

  it('turns malformed JSON and an empty JSON body into 422, never 500', async () => {
    for (const payload of ['{"name": ', '']) {
      const res = await stack.app.inject({
        method: 'POST',
        url: '/api-keys/',
        headers: { ...withKey(ws.apiKey), 'content-type': 'application/json' },
        payload,
      });
      expect(res.statusCode).toBe(422);
      expectValidationShape(res.json());
      expect(res.json().issues[0].loc).toEqual(['body']);
    }
  });

  it('drops a __proto__ key instead of refusing the body or polluting anything', async () => {
    const res = await stack.app.inject({
      method: 'POST',
      url: '/api-keys/',
      headers: { ...withKey(ws.apiKey), 'content-type': 'application/json' },
      payload: '{"name": "proto-safe", "__proto__": {"scope": "admin"}}',
    });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ name: 'proto-safe', scope: 'write' });
    expect(({} as Record<string, unknown>).scope).toBeUndefined();
  });

  it('redirects an unslashed path with 308, keeping the query, and answers 404 with detail otherwise', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/credits/ledger?limit=5', headers: withKey(ws.apiKey) });
    expect(res.statusCode).toBe(308);
    expect(res.headers.location).toBe('/credits/ledger/?limit=5');
    const missing = await stack.app.inject({ method: 'GET', url: '/nothing-here/', headers: withKey(ws.apiKey) });
    expect(missing.statusCode).toBe(404);
    expect(Object.keys(missing.json())).toEqual(['detail']);
  });

  it('answers 405 with Allow to a method a known path does not serve, before reading any body', async () => {
    const res = await stack.app.inject({
      method: 'PUT',
      url: '/workspace/',
      headers: withKey(ws.apiKey),
      payload: 'not json',
    });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
    expect(Object.keys(res.json())).toEqual(['detail']);
    const byId = await stack.app.inject({
      method: 'POST',
      url: '/api-keys/00000000-0000-4000-8000-000000000000/',
      headers: withKey(ws.apiKey),
    });
    expect(byId.statusCode).toBe(405);
    expect(byId.headers.allow).toBe('DELETE, GET, HEAD, PATCH');
    const staticBesideParam = await stack.app.inject({
      method: 'PATCH',
      url: '/api-keys/count/',
      headers: withKey(ws.apiKey),
    });
    expect(staticBesideParam.statusCode).toBe(405);
    expect(staticBesideParam.headers.allow).toBe('GET, HEAD');
  });

  it('answers a request the HTTP parser refuses (a Content-Length that is not a number) with 400 and detail, as documented', async () => {
    const port = Number(new URL(await stack.app.listen({ port: 0, host: '127.0.0.1' })).port);
    try {
      const raw = await new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => {
          socket.write(
            `DELETE /notifications/chatapp/ HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: ${ws.apiKey}\r\ncontent-length: y#DwOMavnO\r\n\r\n`,
          );
        });
        let answer = '';
        socket.on('data', (chunk) => (answer += chunk.toString()));
        socket.on('end', () => resolve(answer));
        socket.on('error', reject);
      });
      const [head, body] = raw.split('\r\n\r\n');
      expect(head).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
      expect(head).toMatch(/content-type: application\/json/i);
      expect(JSON.parse(body!)).toEqual({ detail: expect.stringMatching(/Content-Length that is not a number/) });
    } finally {
      stack.app.server.close();
    }
    const document = (await stack.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    expect(Object.keys(document.paths['/notifications/chatapp/'].delete.responses)).toContain('400');
  });

  it('answers 500 with a generic detail that leaks no stack or message', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/test-only/boom/', headers: withKey(ws.apiKey) });
    expect(res.statusCode).toBe(500);
    expect(Object.keys(res.json())).toEqual(['detail']);
    expect(res.body).not.toMatch(/secret internals|\/srv\/|at /);
    expect(res.json().detail).toContain(res.headers['x-request-id']);
  });
});

describe('dependencies down', () => {
  it('answers 503 with a detail body when Postgres or Temporal is unreachable, and health says which one', async () => {
    const closedPort = await freePort(59000);
    const sql = createSql(`postgres://nobody:x@127.0.0.1:${closedPort}/none`, { max: 1 });
    const deadTemporal = new Client({ connection: Connection.lazy({ address: `127.0.0.1:${closedPort}` }) });
    const app = await buildApp({
      sql,
      temporal: { client: deadTemporal, taskQueue: 'none' },
      verifyToken: async () => undefined,
      rateLimit: { limit: 0, windowSeconds: 60 },
      integrations: testIntegrations(),
    });
    app.get('/test-only/workflow/', { config: { access: 'public' } }, async () =>
      deadTemporal.workflow.getHandle('credit-hold/x').describe(),
    );
    try {
      const workflowDown = await app.inject({ method: 'GET', url: '/test-only/workflow/' });
      expect(workflowDown.statusCode).toBe(503);
      expect(workflowDown.json()).toEqual({ detail: 'The workflow service is unavailable. Try again shortly.' });
      const res = await app.inject({ method: 'GET', url: '/workspace/', headers: withKey(ws.apiKey) });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toEqual({ detail: 'The database is unavailable. Try again shortly.' });
      const health = await app.inject({ method: 'GET', url: '/health/' });
      expect(health.statusCode).toBe(503);
      expect(health.json()).toMatchObject({
        status: 'degraded',
        postgres: { ok: false },
        temporal: { ok: false },
        detail: 'Postgres and Temporal unreachable.',
      });
    } finally {
      await app.close();
      await sql.end({ timeout: 1 });
    }
  });

  it('reports both dependencies healthy on the real stack', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/health/' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ status: 'ok', postgres: { ok: true }, temporal: { ok: true } });
  });
});

describe('structured logs', () => {
  it('logs each request as JSON with its request id, echoed to the caller in x-request-id', async () => {
    const { default: pino } = await import('pino');
    const { Writable } = await import('node:stream');
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    const app = await buildApp({
      sql: stack.sql,
      temporal: { client: stack.client, taskQueue: stack.taskQueue },
      verifyToken: async () => undefined,
      rateLimit: { limit: 0, windowSeconds: 60 },
      integrations: testIntegrations(),
      logger: pino({ level: 'info' }, sink),
    });
    try {
      const given = await app.inject({
        method: 'GET',
        url: '/credits/',
        headers: { ...withKey(ws.apiKey), 'x-request-id': 'trace-abc.1' },
      });
      expect(given.headers['x-request-id']).toBe('trace-abc.1');
      const minted = await app.inject({ method: 'GET', url: '/credits/', headers: withKey(ws.apiKey) });
      expect(minted.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      await new Promise((r) => setImmediate(r));
      expect(lines.filter((l) => l.reqId === 'trace-abc.1').map((l) => l.msg)).toEqual([
        'incoming request',
        'request completed',
      ]);
      expect(lines.some((l) => l.reqId === minted.headers['x-request-id'])).toBe(true);
    } finally {
      await app.close();
    }
  });
});
