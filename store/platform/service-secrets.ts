/**
 * Secrets the service generates for itself once and keeps in the database, so every API process,
 * the worker and the admin command line agree on them without configuration.
 */
import { randomBytes } from 'node:crypto';
import type { Sql } from '../../db/sql.js';

const cache = new WeakMap<Sql, Map<string, Promise<string>>>();

async function readOrCreate(sql: Sql, key: string): Promise<string> {
  const fresh = randomBytes(32).toString('base64url');
  await sql`insert into service_settings (key, value) values (${key}, ${fresh}) on conflict (key) do nothing`;
  const [row] = await sql<{ value: string }[]>`select value from service_settings where key = ${key}`;
  return row!.value;
}

export function serviceSecret(
  sql: Sql,
  key: 'dev_jwt_secret' | 'connection_token_secret' | 'secrets_key',
): Promise<string> {
  let perSql = cache.get(sql);
  if (!perSql) cache.set(sql, (perSql = new Map<string, Promise<string>>()));
  let secret = perSql.get(key);
  if (!secret) {
    secret = readOrCreate(sql, key);
    secret.catch(() => perSql.delete(key)); // a failed read is retried next time
    perSql.set(key, secret);
  }
  return secret;
}
