/**
 * Where bearer tokens are verified from: AUTH_JWKS_URL (a real identity provider), else
 * AUTH_JWT_SECRET, else a development secret generated once and kept in the database, so the
 * service and the admin command line (which mints tokens) agree without any setup.
 */
import type { Sql } from '../db/sql.js';
import { serviceSecret } from '../store/platform/service-secrets.js';
import type { TokenConfig } from '../services/platform/tokens.js';
import { readAuthSettings, type AuthSettings } from '../integrations/config.js';

export const developmentSecret = (sql: Sql) => serviceSecret(sql, 'dev_jwt_secret');

/** `auth` from the environment (integrations/config.ts) when omitted; `{}` for none of it (tests). */
export async function resolveTokenConfig(sql: Sql, auth: AuthSettings = readAuthSettings()): Promise<TokenConfig> {
  const settings = {
    issuer: auth.issuer,
    audience: auth.audience,
    claims: auth.claims,
    adminRoles: auth.adminRoles,
    policy: { provisionOnFirstUse: auth.provisionOnFirstUse ?? false },
  };
  if (auth.jwksUrl) return { kind: 'jwks', url: auth.jwksUrl, ...settings };
  return { kind: 'secret', secret: auth.jwtSecret || (await developmentSecret(sql)), ...settings };
}

/** The secret the admin command line signs with; null when tokens come from an identity provider. */
export async function signingSecret(sql: Sql, auth: AuthSettings = readAuthSettings()): Promise<string | null> {
  const config = await resolveTokenConfig(sql, auth);
  return config.kind === 'secret' ? config.secret : null;
}
