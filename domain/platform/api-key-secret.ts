/**
 * API key secrets: `owk_` + 32 base62 characters of randomness (190 bits) + a 6-character base62
 * CRC32 of them. The typed prefix lets secret scanners match a leaked key and the checksum lets
 * them (and us, before any database read) reject a near-miss. Only the SHA-256 is stored.
 */
import { createHash, randomInt } from 'node:crypto';
import { crc32 } from 'node:zlib';

export const keyTypePrefix = 'owk_';
const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const bodyLength = 32;
const checksumLength = 6;
/** How much of the key `key_prefix` shows: the type and the first 8 random characters. */
const displayedLength = keyTypePrefix.length + 8;

function base62(value: number, width: number): string {
  let out = '';
  for (let n = value; out.length < width; n = Math.floor(n / 62)) out = alphabet[n % 62] + out;
  return out;
}

function checksum(body: string): string {
  return base62(crc32(body), checksumLength);
}

export function generateApiKeySecret(): string {
  let body = '';
  for (let i = 0; i < bodyLength; i += 1) body += alphabet[randomInt(62)];
  return `${keyTypePrefix}${body}${checksum(body)}`;
}

/** True when the value has our shape and its checksum matches, without touching the database. */
export function isWellFormedApiKey(value: string): boolean {
  if (value.length !== keyTypePrefix.length + bodyLength + checksumLength || !value.startsWith(keyTypePrefix))
    return false;
  const body = value.slice(keyTypePrefix.length, keyTypePrefix.length + bodyLength);
  if (![...body].every((c) => alphabet.includes(c))) return false;
  return value.slice(-checksumLength) === checksum(body);
}

export function hashApiKey(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

export function displayedPrefix(value: string): string {
  return value.slice(0, displayedLength);
}
