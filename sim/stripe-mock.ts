/**
 * Runs stripe-mock, Stripe's own mock API server (built into `.tools/` by worker/tools.ts), on a
 * free port: the billing tests', the fuzz run's and the benchmark's payment provider. It checks
 * every request against Stripe's OpenAPI description and answers Stripe's shapes and errors; it
 * keeps no state, so events are made by the tests and signed with the package's test helper.
 */
import { spawn } from 'node:child_process';
import { freePort } from '../worker/ports.js';
import { resolveStripeMock } from '../worker/tools.js';

export interface StripeMock {
  /** http://127.0.0.1:<port>, for STRIPE_API_BASE. */
  apiBase: string;
  stop: () => Promise<void>;
}

export async function startStripeMock(): Promise<StripeMock> {
  const binary = resolveStripeMock();
  // Two test files may pick the same free port at once; the one that loses the bind tries further on.
  for (let attempt = 0, from = 12111; ; attempt += 1) {
    const port = await freePort(from);
    const httpsPort = await freePort(port + 1, [port]);
    try {
      return await startOn(binary, port, httpsPort);
    } catch (error) {
      if (attempt >= 4 || !String(error).includes('address already in use')) throw error;
      from = httpsPort + 1 + Math.floor(Math.random() * 20);
    }
  }
}

async function startOn(binary: string, port: number, httpsPort: number): Promise<StripeMock> {
  const child = spawn(binary, ['-http-port', String(port), '-https-port', String(httpsPort)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`stripe-mock did not start in 30 s: ${output.slice(-500)}`)),
      30_000,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Listening for HTTP')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`stripe-mock exited with ${code}: ${output.slice(-500)}`));
    });
  });
  // Its request log is not needed once it listens.
  child.stdout.removeAllListeners('data').resume();
  child.stderr.removeAllListeners('data').resume();
  return {
    apiBase: `http://127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
