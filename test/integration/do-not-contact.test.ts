import { describe, expect, it } from 'vitest';
import { dncBulkMax } from '../../domain/inbox/do-not-contact.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack, paid } = useTestStack();

const call = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object, ws = paid) =>
  stack.app.inject({ method, url, headers: withKey(ws.apiKey), ...(payload ? { payload } : {}) });

describe('do-not-contact list', () => {
  it('adds one email normalised, and adding it again answers the same entry', async () => {
    const first = await call('POST', '/do-not-contact/', {
      kind: 'email',
      value: '  Ada@Example.COM ',
      reason: 'asked us to stop',
    });
    expect(first.statusCode).toBe(201);
    expect(first.json()).toMatchObject({
      kind: 'email',
      value: 'ada@example.com',
      reason: 'asked us to stop',
      source: 'manual',
      created_by: expect.any(String),
    });
    const again = await call('POST', '/do-not-contact/', { kind: 'email', value: 'ada@example.com' });
    expect(again.statusCode).toBe(200);
    expect(again.json().id).toBe(first.json().id);
    expect((await call('GET', `/do-not-contact/${first.json().id}/`)).json()).toEqual(first.json());
  });

  it('stores a domain bare and a profile URL without scheme, www, query or trailing slash', async () => {
    expect((await call('POST', '/do-not-contact/', { kind: 'domain', value: '@Acme.io' })).json().value).toBe(
      'acme.io',
    );
    const profile = await call('POST', '/do-not-contact/', {
      kind: 'profile_url',
      value: 'https://www.pnet.example/in/Grace-Hopper/?trk=x',
    });
    expect(profile.statusCode).toBe(201);
    expect(profile.json().value).toBe('pnet.example/in/grace-hopper');
  });

  it('refuses an unreadable single value with 422 on the value', async () => {
    for (const body of [
      { kind: 'email', value: 'not-an-email' },
      { kind: 'domain', value: 'no dots' },
      { kind: 'profile_url', value: 'https://pnet.example/' },
      { kind: 'phone', value: '123' },
    ]) {
      const res = await call('POST', '/do-not-contact/', body);
      expect(res.statusCode).toBe(422);
      expect(res.json().issues[0].loc[0]).toBe('body');
    }
  });

  it('adds in bulk with a result per entry: a bad one never sinks the others, duplicates are harmless', async () => {
    await call('POST', '/do-not-contact/', { kind: 'email', value: 'known@bulk.example' });
    const res = await call('POST', '/do-not-contact/bulk/', {
      entries: [
        { value: 'New@Bulk.example' },
        { value: 'known@bulk.example' },
        { value: 'garbage value' },
        { value: 'bulk-domain.example' },
        { value: 'https://pnet.example/in/bulk-person' },
        { kind: 'email', value: 'new@bulk.example' },
        { kind: 'email', value: 'https://pnet.example/in/x' },
      ],
      reason: 'imported',
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.results.map((r: { status: string }) => r.status)).toEqual([
      'added',
      'exists',
      'invalid',
      'added',
      'added',
      'exists',
      'invalid',
    ]);
    expect(body).toMatchObject({ added: 3, existing: 2, invalid: 2 });
    expect(body.results[2]).toMatchObject({ index: 2, entry: null, detail: expect.stringContaining('Entry 2') });
    expect(body.results[3].entry).toMatchObject({
      kind: 'domain',
      value: 'bulk-domain.example',
      source: 'import',
      reason: 'imported',
    });
    expect(body.results[4].entry).toMatchObject({ kind: 'profile_url', value: 'pnet.example/in/bulk-person' });
  });

  it(`takes 1 to ${dncBulkMax} entries in one bulk add`, async () => {
    expect((await call('POST', '/do-not-contact/bulk/', { entries: [] })).statusCode).toBe(422);
    const max = Array.from({ length: dncBulkMax }, (_, i) => ({ value: `p${i}@max.example` }));
    const ok = await call('POST', '/do-not-contact/bulk/', { entries: max });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().added).toBe(dncBulkMax);
    const over = await call('POST', '/do-not-contact/bulk/', { entries: [...max, { value: 'one-more@max.example' }] });
    expect(over.statusCode).toBe(422);
    expect(over.json().issues[0].loc).toEqual(['body', 'entries']);
  });

  it('lists newest first, paged, filtered by kind and text', async () => {
    const ws = await stack.createWorkspace('paid');
    await call(
      'POST',
      '/do-not-contact/bulk/',
      { entries: [{ value: 'a@list.example' }, { value: 'b@list.example' }, { value: 'list.example' }] },
      ws,
    );
    const all = (await call('GET', '/do-not-contact/?limit=2', undefined, ws)).json();
    expect(all.total).toBe(3);
    expect(all.entries).toHaveLength(2);
    expect(all.next_offset).toBe(2);
    const rest = (await call('GET', '/do-not-contact/?limit=2&offset=2', undefined, ws)).json();
    expect(rest.entries).toHaveLength(1);
    expect(rest.next_offset).toBeNull();
    const domains = (await call('GET', '/do-not-contact/?kind=domain', undefined, ws)).json();
    expect(domains.entries.map((e: { value: string }) => e.value)).toEqual(['list.example']);
    const searched = (await call('GET', '/do-not-contact/?search=B@LIST', undefined, ws)).json();
    expect(searched.entries.map((e: { value: string }) => e.value)).toEqual(['b@list.example']);
    expect((await call('GET', '/do-not-contact/?limit=0', undefined, ws)).statusCode).toBe(422);
    expect((await call('GET', '/do-not-contact/?limit=200', undefined, ws)).statusCode).toBe(200);
    expect((await call('GET', '/do-not-contact/?limit=201', undefined, ws)).statusCode).toBe(422);
  });

  it('checks an email (itself or its domain) and a profile URL, and says which entries block it', async () => {
    const ws = await stack.createWorkspace('paid');
    await call(
      'POST',
      '/do-not-contact/bulk/',
      { entries: [{ value: 'check.example' }, { value: 'pnet.example/in/checked' }] },
      ws,
    );
    const blocked = (await call('GET', '/do-not-contact/check/?email=Someone@Check.example', undefined, ws)).json();
    expect(blocked).toMatchObject({ blocked: true, matches: [{ kind: 'domain', value: 'check.example' }] });
    const url = (
      await call(
        'GET',
        `/do-not-contact/check/?profile_url=${encodeURIComponent('https://www.pnet.example/in/Checked/')}`,
        undefined,
        ws,
      )
    ).json();
    expect(url.blocked).toBe(true);
    expect((await call('GET', '/do-not-contact/check/?email=free@other.example', undefined, ws)).json()).toEqual({
      blocked: false,
      matches: [],
    });
  });

  it('deletes an entry, and the person is no longer blocked', async () => {
    const ws = await stack.createWorkspace('paid');
    const entry = (await call('POST', '/do-not-contact/', { kind: 'email', value: 'gone@del.example' }, ws)).json();
    expect((await call('DELETE', `/do-not-contact/${entry.id}/`, undefined, ws)).statusCode).toBe(204);
    expect((await call('DELETE', `/do-not-contact/${entry.id}/`, undefined, ws)).statusCode).toBe(404);
    expect((await call('GET', '/do-not-contact/check/?email=gone@del.example', undefined, ws)).json().blocked).toBe(
      false,
    );
    expect((await call('GET', '/do-not-contact/not-a-uuid/', undefined, ws)).statusCode).toBe(422);
  });

  it('needs a write key to add', async () => {
    const created = await call('POST', '/api-keys/', { name: 'reader', scope: 'read' });
    const res = await stack.app.inject({
      method: 'POST',
      url: '/do-not-contact/',
      headers: withKey(created.json().key),
      payload: { kind: 'email', value: 'x@y.example' },
    });
    expect(res.statusCode).toBe(403);
  });
});
