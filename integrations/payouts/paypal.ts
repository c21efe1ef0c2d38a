/**
 * PayPal Payouts (REST `payments.payouts-batch` v1), the subset affiliate payouts use:
 *
 * - `POST /v1/oauth2/token` (client credentials, HTTP Basic with the client id and secret): a bearer
 *   token kept until shortly before `expires_in`; a 401 on any call drops it and fetches a new one once.
 * - `POST /v1/payments/payouts` with `sender_batch_header.sender_batch_id`: PayPal pays a sender batch
 *   id once in 30 days. A repeated id is refused (400 `USER_BUSINESS_ERROR`, the detail naming the
 *   sender batch id with a link to the original batch); the client then reads that batch, so a
 *   retried send returns what the first one created.
 * - `GET /v1/payments/payouts/{payout_batch_id}?page=&page_size=&total_required=true`: the batch and
 *   its items' `transaction_status` (SUCCESS, FAILED, PENDING, UNCLAIMED, RETURNED, ONHOLD, BLOCKED,
 *   REFUNDED, REVERSED), read page by page.
 * - 429 (`RATE_LIMIT_REACHED`) is waited out (Retry-After, else 1, 2, 4 s) a few times; 422
 *   `UNPROCESSABLE_ENTITY` and 400 `VALIDATION_ERROR` become a PayoutValidationError naming the items.
 *
 * Docs followed: developer.paypal.com/api/payments.payouts-batch/v1 (payouts-post, payouts-get,
 * sender_batch_header, transaction_enum), /api/rest (client-credentials token), and
 * /payouts/use-payouts/cancel-reverse-payouts ("Unclaimed payouts expire in 30 days").
 */
import {
  PayoutProviderError,
  PayoutValidationError,
  type PayoutBatchResult,
  type PayoutItemRequest,
  type PayoutProvider,
} from './provider.js';

export interface PayPalConfig {
  clientId: string;
  clientSecret: string;
  /** https://api-m.paypal.com (live), https://api-m.sandbox.paypal.com, or a local twin. */
  apiBase: string;
}

export interface PayPalClientOptions {
  /** How the client waits out a 429 (tests pass a recorder). */
  sleep?: (ms: number) => Promise<void>;
  /** Attempts per call when answered 429 (4). */
  maxAttempts?: number;
  fetch?: typeof fetch;
  /** How long one request may take before it counts as unreachable (30 s): a hung connection never holds a cycle's attempt. */
  requestTimeoutMs?: number;
}

const pageSize = 1000;

function centsToValue(cents: number): string {
  const sign = cents < 0 ? '-' : '';
  const abs = Math.abs(cents);
  return `${sign}${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, '0')}`;
}

interface PayPalErrorBody {
  name?: string;
  message?: string;
  error?: string;
  error_description?: string;
  details?: Array<{
    field?: string;
    issue?: string;
    description?: string;
    links?: Array<{ href?: string; rel?: string }>;
    link?: Array<{ href?: string; rel?: string }>;
  }>;
  links?: Array<{ href?: string; rel?: string }>;
}

interface BatchBody {
  batch_header?: {
    payout_batch_id?: string;
    batch_status?: string;
    sender_batch_header?: { sender_batch_id?: string };
  };
  items?: Array<{
    payout_item_id?: string;
    transaction_status?: string;
    payout_item?: { sender_item_id?: string };
    errors?: { name?: string };
  }>;
  total_pages?: number;
}

/** `items[3].receiver`, `/items/3/receiver` or `items/3/amount/value`: the item index, else null. */
export function itemIndexOf(field: string | undefined): number | null {
  const m = field?.match(/items(?:\[|\/)(\d+)/);
  return m ? Number(m[1]) : null;
}

export function createPayPalPayouts(config: PayPalConfig, options: PayPalClientOptions = {}): PayoutProvider {
  const base = config.apiBase.replace(/\/+$/, '');
  const doFetch = options.fetch ?? fetch;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const maxAttempts = options.maxAttempts ?? 4;
  const requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  const send = async (url: string, init: RequestInit): Promise<Response> => {
    try {
      return await doFetch(url, { ...init, signal: AbortSignal.timeout(requestTimeoutMs) });
    } catch (error) {
      throw new PayoutProviderError(`PayPal could not be reached: ${(error as Error).message}`, null);
    }
  };
  let token: { value: string; until: number } | null = null;

  async function accessToken(): Promise<string> {
    if (token && token.until > Date.now()) return token.value;
    const res = await send(`${base}/v1/oauth2/token`, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${config.clientId}:${config.clientSecret}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
        accept: 'application/json',
      },
      body: 'grant_type=client_credentials',
    });
    const body = (await res.json().catch(() => ({}))) as {
      access_token?: string;
      expires_in?: number;
      error_description?: string;
    };
    if (!res.ok || !body.access_token) {
      throw new PayoutProviderError(
        `PayPal refused the client credentials (${res.status}${body.error_description ? `: ${body.error_description}` : ''}).`,
        res.status,
      );
    }
    token = { value: body.access_token, until: Date.now() + Math.max(0, (body.expires_in ?? 300) - 60) * 1000 };
    return token.value;
  }

  /** One call: a 401 refreshes the token once, a 429 is waited out up to maxAttempts. */
  async function call(
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
  ): Promise<{ status: number; json: unknown }> {
    let refreshed = false;
    for (let attempt = 1; ; attempt++) {
      const bearer = await accessToken();
      const res = await send(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', accept: 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const json: unknown = await res.json().catch(() => null);
      if (res.status === 401 && !refreshed) {
        token = null;
        refreshed = true;
        continue;
      }
      if (res.status === 429 && attempt < maxAttempts) {
        const retryAfter = Number(res.headers.get('retry-after'));
        await sleep(
          Number.isFinite(retryAfter) && retryAfter > 0 ? Math.min(retryAfter, 60) * 1000 : 1000 * 2 ** (attempt - 1),
        );
        continue;
      }
      return { status: res.status, json };
    }
  }

  function failure(status: number, json: unknown, what: string): never {
    const e = (json ?? {}) as PayPalErrorBody;
    const name = e.name ?? e.error ?? 'error';
    const message = e.message ?? e.error_description ?? '';
    if (status === 422 || (status === 400 && name === 'VALIDATION_ERROR')) {
      const issues = new Map<number, string>();
      for (const d of e.details ?? []) {
        const index = itemIndexOf(d.field);
        if (index !== null) issues.set(index, `${d.field}: ${d.issue ?? d.description ?? 'invalid'}`);
      }
      throw new PayoutValidationError(
        `PayPal refused the ${what} (${status} ${name}${message ? `: ${message}` : ''}).`,
        issues,
      );
    }
    throw new PayoutProviderError(
      `PayPal answered ${status} ${name} to the ${what}${message ? `: ${message}` : ''}.`,
      status,
    );
  }

  function parseBatch(json: unknown, items: BatchBody['items']): PayoutBatchResult {
    const b = (json ?? {}) as BatchBody;
    const header = b.batch_header;
    if (!header?.payout_batch_id)
      throw new PayoutProviderError('PayPal answered a batch without a payout_batch_id.', null);
    return {
      providerBatchId: header.payout_batch_id,
      senderBatchId: header.sender_batch_header?.sender_batch_id ?? '',
      batchStatus: header.batch_status ?? 'PENDING',
      items: (items ?? []).map((i) => ({
        senderItemId: i.payout_item?.sender_item_id ?? '',
        providerItemId: i.payout_item_id ?? '',
        status: i.transaction_status ?? 'PENDING',
        errorName: i.errors?.name ?? null,
      })),
    };
  }

  async function getBatch(providerBatchId: string): Promise<PayoutBatchResult> {
    const items: NonNullable<BatchBody['items']> = [];
    let first: unknown = null;
    for (let page = 1; ; page++) {
      const { status, json } = await call(
        'GET',
        `/v1/payments/payouts/${encodeURIComponent(providerBatchId)}?page=${page}&page_size=${pageSize}&total_required=true`,
      );
      if (status !== 200) failure(status, json, 'batch read');
      first ??= json;
      const body = json as BatchBody;
      items.push(...(body.items ?? []));
      if (!body.total_pages || page >= body.total_pages || (body.items ?? []).length === 0) break;
    }
    return parseBatch(first, items);
  }

  return {
    name: 'paypal',
    getBatch,
    async createBatch(input: {
      senderBatchId: string;
      emailSubject: string;
      items: PayoutItemRequest[];
    }): Promise<PayoutBatchResult> {
      const { status, json } = await call('POST', '/v1/payments/payouts', {
        sender_batch_header: {
          sender_batch_id: input.senderBatchId,
          email_subject: input.emailSubject,
          recipient_type: 'EMAIL',
        },
        items: input.items.map((i) => ({
          recipient_type: 'EMAIL',
          amount: { value: centsToValue(i.amountCents), currency: i.currency },
          receiver: i.receiverEmail,
          note: i.note,
          sender_item_id: i.senderItemId,
          recipient_wallet: 'PAYPAL',
        })),
      });
      if (status === 201 || status === 200) {
        const created = parseBatch(json, []);
        return getBatch(created.providerBatchId);
      }
      const e = (json ?? {}) as PayPalErrorBody;
      if (status === 400 && e.name === 'USER_BUSINESS_ERROR') {
        // A sender batch id used before: the detail links to the original batch, which is the answer.
        const links = (e.details ?? []).flatMap((d) => [...(d.links ?? []), ...(d.link ?? [])]).concat(e.links ?? []);
        const href = links.map((l) => l.href ?? '').find((h) => /\/v1\/payments\/payouts\/[^/?]+/.test(h));
        const duplicate = (e.details ?? []).some((d) => /sender_batch_id/i.test(`${d.field ?? ''} ${d.issue ?? ''}`));
        if (duplicate && href)
          return getBatch(decodeURIComponent(href.match(/\/v1\/payments\/payouts\/([^/?]+)/)![1]!));
      }
      failure(status, json, 'payout batch');
    },
  };
}
