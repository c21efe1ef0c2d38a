import { createServer } from 'node:net';

function isFree(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** The preferred port when it is free on every loopback address, else the next free one. */
export async function freePort(preferred: number, avoid: number[] = []): Promise<number> {
  for (let port = preferred; port < preferred + 200; port += 1) {
    if (avoid.includes(port)) continue;
    if ((await isFree(port, '127.0.0.1')) && (await isFree(port, '::1').catch(() => true))) return port;
  }
  throw new Error(`No free port between ${preferred} and ${preferred + 199}.`);
}
