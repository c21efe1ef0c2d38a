import { describe, expect, it } from 'vitest';
import {
  displayedPrefix,
  generateApiKeySecret,
  hashApiKey,
  isWellFormedApiKey,
} from '../../domain/platform/api-key-secret.js';
import { useTestStack, withKey, type TestWorkspace } from '../support/test-stack.js';

const { stack, paid, free } = useTestStack();

const post = (ws: TestWorkspace, payload: unknown) =>
  stack.app.inject({ method: 'POST', url: '/api-keys/', headers: withKey(ws.apiKey), payload: payload as object });

describe('key secrets', () => {
  it('have a typed prefix, at least 128 random bits and a checksum that catches a typo', () => {
    const keys = new Set(Array.from({ length: 200 }, generateApiKeySecret));
    expect(keys.size).toBe(200);
    for (const key of keys) {
      expect(key).toMatch(/^owk_[0-9A-Za-z]{38}$/);
      expect(isWellFormedApiKey(key)).toBe(true);
    }
    const key = [...keys][0]!;
    // 32 base62 characters carry 32 * log2(62) ≈ 190 bits.
    expect(32 * Math.log2(62)).toBeGreaterThan(128);
    const typo = key.slice(0, 10) + (key[10] === 'a' ? 'b' : 'a') + key.slice(11);
    expect(isWellFormedApiKey(typo)).toBe(false);
    expect(isWellFormedApiKey(key + 'x')).toBe(false);
  });
});

describe('API keys (interface spec: API keys)', () => {
  it('creates a key, returning the secret once and storing only its SHA-256', async () => {
    const res = await post(paid, { name: 'CI key' });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(
      [
        'created_at',
        'expire_at',
        'id',
        'key',
        'key_prefix',
        'last_used_at',
        'name',
        'org_id',
        'scope',
        'updated_at',
      ].sort(),
    );
    expect(body).toMatchObject({
      name: 'CI key',
      scope: 'write',
      org_id: paid.workspaceId,
      expire_at: null,
      last_used_at: null,
    });
    expect(body.key.startsWith(body.key_prefix)).toBe(true);
    expect(body.key_prefix).toBe(displayedPrefix(body.key));

    const [row] = await stack.sql`select * from api_keys where id = ${body.id}`;
    expect(Buffer.compare(row!.key_hash, hashApiKey(body.key))).toBe(0);
    expect(JSON.stringify(row)).not.toContain(body.key);

    const read = (
      await stack.app.inject({ method: 'GET', url: `/api-keys/${body.id}/`, headers: withKey(paid.apiKey) })
    ).json();
    expect(read.key).toBeUndefined();
    const list = (await stack.app.inject({ method: 'GET', url: '/api-keys/', headers: withKey(paid.apiKey) })).json();
    expect(list.api_keys.map((k: { id: string }) => k.id)).toContain(body.id);
    expect(list.api_keys.every((k: { key?: string }) => k.key === undefined)).toBe(true);
  });

  it('accepts names of 1 and 255 characters and refuses 0 and 256 with 422', async () => {
    expect((await post(paid, { name: 'a' })).statusCode).toBe(201);
    expect((await post(paid, { name: 'n'.repeat(255) })).statusCode).toBe(201);
    for (const name of ['', 'm'.repeat(256)]) {
      const res = await post(paid, { name });
      expect(res.statusCode).toBe(422);
      expect(res.json().issues[0]).toMatchObject({ loc: ['body', 'name'], input: name });
    }
    const missing = await post(paid, {});
    expect(missing.statusCode).toBe(422);
    expect(missing.json().issues[0]).toMatchObject({ loc: ['body', 'name'], input: {} });
  });

  it('refuses a duplicate name in the same workspace with 409, allows it in another and after delete', async () => {
    const first = (await post(paid, { name: 'dup' })).json();
    const again = await post(paid, { name: 'dup' });
    expect(again.statusCode).toBe(409);
    expect(again.json()).toEqual({ detail: 'An API key named "dup" already exists in this workspace.' });
    const otherWorkspace = await stack.createWorkspace('paid');
    expect((await post(otherWorkspace, { name: 'dup' })).statusCode).toBe(201);
    await stack.app.inject({ method: 'DELETE', url: `/api-keys/${first.id}/`, headers: withKey(paid.apiKey) });
    expect((await post(paid, { name: 'dup' })).statusCode).toBe(201);
    const renamed = await stack.app.inject({
      method: 'PATCH',
      url: `/api-keys/${first.id}/`,
      headers: withKey(paid.apiKey),
      payload: { name: 'x' },
    });
    expect(renamed.statusCode).toBe(404);
  });

  it('gives free workspaces read keys only, and paid ones write by default', async () => {
    const scopes = (ws: TestWorkspace) =>
      stack.app.inject({ method: 'GET', url: '/api-keys/scopes/', headers: withKey(ws.apiKey) });
    expect((await scopes(free)).json()).toEqual({ scopes: ['read'] });
    expect((await scopes(paid)).json()).toEqual({ scopes: ['read', 'write'] });
    const freeAdmin = await stack.addMember(free.workspaceId, 'admin');
    const asFree = (payload: object) =>
      stack.app.inject({
        method: 'POST',
        url: '/api-keys/',
        headers: { authorization: `Bearer ${freeAdmin.accessToken}` },
        payload,
      });
    const defaulted = await asFree({ name: 'free default' });
    expect(defaulted.statusCode).toBe(201);
    expect(defaulted.json().scope).toBe('read');
    const write = await asFree({ name: 'free write', scope: 'write' });
    expect(write.statusCode).toBe(403);
    expect(write.json().detail).toMatch(/free workspace may mint read keys only/);
    expect((await post(paid, { name: 'paid read', scope: 'read' })).json().scope).toBe('read');
    expect((await post(paid, { name: 'paid null', scope: null })).json().scope).toBe('write');
    expect((await post(paid, { name: 'bad scope', scope: 'admin' })).statusCode).toBe(422);
  });

  it('updates name and expire_at, counts live keys and deletes', async () => {
    const ws = await stack.createWorkspace('paid');
    const count = async () =>
      (await stack.app.inject({ method: 'GET', url: '/api-keys/count/', headers: withKey(ws.apiKey) })).json();
    expect(await count()).toEqual({ count: 1 });
    const key = (await post(ws, { name: 'temp', expire_at: '2030-01-01T00:00:00Z' })).json();
    expect(key.expire_at).toBe('2030-01-01T00:00:00.000Z');
    expect(await count()).toEqual({ count: 2 });
    const patch = (payload: object) =>
      stack.app.inject({ method: 'PATCH', url: `/api-keys/${key.id}/`, headers: withKey(ws.apiKey), payload });
    const renamed = (await patch({ name: 'renamed' })).json();
    expect(renamed).toMatchObject({ name: 'renamed', expire_at: '2030-01-01T00:00:00.000Z' });
    expect(Date.parse(renamed.updated_at)).toBeGreaterThanOrEqual(Date.parse(key.updated_at));
    expect((await patch({ expire_at: null })).json()).toMatchObject({ name: 'renamed', expire_at: null });
    expect((await patch({ expire_at: 'tomorrow' })).statusCode).toBe(422);
    expect(
      (await stack.app.inject({ method: 'DELETE', url: `/api-keys/${key.id}/`, headers: withKey(ws.apiKey) }))
        .statusCode,
    ).toBe(204);
    expect(await count()).toEqual({ count: 1 });
    expect(
      (await stack.app.inject({ method: 'GET', url: `/api-keys/${key.id}/`, headers: withKey(ws.apiKey) })).statusCode,
    ).toBe(404);
    expect(
      (await stack.app.inject({ method: 'DELETE', url: `/api-keys/${key.id}/`, headers: withKey(ws.apiKey) }))
        .statusCode,
    ).toBe(404);
  });

  it('refuses expiry dates outside 1970 to 9998 and names with control characters, storing nothing', async () => {
    const ws = await stack.createWorkspace('paid');
    expect((await post(ws, { name: 'edge', expire_at: '9998-12-31T23:00:00Z' })).statusCode).toBe(201);
    for (const expire_at of [
      '1969-12-31T23:59:59Z',
      '0020-02-29T00:00:00Z',
      '0000-01-01T00:00:00Z',
      '9999-12-31T23:59:59-01:00',
    ]) {
      const res = await post(ws, { name: `bad ${expire_at}`, expire_at });
      expect(res.statusCode).toBe(422);
      expect(res.json().issues[0]).toMatchObject({ loc: ['body', 'expire_at'], input: expire_at });
    }
    expect((await post(ws, { name: 'nul\u0000name' })).statusCode).toBe(422);
    const list = (await stack.app.inject({ method: 'GET', url: '/api-keys/', headers: withKey(ws.apiKey) })).json();
    expect(list.api_keys.map((k: { name: string }) => k.name).sort()).toEqual(['Admin key', 'edge']);
  });

  it('refuses a good key beside an Authorization header that is not a bearer token, and takes it beside one', async () => {
    const get = (authorization: string) =>
      stack.app.inject({ method: 'GET', url: '/workspace/', headers: { ...withKey(paid.apiKey), authorization } });
    for (const malformed of ['Basic dXNlcjpwYXNz', 'Bearer', 'Bearer a b', '']) {
      const refused = await get(malformed);
      expect(refused.statusCode, malformed).toBe(401);
      expect(refused.json()).toHaveProperty('detail');
    }
    // Well formed, the key still decides (it is read first).
    expect((await get('Bearer not-a-token')).statusCode).toBe(200);
  });

  it('answers 422 with a path issue for a malformed key id', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/api-keys/not-a-uuid/', headers: withKey(paid.apiKey) });
    expect(res.statusCode).toBe(422);
    expect(res.json().issues[0]).toMatchObject({ loc: ['path', 'key_id'], input: 'not-a-uuid' });
  });
});
