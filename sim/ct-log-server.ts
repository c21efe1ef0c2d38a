/**
 * A local twin of crt.sh's JSON output: `GET /?q=%.<domain>&output=json` answers the certificates
 * of `certificates[domain]` (each with `name_value`, names one per line, and `common_name`), an
 * empty array for a domain it has none of. `fail(n, domain)` picks how the n-th request fails, as
 * crt.sh does when busy: 429 (with Retry-After), 502, or a timeout (no answer for `hangMs`).
 */
import { serveHttp } from './local-http.js';

export type CtFailure = '429' | '502' | 'timeout' | null;

export async function serveCtLog(
  certificates: Record<string, string[][]>,
  options: { fail?: (n: number, domain: string) => CtFailure; hangMs?: number } = {},
) {
  let n = 0;
  const server = await serveHttp(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://ct');
    const q = url.searchParams.get('q') ?? '';
    const domain = q.replace(/^%\./, '').toLowerCase();
    n += 1;
    const failure = options.fail?.(n, domain) ?? null;
    if (failure === 'timeout') {
      await new Promise((r) => setTimeout(r, options.hangMs ?? 5000));
      if (!res.writableEnded && !res.destroyed) res.destroy();
      return;
    }
    if (failure === '429')
      return void res.writeHead(429, { 'retry-after': '1', 'content-type': 'text/plain' }).end('Too Many Requests');
    if (failure === '502')
      return void res.writeHead(502, { 'content-type': 'text/html' }).end('<html>502 Bad Gateway</html>');
    if (url.searchParams.get('output') !== 'json') return void res.writeHead(400).end('output=json only');
    const certs = (certificates[domain] ?? []).map((names, i) => ({
      issuer_ca_id: 16418,
      issuer_name: "C=US, O=Let's Encrypt, CN=R3",
      common_name: names[0],
      name_value: names.join('\n'),
      id: 1000 + i,
      entry_timestamp: '2026-01-01T00:00:00.000',
      not_before: '2026-01-01T00:00:00',
      not_after: '2026-04-01T00:00:00',
      serial_number: `0${i}`,
    }));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(certs));
  });
  return { ...server, requestCount: () => n };
}
