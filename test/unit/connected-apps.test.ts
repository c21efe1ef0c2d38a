/** The pure rules of connected AI apps: redirects, PKCE S256, recognised apps, access by plan, which operations an app sees. */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  appOperations,
  checkRedirectUri,
  effectiveAccess,
  isClientMetadataUrl,
  parseKnownApps,
  pkceMatches,
  recognise,
  redirectMatches,
} from '../../domain/connected-apps/connected-apps.js';
import type { CatalogueOperation } from '../../domain/assistant/operations.js';

describe('redirect addresses', () => {
  it('takes https anywhere and http only to loopback, marking loopback local', () => {
    expect(checkRedirectUri('https://app.example/cb')).toEqual({ ok: true, host: 'app.example', isLocal: false });
    expect(checkRedirectUri('http://127.0.0.1:8080/cb')).toEqual({ ok: true, host: '127.0.0.1', isLocal: true });
    expect(checkRedirectUri('http://localhost/cb')).toMatchObject({ ok: true, isLocal: true });
    expect(checkRedirectUri('http://[::1]:9/cb')).toMatchObject({ ok: true, isLocal: true });
    for (const bad of [
      'http://app.example/cb',
      'https://app.example/cb#frag',
      'myapp://cb',
      'https://user:pw@app.example/cb',
      'not a url',
      'javascript:alert(1)',
    ]) {
      expect(checkRedirectUri(bad).ok, bad).toBe(false);
    }
  });

  it('matches exactly, except that a loopback redirect matches on any port', () => {
    expect(redirectMatches(['https://app.example/cb'], 'https://app.example/cb')).toBe(true);
    expect(redirectMatches(['https://app.example/cb'], 'https://app.example/cb2')).toBe(false);
    expect(redirectMatches(['https://app.example/cb'], 'https://app.example:444/cb')).toBe(false);
    expect(redirectMatches(['http://127.0.0.1/cb'], 'http://127.0.0.1:53111/cb')).toBe(true);
    expect(redirectMatches(['http://127.0.0.1/cb'], 'http://127.0.0.1:53111/other')).toBe(false);
    expect(redirectMatches(['http://127.0.0.1/cb'], 'http://localhost:53111/cb')).toBe(false);
  });

  it('knows a client metadata document address: https with a path', () => {
    expect(isClientMetadataUrl('https://app.example/client.json')).toBe(true);
    expect(isClientMetadataUrl('https://app.example/')).toBe(false);
    expect(isClientMetadataUrl('http://app.example/client.json')).toBe(false);
    expect(isClientMetadataUrl('http://127.0.0.1:9/client.json', true)).toBe(true);
    expect(isClientMetadataUrl('mcp_abc')).toBe(false);
  });
});

describe('PKCE S256', () => {
  const verifier = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  it('matches the right verifier only, and refuses verifiers outside 43 to 128 characters', () => {
    expect(challenge).toBe('E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM');
    expect(pkceMatches(verifier, challenge)).toBe(true);
    expect(pkceMatches(`${verifier}x`, challenge)).toBe(false);
    expect(pkceMatches(verifier, verifier)).toBe(false); // the plain method: the verifier as its own challenge
    const at = (n: number) => 'a'.repeat(n);
    const c = (v: string) => createHash('sha256').update(v).digest('base64url');
    expect(pkceMatches(at(42), c(at(42)))).toBe(false);
    expect(pkceMatches(at(43), c(at(43)))).toBe(true);
    expect(pkceMatches(at(128), c(at(128)))).toBe(true);
    expect(pkceMatches(at(129), c(at(129)))).toBe(false);
  });
});

describe('recognised apps', () => {
  const known = parseKnownApps('assistant_a=a.example;assistant_b=b.example,b2.example');
  it('recognises a metadata document on a known host whose redirects stay on it', () => {
    expect(known).toEqual({ assistant_a: ['a.example'], assistant_b: ['b.example', 'b2.example'] });
    const doc = (client_id: string, redirect_uris: string[]) =>
      recognise(known, { registration: 'metadata_document', client_id, redirect_uris });
    expect(doc('https://a.example/client.json', ['https://a.example/cb'])).toEqual({
      brand: 'assistant_a',
      recognised: true,
    });
    expect(doc('https://app.b2.example/client.json', ['https://app.b2.example/cb'])).toEqual({
      brand: 'assistant_b',
      recognised: true,
    });
    expect(doc('https://a.example/client.json', ['https://evil.example/cb'])).toEqual({
      brand: 'other',
      recognised: false,
    });
    expect(doc('https://nota.example/client.json', ['https://nota.example/cb'])).toEqual({
      brand: 'other',
      recognised: false,
    });
    expect(
      recognise(known, { registration: 'dynamic', client_id: 'mcp_x', redirect_uris: ['https://a.example/cb'] }),
    ).toEqual({ brand: 'other', recognised: false });
    expect(() => parseKnownApps('other=x.example')).toThrow(/assistant_a and assistant_b/);
    expect(parseKnownApps(undefined)).toEqual({});
  });
});

describe('access on each call', () => {
  it('reads as read unless the workspace is paid and write was chosen', () => {
    expect(effectiveAccess('write', 'paid')).toBe('write');
    expect(effectiveAccess('write', 'free')).toBe('read');
    expect(effectiveAccess('read', 'paid')).toBe('read');
  });

  it('offers reads to read grants, writes too to write grants, admin-only ones to an admin’s apps alone, and never its own consent or the assistant', () => {
    const op = (name: string, access: 'read' | 'write', tags: string[], adminOnly = false): CatalogueOperation => ({
      name,
      method: access === 'read' ? 'GET' : 'POST',
      path: `/${name}/`,
      summary: name,
      description: '',
      tags,
      access,
      admin_only: adminOnly || null,
      price_credits: null,
      input_schema: { type: 'object' },
    });
    const catalogue = [
      op('listTables', 'read', ['tables']),
      op('createTable', 'write', ['tables']),
      op('listConnectedApps', 'read', ['connected-apps']),
      op('readAssistantSettings', 'read', ['assistant']),
      op('createApiKey', 'write', ['platform'], true),
    ];
    expect(appOperations(catalogue, 'read', 'member').map((o) => o.name)).toEqual(['listTables']);
    expect(appOperations(catalogue, 'write', 'member').map((o) => o.name)).toEqual(['listTables', 'createTable']);
    expect(appOperations(catalogue, 'write', 'admin').map((o) => o.name)).toEqual([
      'listTables',
      'createTable',
      'createApiKey',
    ]);
  });
});
