/** Notifications in tests: the event dispatcher on the test stack, and a wait for what it delivers. */
import type { FastifyInstance } from 'fastify';
import { vi } from 'vitest';
import { signInboundEmail } from '../../domain/inbox/inbound-signature.js';
import { startEventDispatcher, type EventDispatcher } from '../../services/notifications/dispatcher.js';
import type { TestStack } from './test-stack.js';

/** The event dispatcher on the stack's Temporal and task queue (or `taskQueue`): polls every 200 ms, no digest. */
export function startTestDispatcher(stack: TestStack, taskQueue = stack.taskQueue): EventDispatcher {
  return startEventDispatcher({
    sql: stack.sql,
    client: stack.client,
    taskQueue,
    pollMs: 200,
    digest: false,
  });
}

/**
 * Waits (up to `ms`) until `read` answers something other than undefined or false, and answers it;
 * fails naming `what`.
 */
export function waitFor<T>(read: () => Promise<T | undefined> | T | undefined, what: string, ms = 20_000): Promise<T> {
  return vi.waitFor(
    async () => {
      const value = await read();
      if (value === undefined || value === false) throw new Error(`timed out waiting for ${what}`);
      return value;
    },
    { timeout: ms, interval: 50 },
  );
}

/** Posts `raw` (a message's lines joined with CRLF) to `workspaceId`'s inbound-email webhook, signed with `secret`. */
export function postInboundEmail(app: FastifyInstance, workspaceId: string, secret: string, raw: string) {
  const body = Buffer.from(raw);
  const timestamp = String(Math.floor(Date.now() / 1000));
  return app.inject({
    method: 'POST',
    url: '/inbox/inbound-email/',
    payload: body,
    headers: {
      'content-type': 'message/rfc822',
      'x-inbox-workspace': workspaceId,
      'x-inbox-timestamp': timestamp,
      'x-inbox-signature': signInboundEmail(secret, timestamp, body),
    },
  });
}
