/**
 * The keyring third-party secrets are sealed with: SECRETS_KEY (and SECRETS_KEY_PREVIOUS) when
 * set, else a key generated once and kept in `service_settings`, as the development JWT secret is
 * (decision 029), so every process of a stack agrees without configuration. See decision 036.
 */
import type { Sql } from '../../db/sql.js';
import type { Integrations } from '../../integrations/config.js';
import { keyringOf, type Keyring } from '../../integrations/secrets/sealed.js';
import { serviceSecret } from '../../store/platform/service-secrets.js';

const configured = new WeakMap<object, Keyring>();

export async function secretsKeyring(sql: Sql, integrations: Pick<Integrations, 'secretsKeys'>): Promise<Keyring> {
  const keys = integrations.secretsKeys;
  if (keys) {
    let keyring = configured.get(keys);
    if (!keyring) configured.set(keys, (keyring = keyringOf(keys.current, keys.previous)));
    return keyring;
  }
  return keyringOf(Buffer.from(await serviceSecret(sql, 'secrets_key'), 'base64url'));
}
