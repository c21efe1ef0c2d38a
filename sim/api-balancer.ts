/**
 * A load balancer in front of several API processes, as production runs them: each request goes
 * to the next backend in turn; one whose connection is refused (its process is down) is skipped
 * and the request goes to the next. A request is never sent twice: once a backend accepted the
 * connection, its answer (or its death mid-request, as a 502) is the answer, as with nginx's
 * `proxy_next_upstream error` for requests that are not idempotent. Each request opens its own
 * connection to the backend, so "refused" always means "never sent".
 */
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ApiBalancer {
  url: string;
  /** Requests sent on to each backend, and requests no backend would take. */
  counts: { forwarded: number[]; refusedEverywhere: number; diedMidRequest: number };
  close: () => Promise<void>;
}

/** Hop-by-hop headers: they describe one connection, not the request. */
const hopByHop = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
]);

function endToEnd(headers: IncomingMessage['headers']): IncomingMessage['headers'] {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !hopByHop.has(name.toLowerCase())));
}

function problem(res: ServerResponse, status: number, detail: string) {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/problem+json' });
  res.end(JSON.stringify({ detail }));
}

/** `backends` is read at each request: a restarted process may come back on another port. */
export async function startApiBalancer(backends: () => readonly string[], port = 0): Promise<ApiBalancer> {
  const counts: ApiBalancer['counts'] = { forwarded: [], refusedEverywhere: 0, diedMidRequest: 0 };
  let next = 0;

  const forward = (req: IncomingMessage, res: ServerResponse, body: Buffer) => {
    const targets = backends();
    const first = next++ % Math.max(1, targets.length);
    const attempt = (tried: number) => {
      if (tried >= targets.length) {
        counts.refusedEverywhere += 1;
        problem(res, 502, 'no API process is accepting connections');
        return;
      }
      const index = (first + tried) % targets.length;
      const target = new URL(targets[index]!);
      let connected = false;
      const upstream = request(
        {
          host: target.hostname,
          port: target.port,
          method: req.method,
          path: req.url,
          headers: { ...endToEnd(req.headers), 'content-length': String(body.length) },
          agent: false,
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, endToEnd(answer.headers));
          answer.pipe(res);
          answer.on('aborted', () => res.destroy());
        },
      );
      upstream.on('socket', (socket) => socket.once('connect', () => void (connected = true)));
      upstream.on('error', (error: NodeJS.ErrnoException) => {
        if (!connected && (error.code === 'ECONNREFUSED' || error.code === 'ECONNRESET')) {
          attempt(tried + 1);
          return;
        }
        counts.diedMidRequest += 1;
        problem(res, 502, `the API process went away mid-request (${error.code ?? error.message})`);
      });
      upstream.on('finish', () => void (counts.forwarded[index] = (counts.forwarded[index] ?? 0) + 1));
      upstream.end(body);
    };
    attempt(0);
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => forward(req, res, Buffer.concat(chunks)));
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const address = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    counts,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
