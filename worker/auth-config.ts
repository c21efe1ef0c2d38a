/**
 * Where bearer tokens are verified from: AUTH_JWKS_URL (a real identity provider), else
 * AUTH_JWT_SECRET, else a development secret generated once and kept in the database, so the
 * service and the admin command line (which mints tokens) agree without any setup.
 */
import type { Sql } from '../db/sql.js';
import { serviceSecret } from '../store/platform/service-secrets.js';
import type { TokenConfig } from '../services/platform/tokens.js';

export const developmentSecret = (sql: Sql) => serviceSecret(sql, 'dev_jwt_secret');

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
