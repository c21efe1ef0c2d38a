/**
 * Where bearer tokens are verified from: AUTH_JWKS_URL (a real identity provider), else
 * AUTH_JWT_SECRET, else a development secret generated once and kept in the database, so the
 * service and the admin command line (which mints tokens) agree without any setup.
 */
import { randomBytes } from 'node:crypto';
import type { Sql } from '../db/sql.js';
import type { TokenConfig } from '../api/tokens.js';

export async function developmentSecret(sql: Sql): Promise<string> {
  const fresh = randomBytes(32).toString('base64url');
  await sql`insert into service_settings (key, value) values ('dev_jwt_secret', ${fresh}) on conflict (key) do nothing`;
  const [row] = await sql<{ value: string }[]>`select value from service_settings where key = 'dev_jwt_secret'`;
  return row!.value;
}

export async function resolveTokenConfig(sql: Sql, env = process.env): Promise<TokenConfig> {
  const issuer = env.AUTH_JWT_ISSUER || undefined;
  const audience = env.AUTH_JWT_AUDIENCE || undefined;
  if (env.AUTH_JWKS_URL) return { kind: 'jwks', url: env.AUTH_JWKS_URL, issuer, audience };
  return { kind: 'secret', secret: env.AUTH_JWT_SECRET || (await developmentSecret(sql)), issuer, audience };
}

/** The secret the admin command line signs with; null when tokens come from an identity provider. */
export async function signingSecret(sql: Sql, env = process.env): Promise<string | null> {
  const config = await resolveTokenConfig(sql, env);
  return config.kind === 'secret' ? config.secret : null;
}
