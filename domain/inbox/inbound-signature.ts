/**
 * The inbound-email webhook's signature (operationId receiveInboundEmail): HMAC-SHA256 with the
 * workspace's webhook secret over `<timestamp>.<raw body>`, and the one refusal a missing, wrong or
 * stale signature gets, so a caller learns nothing about which part failed.
 */
import { createHmac } from 'node:crypto';
import { ApiError } from '../shared/errors.js';

/** Signs a body as the webhook expects (for senders and tests). */
export function signInboundEmail(secret: string, timestamp: string, body: Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex')}`;
}

export const inboundSignatureRefused = () =>
  new ApiError('unauthorized', 'Missing, invalid or stale webhook signature.');
