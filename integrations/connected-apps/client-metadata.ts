/**
 * Reads an OAuth Client ID Metadata Document: the JSON a client serves at its own client_id URL.
 * One GET through the page reader's address checks (no private or loopback address unless the
 * reader is allowed them), no redirect followed, 5 seconds, at most 64 KiB. http is read only when
 * private networks are allowed (development); otherwise the address must be https.
 */
import http from 'node:http';
import https from 'node:https';
import { checkLiteralAddress, guardedLookup } from '../web/web-page.js';

export interface ClientMetadataReader {
  /** The document, or a sentence saying why it could not be read. */
  read(url: string): Promise<{ document: Record<string, unknown>; maxAgeSeconds: number | null } | { error: string }>;
  /** Whether http (not only https) addresses may be read: development only. */
  readonly allowHttp: boolean;
}

const maxBytes = 64 * 1024;

export function clientMetadataReader(
  config: { allowPrivateNetworks?: boolean; timeoutSeconds?: number } = {},
): ClientMetadataReader {
  const allowPrivate = config.allowPrivateNetworks === true;
  const timeoutSeconds = config.timeoutSeconds ?? 5;
  const lookup = guardedLookup(allowPrivate);
  return {
    allowHttp: allowPrivate,
    read(address) {
      const url = new URL(address);
      try {
        checkLiteralAddress(url, allowPrivate);
      } catch (error) {
        return Promise.resolve({ error: (error as Error).message });
      }
      return new Promise((resolve) => {
        const request = (url.protocol === 'https:' ? https : http).get(url, {
          lookup,
          signal: AbortSignal.timeout(timeoutSeconds * 1000),
          headers: { accept: 'application/json', 'user-agent': 'OutreachWorkspaceService/0.0 (client metadata)' },
        });
        request.on('error', (error: Error & { code?: string }) => {
          const timedOut = error.name === 'AbortError' || error.name === 'TimeoutError';
          resolve({
            error: timedOut
              ? `${url.host} did not answer within ${timeoutSeconds} seconds`
              : `could not reach ${url.host}: ${error.code ?? error.message}`,
          });
        });
        request.once('response', (response) => {
          if (response.statusCode !== 200) {
            response.resume();
            return resolve({
              error: `${url.host} answered ${response.statusCode ?? 0} for the client metadata document`,
            });
          }
          const chunks: Buffer[] = [];
          let size = 0;
          response.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > maxBytes) {
              request.destroy();
              resolve({ error: `the client metadata document is larger than ${maxBytes} bytes` });
            } else chunks.push(chunk);
          });
          response.once('end', () => {
            if (size > maxBytes) return;
            let document: unknown;
            try {
              document = JSON.parse(Buffer.concat(chunks).toString('utf8'));
            } catch {
              return resolve({ error: 'the client metadata document is not JSON' });
            }
            if (typeof document !== 'object' || document === null || Array.isArray(document))
              return resolve({ error: 'the client metadata document is not a JSON object' });
            const maxAge = /max-age=(\d+)/.exec(String(response.headers['cache-control'] ?? ''))?.[1];
            resolve({ document: document as Record<string, unknown>, maxAgeSeconds: maxAge ? Number(maxAge) : null });
          });
        });
      });
    },
  };
}
