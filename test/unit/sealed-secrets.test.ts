import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  keyringOf,
  parseSealingKey,
  seal,
  sealedKeyId,
  SealedSecretError,
  unseal,
} from '../../integrations/secrets/sealed.js';
import { readIntegrationsConfig } from '../../integrations/config.js';

const token = 'ya29.a0AfB_byC-secret-access-token-value';
const ctx = 'cloud_drive_connections.access_token:6f1c2a9e-0000-4000-8000-000000000001';

function refusal(fn: () => unknown): SealedSecretError {
  try {
    fn();
  } catch (error) {
    if (error instanceof SealedSecretError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('sealed secrets (AES-256-GCM)', () => {
  const keyring = keyringOf(randomBytes(32));

  it('opens what it sealed, under the same context', () => {
    expect(unseal(keyring, seal(keyring, token, ctx), ctx)).toBe(token);
    expect(unseal(keyring, seal(keyring, '', ctx), ctx)).toBe('');
    const long = 'é'.repeat(10_000);
    expect(unseal(keyring, seal(keyring, long, ctx), ctx)).toBe(long);
  });

  it('stores neither the token nor its encoding, and a fresh IV each time', () => {
    const a = seal(keyring, token, ctx);
    const b = seal(keyring, token, ctx);
    expect(a).not.toBe(b);
    for (const sealed of [a, b]) {
      expect(sealed).not.toContain(token);
      expect(sealed).not.toContain(Buffer.from(token).toString('base64'));
      expect(sealed).not.toContain(Buffer.from(token).toString('base64url'));
      expect(sealed).not.toContain(Buffer.from(token).toString('hex'));
      const [version, keyId, iv, , tag] = sealed.split('.');
      expect(version).toBe('s1');
      expect(keyId).toBe(keyring.current.id);
      expect(Buffer.from(iv!, 'base64url')).toHaveLength(12);
      expect(Buffer.from(tag!, 'base64url')).toHaveLength(16);
    }
    expect(sealedKeyId(a)).toBe(keyring.current.id);
  });

  it('detects tampering with any part', () => {
    const sealed = seal(keyring, token, ctx);
    const parts = sealed.split('.');
    for (const at of [2, 3, 4]) {
      const bytes = Buffer.from(parts[at]!, 'base64url');
      bytes[0] = bytes[0]! ^ 0x01;
      const altered = parts.map((p, i) => (i === at ? bytes.toString('base64url') : p)).join('.');
      expect(refusal(() => unseal(keyring, altered, ctx)).reason).toBe(
        at === 2 && bytes.length !== 12 ? 'malformed' : 'tampered',
      );
    }
    expect(refusal(() => unseal(keyring, 'not sealed', ctx)).reason).toBe('malformed');
    expect(refusal(() => unseal(keyring, parts.slice(0, 4).join('.'), ctx)).reason).toBe('malformed');
  });

  it('refuses a value copied to another record (the context is authenticated)', () => {
    const sealed = seal(keyring, token, ctx);
    expect(refusal(() => unseal(keyring, sealed, ctx.replace('0001', '0002'))).reason).toBe('tampered');
  });

  it('refuses the wrong key, and opens old values under a previous key after rotation', () => {
    const old = keyringOf(randomBytes(32));
    const sealed = seal(old, token, ctx);
    const other = keyringOf(randomBytes(32));
    const unknown = refusal(() => unseal(other, sealed, ctx));
    expect(unknown.reason).toBe('unknown_key');
    expect(unknown.message).not.toContain(token);
    // A different key claiming the same id (forged prefix) still fails authentication.
    const forged = { current: { id: old.current.id, key: randomBytes(32) }, previous: [] };
    expect(refusal(() => unseal(forged, sealed, ctx)).reason).toBe('tampered');
    const rotated = keyringOf(randomBytes(32), [old.current.key]);
    expect(unseal(rotated, sealed, ctx)).toBe(token);
    expect(sealedKeyId(seal(rotated, token, ctx))).toBe(rotated.current.id);
  });

  it('takes its key from SECRETS_KEY as 32 bytes of base64, and refuses anything else by name', () => {
    const key = randomBytes(32);
    expect(parseSealingKey(key.toString('base64'), 'SECRETS_KEY').equals(key)).toBe(true);
    expect(parseSealingKey(key.toString('base64url'), 'SECRETS_KEY').equals(key)).toBe(true);
    expect(() => parseSealingKey(randomBytes(16).toString('base64'), 'SECRETS_KEY')).toThrow(
      /SECRETS_KEY must be 32 bytes/,
    );
    expect(() => parseSealingKey('not a key!', 'SECRETS_KEY')).toThrow(/SECRETS_KEY must be 32 bytes/);
    const config = readIntegrationsConfig({
      SECRETS_KEY: key.toString('base64'),
      SECRETS_KEY_PREVIOUS: randomBytes(32).toString('base64'),
    });
    expect(config.secretsKeys?.current.equals(key)).toBe(true);
    expect(config.secretsKeys?.previous).toHaveLength(1);
    expect(readIntegrationsConfig({}).secretsKeys).toBeNull();
    expect(() => readIntegrationsConfig({ SECRETS_KEY: 'c2hvcnQ=' })).toThrow(/SECRETS_KEY/);
  });

  it('names what the cloud drive still needs, and builds it from DRIVE_* otherwise', () => {
    expect(readIntegrationsConfig({}).cloudDrive).toEqual({
      missing: ['DRIVE_CLIENT_ID', 'DRIVE_REDIRECT_URL (or PUBLIC_BASE_URL)'],
    });
    const drive = readIntegrationsConfig({ DRIVE_CLIENT_ID: 'id', PUBLIC_BASE_URL: 'https://app.example/' }).cloudDrive;
    expect(drive).toMatchObject({
      clientId: 'id',
      redirectUrl: 'https://app.example/cloud-drive/callback/',
      tokenUrl: 'https://oauth2.googleapis.com/token',
    });
  });
});
