/**
 * Encryption at rest for every third-party secret the service stores (a drive account's OAuth
 * tokens, and whatever follows): AES-256-GCM, a fresh random 12-byte IV per value, and the id of
 * the key in front, so a new key can take over while values sealed under the old one still open.
 *
 * A sealed value is `s1.<key id>.<iv>.<ciphertext>.<tag>` (base64url parts). The key id is the first
 * 8 bytes of the key's SHA-256, in hex: it names a key without revealing it, and needs no setting.
 * Every value is sealed for a `context` (authenticated, not stored: the table, the column and the
 * row's owner), so a sealed value copied into another row or workspace does not open there.
 *
 * The keys come from integrations/config.ts (SECRETS_KEY, SECRETS_KEY_PREVIOUS) or, on the embedded
 * stack, from the one generated and kept in the database (services/platform/sealing.ts).
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

export interface SealingKey {
  /** 16 hex digits: the first 8 bytes of SHA-256 of the key. */
  id: string;
  key: Buffer;
}

/** `current` seals; every key opens what was sealed under it (`previous` are old keys, for rotation). */
export interface Keyring {
  current: SealingKey;
  previous: readonly SealingKey[];
}

/** Why a sealed value did not open. Its message never contains the value. */
export class SealedSecretError extends Error {
  override name = 'SealedSecretError';
  constructor(
    readonly reason: 'malformed' | 'unknown_key' | 'tampered',
    message: string,
  ) {
    super(message);
  }
}

const version = 's1';
const ivBytes = 12;
const tagBytes = 16;

export function sealingKey(key: Buffer): SealingKey {
  if (key.length !== 32) throw new Error(`A sealing key is 32 bytes, not ${key.length}.`);
  return { id: createHash('sha256').update(key).digest('hex').slice(0, 16), key: Buffer.from(key) };
}

/** A key given as base64 (or base64url) text: exactly 32 bytes, or an error naming `variable`. */
export function parseSealingKey(text: string, variable: string): Buffer {
  const trimmed = text.trim();
  const bytes = /^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)
    ? Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64')
    : Buffer.alloc(0);
  if (bytes.length !== 32) {
    throw new Error(
      `${variable} must be 32 bytes in base64 (for example the output of \`openssl rand -base64 32\`); the value given decodes to ${bytes.length} bytes.`,
    );
  }
  return bytes;
}

export function keyringOf(current: Buffer, previous: readonly Buffer[] = []): Keyring {
  const currentKey = sealingKey(current);
  return { current: currentKey, previous: previous.map(sealingKey).filter((k) => k.id !== currentKey.id) };
}

const b64 = (b: Buffer) => b.toString('base64url');

export function seal(keyring: Keyring, plaintext: string, context: string): string {
  const iv = randomBytes(ivBytes);
  const cipher = createCipheriv('aes-256-gcm', keyring.current.key, iv, { authTagLength: tagBytes });
  cipher.setAAD(Buffer.from(context, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return [version, keyring.current.id, b64(iv), b64(ciphertext), b64(cipher.getAuthTag())].join('.');
}

/** The key id a sealed value names (to find values still under an old key), or null when malformed. */
export function sealedKeyId(sealed: string): string | null {
  const parts = sealed.split('.');
  return parts.length === 5 && parts[0] === version ? parts[1]! : null;
}

export function unseal(keyring: Keyring, sealed: string, context: string): string {
  const parts = sealed.split('.');
  if (parts.length !== 5 || parts[0] !== version)
    throw new SealedSecretError('malformed', 'The stored secret is not a sealed value.');
  const [, keyId, ivText, ciphertextText, tagText] = parts as [string, string, string, string, string];
  const key = [keyring.current, ...keyring.previous].find((k) => k.id === keyId);
  if (!key) {
    throw new SealedSecretError(
      'unknown_key',
      `The stored secret was sealed under key ${keyId}, which this service does not have (set it in SECRETS_KEY_PREVIOUS).`,
    );
  }
  const iv = Buffer.from(ivText, 'base64url');
  const tag = Buffer.from(tagText, 'base64url');
  if (iv.length !== ivBytes || tag.length !== tagBytes)
    throw new SealedSecretError('malformed', 'The stored secret is not a sealed value.');
  try {
    const decipher = createDecipheriv('aes-256-gcm', key.key, iv, { authTagLength: tagBytes });
    decipher.setAAD(Buffer.from(context, 'utf8'));
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(Buffer.from(ciphertextText, 'base64url')), decipher.final()]).toString(
      'utf8',
    );
  } catch {
    throw new SealedSecretError(
      'tampered',
      'The stored secret does not open under its key: it was altered, or belongs to another record.',
    );
  }
}
