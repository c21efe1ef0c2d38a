/**
 * A local twin of PayPal Payouts (the subset integrations/payouts/paypal.ts uses), with its error
 * shapes, for tests and the benchmark:
 *
 * - `POST /v1/oauth2/token`: HTTP Basic client id and secret (else 401 `invalid_client`), answers
 *   `{access_token, token_type: 'Bearer', expires_in}`. `expireTokens()` makes every issued token
 *   answer 401 `invalid_token`, as an expired or revoked one does.
 * - `POST /v1/payments/payouts`: 201 `{batch_header}`; a sender batch id seen before is 400
 *   `USER_BUSINESS_ERROR` whose detail links to the original batch; bad items (a receiver that is
 *   not an email, an amount that is not a positive two-decimal value, a currency other than USD)
 *   are 422 `UNPROCESSABLE_ENTITY` naming `items[i].<field>`, and nothing of the batch is created.
 * - `GET /v1/payments/payouts/{id}`: the header and items (paged), each with `transaction_status`.
 * - `throttle(n)`: the next n API calls answer 429 `RATE_LIMIT_REACHED` with Retry-After: 1.
 * - `loseNextCreateAnswer()`: the next batch is created but its answer is a 500, as a lost answer.
 *
 * Items start PENDING and settle after `processingMs` of the twin's clock to what `outcome(receiver)`
 * says (by default: `+unclaimed` in the address → UNCLAIMED, `+fail` → FAILED with
 * RECEIVER_ACCOUNT_LOCKED, `+onhold` → ONHOLD, `+blocked` → BLOCKED, else SUCCESS). An UNCLAIMED
 * item is RETURNED 30 days after it was created. The clock is the twin's own: `advance(ms)` and
 * `setNow(date)` move it.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { serveHttp } from './local-http.js';

export type TwinOutcome = 'SUCCESS' | 'UNCLAIMED' | 'FAILED' | 'ONHOLD' | 'BLOCKED';

interface TwinItem {
  payout_item_id: string;
  sender_item_id: string;
  receiver: string;
  value: string;
  currency: string;
  outcome: TwinOutcome;
  createdAt: number;
}

interface TwinBatch {
  payout_batch_id: string;
  sender_batch_id: string;
  createdAt: number;
  items: TwinItem[];
}

export interface PayPalTwinOptions {
  clientId?: string;
  clientSecret?: string;
  /** Twin-clock milliseconds before an item leaves PENDING (0: settled at once). */
  processingMs?: number;
  outcome?: (receiver: string) => TwinOutcome;
  /** The twin's clock at start (the real clock by default). */
  now?: Date;
  tokenSeconds?: number;
}

export const unclaimedReturnMs = 30 * 24 * 3600 * 1000;

export function defaultOutcome(receiver: string): TwinOutcome {
  if (receiver.includes('+unclaimed')) return 'UNCLAIMED';
  if (receiver.includes('+fail')) return 'FAILED';
  if (receiver.includes('+onhold')) return 'ONHOLD';
  if (receiver.includes('+blocked')) return 'BLOCKED';
  return 'SUCCESS';
}

export async function startPayPalPayoutsTwin(options: PayPalTwinOptions = {}) {
  const clientId = options.clientId ?? 'twin-client';
  const clientSecret = options.clientSecret ?? 'twin-secret';
  const outcome = options.outcome ?? defaultOutcome;
  let processingMs = options.processingMs ?? 0;
  let offset = options.now ? options.now.getTime() - Date.now() : 0;
  const now = () => Date.now() + offset;
  const tokens = new Set<string>();
  const batches = new Map<string, TwinBatch>();
  const bySender = new Map<string, string>();
  let throttled = 0;
  let loseNextAnswer = false;
  const counts = { token: 0, create: 0, read: 0, status401: 0, status429: 0, status422: 0, duplicate: 0 };
  let baseUrl = '';

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };
  const debugId = () => randomBytes(6).toString('hex');

  function itemStatus(item: TwinItem): string {
    const age = now() - item.createdAt;
    if (age < processingMs) return 'PENDING';
    if (item.outcome === 'UNCLAIMED' && age >= unclaimedReturnMs) return 'RETURNED';
    return item.outcome;
  }

  function batchStatus(batch: TwinBatch): string {
    return batch.items.some((i) => itemStatus(i) === 'PENDING') ? 'PROCESSING' : 'SUCCESS';
  }

  function header(batch: TwinBatch) {
    const total = batch.items.reduce((s, i) => s + Math.round(Number(i.value) * 100), 0);
    return {
      payout_batch_id: batch.payout_batch_id,
      batch_status: batchStatus(batch),
      time_created: new Date(batch.createdAt).toISOString(),
      sender_batch_header: { sender_batch_id: batch.sender_batch_id, recipient_type: 'EMAIL' },
      amount: { currency: 'USD', value: (total / 100).toFixed(2) },
    };
  }

  function authorised(req: IncomingMessage, res: ServerResponse): boolean {
    const auth = req.headers.authorization ?? '';
    const bearer = auth.startsWith('Bearer ') ? auth.slice(7) : '';
    if (!tokens.has(bearer)) {
      counts.status401++;
      send(res, 401, { error: 'invalid_token', error_description: 'Token signature verification failed' });
      return false;
    }
    if (throttled > 0) {
      throttled--;
      counts.status429++;
      send(
        res,
        429,
        {
          name: 'RATE_LIMIT_REACHED',
          message: 'Too many requests. Blocked due to rate limiting.',
          debug_id: debugId(),
        },
        { 'retry-after': '1' },
      );
      return false;
    }
    return true;
  }

  const http = await serveHttp((req, res, body) => {
    const url = new URL(req.url ?? '/', 'http://twin');
    if (req.method === 'POST' && url.pathname === '/v1/oauth2/token') {
      counts.token++;
      const auth = req.headers.authorization ?? '';
      const [id, secret] = Buffer.from(auth.replace(/^Basic /, ''), 'base64')
        .toString('utf8')
        .split(':');
      if (id !== clientId || secret !== clientSecret || !/grant_type=client_credentials/.test(body)) {
        return send(res, 401, { error: 'invalid_client', error_description: 'Client Authentication failed' });
      }
      const token = `A21AA${randomBytes(16).toString('hex')}`;
      tokens.add(token);
      return send(res, 200, {
        scope: 'https://uri.paypal.com/payments/payouts',
        access_token: token,
        token_type: 'Bearer',
        app_id: 'APP-TWIN',
        expires_in: options.tokenSeconds ?? 32400,
        nonce: debugId(),
      });
    }
    if (req.method === 'POST' && url.pathname === '/v1/payments/payouts') {
      if (!authorised(req, res)) return;
      counts.create++;
      let parsed: {
        sender_batch_header?: { sender_batch_id?: string };
        items?: Array<{ receiver?: string; amount?: { value?: string; currency?: string }; sender_item_id?: string }>;
      };
      try {
        parsed = JSON.parse(body) as typeof parsed;
      } catch {
        return send(res, 400, {
          name: 'MALFORMED_REQUEST',
          message: 'The request JSON is not well formed.',
          debug_id: debugId(),
        });
      }
      const senderBatchId = parsed.sender_batch_header?.sender_batch_id;
      const items = parsed.items ?? [];
      const details: Array<{ field: string; location: string; issue: string }> = [];
      if (!senderBatchId)
        details.push({
          field: 'sender_batch_header.sender_batch_id',
          location: 'body',
          issue: 'MISSING_REQUIRED_PARAMETER',
        });
      if (items.length === 0 || items.length > 15000)
        details.push({ field: 'items', location: 'body', issue: 'Between 1 and 15000 items are required.' });
      items.forEach((item, i) => {
        if (!item.receiver || !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(item.receiver))
          details.push({
            field: `items[${i}].receiver`,
            location: 'body',
            issue: 'Receiver is invalid or does not match with type',
          });
        if (!item.amount?.value || !/^\d+\.\d{2}$/.test(item.amount.value) || Number(item.amount.value) <= 0)
          details.push({
            field: `items[${i}].amount.value`,
            location: 'body',
            issue: 'Amount must be a positive value with two decimals',
          });
        if (item.amount?.currency !== 'USD')
          details.push({ field: `items[${i}].amount.currency`, location: 'body', issue: 'Currency code is invalid' });
      });
      if (details.length) {
        counts.status422++;
        return send(res, 422, {
          name: 'UNPROCESSABLE_ENTITY',
          message:
            'The requested action could not be performed, semantically incorrect, or failed business validation.',
          debug_id: debugId(),
          details,
        });
      }
      const existing = bySender.get(senderBatchId!);
      if (existing) {
        counts.duplicate++;
        return send(res, 400, {
          name: 'USER_BUSINESS_ERROR',
          message: 'User business error.',
          debug_id: debugId(),
          information_link: 'https://developer.paypal.com/docs/api/payments.payouts-batch/#errors',
          details: [
            {
              field: 'SENDER_BATCH_ID',
              location: 'body',
              issue: `Batch with given sender_batch_id already exists`,
              link: [
                {
                  href: `${baseUrl}/v1/payments/payouts/${existing}`,
                  rel: 'self',
                  method: 'GET',
                  encType: 'application/json',
                },
              ],
            },
          ],
          links: [],
        });
      }
      const batch: TwinBatch = {
        payout_batch_id: randomBytes(7).toString('hex').toUpperCase(),
        sender_batch_id: senderBatchId!,
        createdAt: now(),
        items: items.map((item) => ({
          payout_item_id: randomBytes(7).toString('hex').toUpperCase(),
          sender_item_id: item.sender_item_id ?? '',
          receiver: item.receiver!,
          value: item.amount!.value!,
          currency: item.amount!.currency!,
          outcome: outcome(item.receiver!),
          createdAt: now(),
        })),
      };
      batches.set(batch.payout_batch_id, batch);
      bySender.set(batch.sender_batch_id, batch.payout_batch_id);
      if (loseNextAnswer) {
        loseNextAnswer = false;
        return send(res, 500, {
          name: 'INTERNAL_SERVER_ERROR',
          message: 'An internal server error occurred.',
          debug_id: debugId(),
        });
      }
      return send(res, 201, {
        batch_header: { ...header(batch), batch_status: 'PENDING' },
        links: [{ href: `${baseUrl}/v1/payments/payouts/${batch.payout_batch_id}`, rel: 'self', method: 'GET' }],
      });
    }
    const get = url.pathname.match(/^\/v1\/payments\/payouts\/([^/]+)$/);
    if (req.method === 'GET' && get) {
      if (!authorised(req, res)) return;
      counts.read++;
      const batch = batches.get(decodeURIComponent(get[1]!));
      if (!batch)
        return send(res, 404, {
          name: 'RESOURCE_NOT_FOUND',
          message: 'The specified resource does not exist.',
          debug_id: debugId(),
        });
      const page = Math.max(1, Number(url.searchParams.get('page')) || 1);
      const size = Math.min(1000, Math.max(1, Number(url.searchParams.get('page_size')) || 1000));
      const slice = batch.items.slice((page - 1) * size, page * size);
      return send(res, 200, {
        batch_header: header(batch),
        items: slice.map((i) => ({
          payout_item_id: i.payout_item_id,
          transaction_status: itemStatus(i),
          payout_batch_id: batch.payout_batch_id,
          payout_item: {
            recipient_type: 'EMAIL',
            amount: { value: i.value, currency: i.currency },
            receiver: i.receiver,
            sender_item_id: i.sender_item_id,
            recipient_wallet: 'PAYPAL',
          },
          ...(itemStatus(i) === 'FAILED'
            ? { errors: { name: 'RECEIVER_ACCOUNT_LOCKED', message: 'Receiver account is locked or inactive' } }
            : {}),
          time_processed: new Date(i.createdAt).toISOString(),
        })),
        total_items: batch.items.length,
        total_pages: Math.max(1, Math.ceil(batch.items.length / size)),
      });
    }
    send(res, 404, {
      name: 'RESOURCE_NOT_FOUND',
      message: 'The specified resource does not exist.',
      debug_id: debugId(),
    });
  });
  baseUrl = http.url;

  return {
    url: http.url,
    clientId,
    clientSecret,
    requests: http.requests,
    counts,
    batches,
    now: () => new Date(now()),
    advance(ms: number) {
      offset += ms;
    },
    setNow(date: Date) {
      offset = date.getTime() - Date.now();
    },
    setProcessingMs(ms: number) {
      processingMs = ms;
    },
    expireTokens() {
      tokens.clear();
    },
    throttle(n: number) {
      throttled = n;
    },
    loseNextCreateAnswer() {
      loseNextAnswer = true;
    },
    /** Cents sent per receiver across every batch (an item counted once however often its batch was sent). */
    sentCentsByReceiver(): Map<string, number> {
      const sums = new Map<string, number>();
      for (const b of batches.values())
        for (const i of b.items) sums.set(i.receiver, (sums.get(i.receiver) ?? 0) + Math.round(Number(i.value) * 100));
      return sums;
    },
    /** Items per sender item id (our payout id): more than one means a payout was sent twice. */
    itemsBySenderItemId(): Map<string, number> {
      const n = new Map<string, number>();
      for (const b of batches.values())
        for (const i of b.items) n.set(i.sender_item_id, (n.get(i.sender_item_id) ?? 0) + 1);
      return n;
    },
    close: http.close,
  };
}

export type PayPalPayoutsTwin = Awaited<ReturnType<typeof startPayPalPayoutsTwin>>;
