/**
 * One signed POST of a webhook message: http or https only, the page reader's address checks on
 * the URL and on every redirect (guardedLookup on the address actually connected to, and literal
 * IPs checked before connecting), redirects followed by hand (at most 3, each POSTed again and
 * signed the same), a 15-second limit, and the first 1,000 characters of the answer kept. The
 * same checks judge an endpoint's URL when it is registered or changed (`refusal`). Private addresses are allowed only when the operator says so (WEBHOOKS_ALLOW_PRIVATE_NETWORKS,
 * for local twins in development and tests).
 */
import http from 'node:http';
import https from 'node:https';
import { EnrichmentError } from '../../domain/tables/enrichments.js';
import { checkLiteralAddress, guardedLookup, pageUrl } from '../web/web-page.js';
import { deliveryTimeoutSeconds, maxRedirects, responseExcerptChars } from '../../domain/notifications/webhooks.js';

export interface WebhookSenderConfig {
  allowPrivateNetworks?: boolean;
  timeoutSeconds?: number;
}

export type WebhookPostResult =
  | { kind: 'answered'; status: number; excerpt: string; durationMs: number; retryAfterSeconds?: number }
  | { kind: 'timeout'; durationMs: number; error: string }
  | { kind: 'refused'; durationMs: number; error: string }
  | { kind: 'unreachable'; durationMs: number; error: string };

export interface WebhookSender {
  post(url: string, body: string, headers: Record<string, string>): Promise<WebhookPostResult>;
  /**
   * Why a URL cannot be an endpoint, under the same address checks and setting as `post`: an
   * address (in any numeric form) or a name resolving now to a private network. Undefined when it
   * may be one; a name that does not resolve yet is let through, to be judged at each delivery.
   */
  refusal(url: string): Promise<string | undefined>;
}

/** How long a registration waits for a name's addresses before leaving it to delivery. */
const registrationLookupMs = 3000;

const agents = {
  http: new http.Agent({ keepAlive: true, maxSockets: 64 }),
  https: new https.Agent({ keepAlive: true, maxSockets: 64 }),
};

export function webhookSender(config: WebhookSenderConfig = {}): WebhookSender {
  const allowPrivate = config.allowPrivateNetworks === true;
  const timeoutSeconds = config.timeoutSeconds ?? deliveryTimeoutSeconds;
  const lookup = guardedLookup(allowPrivate);

  function once(url: URL, body: Buffer, headers: Record<string, string>, signal: AbortSignal) {
    return new Promise<{
      status: number;
      location: string | undefined;
      excerpt: string;
      retryAfter: string | undefined;
    }>((resolve, reject) => {
      const secure = url.protocol === 'https:';
      const request = (secure ? https : http).request(url, {
        method: 'POST',
        lookup,
        signal,
        agent: secure ? agents.https : agents.http,
        headers: {
          ...headers,
          'content-type': 'application/json',
          'content-length': body.length,
          'user-agent': 'OutreachWorkspaceWebhooks/1.0',
        },
      });
      request.once('error', reject);
      request.once('response', (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          if (size < responseExcerptChars * 4) chunks.push(chunk);
          size += chunk.length;
        });
        response.once('error', reject);
        response.once('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            location: response.headers.location,
            excerpt: Buffer.concat(chunks).toString('utf8').slice(0, responseExcerptChars),
            retryAfter: response.headers['retry-after'],
          }),
        );
      });
      request.end(body);
    });
  }

  const publicOnly = (message: string) =>
    message.replace('the page reader reads public pages only', 'webhooks are sent to public addresses only');

  return {
    async refusal(address) {
      let url: URL;
      try {
        url = pageUrl(address);
        checkLiteralAddress(url, allowPrivate);
      } catch (error) {
        return publicOnly((error as Error).message);
      }
      if (allowPrivate) return undefined;
      const looked = new Promise<string | undefined>((resolve) =>
        lookup(url.hostname, { all: true }, (error) =>
          resolve(error instanceof EnrichmentError ? publicOnly(error.message) : undefined),
        ),
      );
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), registrationLookupMs);
      });
      try {
        return await Promise.race([looked, late]);
      } finally {
        clearTimeout(timer);
      }
    },

    async post(address, bodyText, headers) {
      const started = Date.now();
      const took = () => Date.now() - started;
      const body = Buffer.from(bodyText);
      const signal = AbortSignal.timeout(timeoutSeconds * 1000);
      let url: URL;
      try {
        url = pageUrl(address);
      } catch (error) {
        return { kind: 'refused', durationMs: took(), error: (error as Error).message };
      }
      for (let redirects = 0; ; redirects += 1) {
        try {
          checkLiteralAddress(url, allowPrivate);
          const answer = await once(url, body, headers, signal);
          if (answer.status >= 300 && answer.status < 400 && answer.location) {
            if (redirects >= maxRedirects)
              return {
                kind: 'answered',
                status: answer.status,
                excerpt: `More than ${maxRedirects} redirects.`,
                durationMs: took(),
              };
            url = pageUrl(new URL(answer.location, url).toString());
            continue;
          }
          const retryAfter =
            answer.retryAfter !== undefined && /^\d+$/.test(answer.retryAfter) ? Number(answer.retryAfter) : undefined;
          return {
            kind: 'answered',
            status: answer.status,
            excerpt: answer.excerpt,
            durationMs: took(),
            ...(retryAfter !== undefined ? { retryAfterSeconds: retryAfter } : {}),
          };
        } catch (error) {
          const e = error as Error & { code?: string };
          if (e instanceof EnrichmentError)
            return { kind: 'refused', durationMs: took(), error: publicOnly(e.message) };
          if (e.name === 'AbortError' || e.name === 'TimeoutError')
            return {
              kind: 'timeout',
              durationMs: took(),
              error: `${url.host} did not answer within ${timeoutSeconds} seconds.`,
            };
          return {
            kind: 'unreachable',
            durationMs: took(),
            error: `Could not reach ${url.host}: ${e.code ?? e.message}.`,
          };
        }
      }
    },
  };
}
