/**
 * One JSON request to an outside endpoint (the assistant's `call_endpoint`): http or https only,
 * through the page reader's address checks (no private or loopback address unless the reader is
 * allowed them), no redirect followed, a time limit, and the answer cut at a size. The caller
 * decides what a status means.
 */
import http from 'node:http';
import https from 'node:https';
import { EnrichmentError } from '../../domain/tables/enrichments.js';
import { checkLiteralAddress, guardedLookup, pageUrl } from './web-page.js';

export interface EndpointCallerConfig {
  allowPrivateNetworks?: boolean;
  timeoutSeconds?: number;
  maxBytes?: number;
}

export interface EndpointAnswer {
  status: number;
  /** The answer's text, at most `maxBytes`. */
  text: string;
}

export interface EndpointCaller {
  send(url: string, method: 'POST' | 'PUT', body: unknown): Promise<EndpointAnswer>;
}

export function endpointCaller(config: EndpointCallerConfig = {}): EndpointCaller {
  const timeoutSeconds = config.timeoutSeconds ?? 20;
  const maxBytes = config.maxBytes ?? 256 * 1024;
  const lookup = guardedLookup(config.allowPrivateNetworks === true);
  return {
    async send(address, method, body) {
      const url = pageUrl(address);
      checkLiteralAddress(url, config.allowPrivateNetworks === true);
      const payload = Buffer.from(JSON.stringify(body ?? {}));
      return new Promise((resolve, reject) => {
        const request = (url.protocol === 'https:' ? https : http).request(url, {
          method,
          lookup,
          signal: AbortSignal.timeout(timeoutSeconds * 1000),
          headers: {
            'content-type': 'application/json',
            'content-length': payload.length,
            'user-agent': 'OutreachWorkspaceAssistant/0.0',
            accept: 'application/json',
          },
        });
        request.on('error', (error: Error & { code?: string }) => {
          if (error instanceof EnrichmentError) return reject(error);
          if (error.name === 'AbortError' || error.name === 'TimeoutError')
            return reject(new EnrichmentError(`${url.host} did not answer within ${timeoutSeconds} seconds.`, true));
          reject(new EnrichmentError(`Could not reach ${url.host}: ${error.code ?? error.message}.`, true));
        });
        request.once('response', (response) => {
          const chunks: Buffer[] = [];
          let size = 0;
          response.on('data', (chunk: Buffer) => {
            if (size < maxBytes) chunks.push(chunk);
            size += chunk.length;
          });
          response.once('end', () =>
            resolve({
              status: response.statusCode ?? 0,
              text: Buffer.concat(chunks).subarray(0, maxBytes).toString('utf8'),
            }),
          );
          response.once('error', (error) =>
            reject(new EnrichmentError(`${url.host} broke off its answer: ${error.message}.`, true)),
          );
        });
        request.end(payload);
      });
    },
  };
}
