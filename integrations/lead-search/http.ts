/**
 * One JSON request to a data source (a lead-search provider, a CRM, a CT log), with a time limit
 * and a bounded answer, its failure sorted into what the caller does next: wait as told
 * (`rate_limited`, with Retry-After), try again later (`unavailable`: a timeout, a network error,
 * a 5xx), ask a person (`unauthorized`), or give up on this request (`refused`).
 */
export type SourceFailureReason = 'rate_limited' | 'unavailable' | 'unauthorized' | 'refused';

export class SourceFailure extends Error {
  override name = 'SourceFailure';
  constructor(
    readonly reason: SourceFailureReason,
    message: string,
    /** For `rate_limited`: the wait the source asked for (Retry-After), in seconds; null when it did not say. */
    readonly retryAfterSeconds: number | null = null,
    readonly status: number | null = null,
  ) {
    super(message);
  }
  get retryable(): boolean {
    return this.reason === 'rate_limited' || this.reason === 'unavailable';
  }
}

export interface JsonAnswer {
  status: number;
  headers: Headers;
  body: unknown;
}

/** Retry-After as seconds: a number of seconds or an HTTP date; null when absent or unreadable. */
export function retryAfterSeconds(value: string | null, now = Date.now()): number | null {
  if (!value) return null;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Math.max(0, Math.ceil(Number(value)));
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - now) / 1000));
}

const answerBytesMax = 32 * 1024 * 1024;

/**
 * Sends the request; answers 2xx (and the statuses in `accept`, such as 207) with the JSON body.
 * `who` names the source in messages. Never puts a header value (a key, a token) in a message.
 */
export async function requestJson(
  url: string,
  options: {
    method?: string;
    headers?: Record<string, string>;
    body?: unknown;
    timeoutMs: number;
    who: string;
    accept?: number[];
    signal?: AbortSignal;
  },
): Promise<JsonAnswer> {
  let response: Response;
  const signals = [AbortSignal.timeout(options.timeoutMs), ...(options.signal ? [options.signal] : [])];
  try {
    response = await fetch(url, {
      method: options.method ?? (options.body === undefined ? 'GET' : 'POST'),
      headers: {
        accept: 'application/json',
        ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
        ...options.headers,
      },
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      signal: AbortSignal.any(signals),
      redirect: 'error',
    });
  } catch (error) {
    const name = (error as Error).name;
    if (name === 'TimeoutError' || name === 'AbortError')
      throw new SourceFailure(
        'unavailable',
        `${options.who} did not answer within ${Math.round(options.timeoutMs / 1000)} seconds.`,
      );
    throw new SourceFailure('unavailable', `${options.who} could not be reached: ${(error as Error).message}`);
  }
  let text: string;
  try {
    text = await response.text();
  } catch (error) {
    throw new SourceFailure(
      'unavailable',
      `${options.who} broke off its answer: ${(error as Error).message}`,
      null,
      response.status,
    );
  }
  if (text.length > answerBytesMax)
    throw new SourceFailure(
      'refused',
      `${options.who} answered more than ${answerBytesMax} bytes.`,
      null,
      response.status,
    );
  const status = response.status;
  const parse = (): unknown => {
    if (text.trim() === '') return null;
    try {
      return JSON.parse(text);
    } catch {
      throw new SourceFailure(
        status >= 500 ? 'unavailable' : 'refused',
        `${options.who} answered ${status} with something that is not JSON.`,
        null,
        status,
      );
    }
  };
  const message = () => {
    try {
      const body = JSON.parse(text) as { message?: unknown; error?: unknown; detail?: unknown };
      const said = body.message ?? body.error ?? body.detail;
      if (typeof said === 'string') return said.slice(0, 300);
    } catch {
      // not JSON
    }
    return text.slice(0, 300);
  };
  if (status === 429) {
    throw new SourceFailure(
      'rate_limited',
      `${options.who} asked to slow down (429).`,
      retryAfterSeconds(response.headers.get('retry-after')),
      status,
    );
  }
  if (status >= 500) throw new SourceFailure('unavailable', `${options.who} answered ${status}.`, null, status);
  if (status === 401 || status === 403)
    throw new SourceFailure(
      'unauthorized',
      `${options.who} refused the credentials (${status}): ${message()}`,
      null,
      status,
    );
  if ((status < 200 || status >= 300) && !options.accept?.includes(status))
    throw new SourceFailure('refused', `${options.who} answered ${status}: ${message()}`, null, status);
  return { status, headers: response.headers, body: parse() };
}
