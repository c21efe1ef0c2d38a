/**
 * TEMPORAL_PERSISTENCE=postgres: the setting, and the server configuration written for it. (The
 * server itself is built from source in about five minutes, too long for `npm test`; bench:pnet
 * runs it, see the README. Its build errors are covered in tools.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { readConfig } from '../../worker/config.js';
import { pickPorts, postgresTarget, serverConfig } from '../../worker/temporal-postgres.js';

describe('TEMPORAL_PERSISTENCE', () => {
  it('is the dev server on SQLite unless postgres is asked for, and refuses anything else', () => {
    expect(readConfig({}).temporalPersistence).toBe('sqlite');
    expect(readConfig({ TEMPORAL_PERSISTENCE: '' }).temporalPersistence).toBe('sqlite');
    expect(readConfig({ TEMPORAL_PERSISTENCE: 'postgres' }).temporalPersistence).toBe('postgres');
    expect(() => readConfig({ TEMPORAL_PERSISTENCE: 'mysql' })).toThrow(
      'TEMPORAL_PERSISTENCE must be sqlite or postgres, not "mysql".',
    );
  });
});

describe('the Temporal server configuration', () => {
  it("stores both its schemas in the stack's Postgres, with the URL's credentials decoded", () => {
    expect(postgresTarget('postgres://outreach:p%40ss%3Aword@127.0.0.1:5544/outreach')).toEqual({
      host: '127.0.0.1',
      port: 5544,
      user: 'outreach',
      password: 'p@ss:word',
    });
    expect(postgresTarget('postgres://me@db.internal/outreach').port).toBe(5432);
  });

  it('gives every service its own free port, away from the ports asked to avoid', async () => {
    const ports = await pickPorts(17233, [17233, 17243]);
    const all = Object.values(ports);
    expect(new Set(all).size).toBe(all.length);
    expect(all).not.toContain(17233);
    expect(all).not.toContain(17243);
    const config = JSON.parse(
      serverConfig({ host: '127.0.0.1', port: 5544, user: 'u', password: 'p' }, ports, '/data/dc.yaml'),
    );
    expect(config.services.frontend.rpc).toMatchObject({
      grpcPort: ports.frontend,
      httpPort: ports.frontendHttp,
      bindOnIP: '127.0.0.1',
    });
    expect(config.publicClient.hostPort).toBe(`127.0.0.1:${ports.frontend}`);
    expect(config.global.metrics.prometheus.listenAddress).toBe(`127.0.0.1:${ports.metrics}`);
    const stores = config.persistence.datastores;
    expect([
      stores[config.persistence.defaultStore].sql.databaseName,
      stores[config.persistence.visibilityStore].sql.databaseName,
    ]).toEqual(['temporal', 'temporal_visibility']);
    expect(stores.default.sql).toMatchObject({
      pluginName: 'postgres12',
      connectAddr: '127.0.0.1:5544',
      user: 'u',
      password: 'p',
    });
  });
});
