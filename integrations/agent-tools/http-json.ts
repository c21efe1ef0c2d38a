/**
 * One JSON request to a tool supplier over HTTP, with a time limit and a bounded answer. A
 * supplier's failure becomes a ToolFailure: `retryable` for timeouts, 429 and 5xx (the tool's
 * activity retries those), not for an answer that can never succeed.
 */
export class ToolFailure extends Error {
  override name = 'ToolFailure';
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

const answerBytesMax = 1024 * 1024;

export async function postJson(
  url: string,
  body: unknown,
  options: { signal: AbortSignal; timeoutSeconds: number; headers?: Record<string, string> },
): Promise<{ body: unknown; headers: Headers }> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...options.headers,
      },
      body: JSON.stringify(body),
      signal: AbortSignal.any([options.signal, AbortSignal.timeout(options.timeoutSeconds * 1000)]),
    });
  } catch (error) {
    const name = (error as Error).name;
    if (name === 'TimeoutError' || name === 'AbortError')
      throw new ToolFailure(`${new URL(url).host} did not answer within ${options.timeoutSeconds} seconds.`, true);
    throw new ToolFailure(`${new URL(url).host} could not be reached: ${(error as Error).message}`, true);
  }
  const text = (await response.text()).slice(0, answerBytesMax);
  if (response.status === 429 || response.status >= 500)
    throw new ToolFailure(`${new URL(url).host} answered ${response.status}.`, true);
  if (response.status < 200 || response.status >= 300)
    throw new ToolFailure(`${new URL(url).host} answered ${response.status}: ${text.slice(0, 300)}`, false);
  if (response.status === 202 || text.trim() === '') return { body: null, headers: response.headers };
  const type = response.headers.get('content-type') ?? '';
  try {
    if (type.includes('text/event-stream')) {
      // A streamable-HTTP MCP server may answer one JSON-RPC message as an event stream.
      const data = text
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trim());
      return { body: JSON.parse(data.at(-1) ?? 'null'), headers: response.headers };
    }
    return { body: JSON.parse(text), headers: response.headers };
  } catch {
    throw new ToolFailure(`${new URL(url).host} answered something that is not JSON.`, false);
  }
}
