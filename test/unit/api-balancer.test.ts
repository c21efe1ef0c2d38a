/**
 * The chaos run's load balancer: a request reaches a live API process when another's port
 * refuses, and is never sent twice when a process dies after taking it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startApiBalancer, type ApiBalancer } from '../../sim/api-balancer.js';
import { freePort } from '../../worker/ports.js';
import { allDown } from '../../sim/service-process.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

async function backend(
  name: string,
  onRequest?: (body: string) => 'answer' | 'die',
): Promise<{ url: string; bodies: string[] }> {
  const bodies: string[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      bodies.push(body);
      if (onRequest?.(body) === 'die') {
        req.socket.destroy();
        return;
      }
      res.writeHead(201, { 'content-type': 'application/json', 'x-served-by': name });
      res.end(JSON.stringify({ name, method: req.method, path: req.url, body }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies };
}

async function balance(urls: string[]): Promise<ApiBalancer> {
  const balancer = await startApiBalancer(() => urls);
  cleanups.push(() => balancer.close());
  return balancer;
}

describe('the chaos run API balancer', () => {
  it('takes turns between live processes and passes method, path, body, status and headers through', async () => {
    const [a, b] = [await backend('a'), await backend('b')];
    const balancer = await balance([a.url, b.url]);
    const served: string[] = [];
    for (let i = 0; i < 4; i += 1) {
      const response = await fetch(`${balancer.url}/pnet/agent/claim/?x=${i}`, {
        method: 'POST',
        body: `{"n":${i}}`,
        headers: { 'content-type': 'application/json' },
      });
      expect(response.status).toBe(201);
      const body = (await response.json()) as { name: string; method: string; path: string; body: string };
      expect(body).toMatchObject({ method: 'POST', path: `/pnet/agent/claim/?x=${i}`, body: `{"n":${i}}` });
      served.push(response.headers.get('x-served-by')!);
    }
    expect(served.sort()).toEqual(['a', 'a', 'b', 'b']);
  });

  it('sends a request to the next process when a port refuses, and answers 502 when every port does', async () => {
    const live = await backend('live');
    const downPort = await freePort(19400);
    const balancer = await balance([`http://127.0.0.1:${downPort}`, live.url]);
    for (let i = 0; i < 3; i += 1) expect((await fetch(`${balancer.url}/health/`)).status).toBe(201);
    expect(live.bodies).toHaveLength(3);

    const nobody = await balance([`http://127.0.0.1:${downPort}`]);
    const answer = await fetch(`${nobody.url}/health/`);
    expect(answer.status).toBe(502);
    expect(await answer.json()).toEqual({ detail: 'no API process is accepting connections' });
  });

  it('never sends a request twice when the process that took it dies before answering', async () => {
    const dying = await backend('dying', () => 'die');
    const other = await backend('other');
    const balancer = await balance([dying.url, other.url]);
    const answer = await fetch(`${balancer.url}/pnet/steps/s1/result/`, { method: 'POST', body: 'once' });
    expect(answer.status).toBe(502);
    expect((await answer.json()) as { detail: string }).toMatchObject({
      detail: expect.stringContaining('went away mid-request'),
    });
    expect(dying.bodies).toEqual(['once']);
    expect(other.bodies).toEqual([]);
    expect(balancer.counts.diedMidRequest).toBe(1);
  });
});

describe('allDown', () => {
  it('is the time every process was down at once', () => {
    const a = [
      { from: 0, to: 10 },
      { from: 20, to: 30 },
    ];
    const b = [{ from: 5, to: 25 }];
    expect(allDown([a, b])).toEqual([
      { from: 5, to: 10 },
      { from: 20, to: 25 },
    ]);
    expect(allDown([a])).toEqual(a);
    expect(allDown([a, []])).toEqual([]);
    expect(allDown([])).toEqual([]);
  });
});
