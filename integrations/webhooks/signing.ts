/**
 * Standard Webhooks signing (https://www.standardwebhooks.com): `webhook-id`, `webhook-timestamp`
 * (Unix seconds) and `webhook-signature`, a space-separated list of `v1,<base64>` where each is
 * HMAC-SHA256 over `<id>.<timestamp>.<body>` keyed by the secret's bytes (the base64 after
 * `whsec_`). During a rotation's overlap both secrets sign, so a receiver holding either verifies.
 */
import { createHmac, randomBytes } from 'node:crypto';

export const secretPrefix = 'whsec_';

/** A new secret: 24 random bytes, as Svix makes them. */
export function newWebhookSecret(): string {
  return `${secretPrefix}${randomBytes(24).toString('base64')}`;
}

export function signatureOf(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.startsWith(secretPrefix) ? secret.slice(secretPrefix.length) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

export function signedHeaders(secrets: string[], id: string, timestamp: number, body: string): Record<string, string> {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets.map((s) => signatureOf(s, id, timestamp, body)).join(' '),
  };
}
