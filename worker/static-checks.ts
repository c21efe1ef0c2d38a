/**
 * The checks `npm test` runs before the tests, side by side (each is single-threaded, and CI has
 * two cores): the type check, the lint (typescript-eslint's type-aware rules and ours) and
 * Prettier's format check. Each tool's output is printed whole when it ends; the exit is non-zero
 * when any of them failed.
 */
import { spawn } from 'node:child_process';

const checks: { name: string; command: string[] }[] = [
  { name: 'typecheck', command: ['tsc', '--noEmit'] },
  { name: 'lint', command: ['eslint', '.'] },
  { name: 'format', command: ['prettier', '--check', '--log-level', 'warn', '**/*.{ts,js,mjs}'] },
];

const results = await Promise.all(
  checks.map(
    ({ name, command }) =>
      new Promise<{ name: string; ok: boolean; seconds: number }>((resolve) => {
        const started = Date.now();
        // node_modules/.bin is on PATH under npm run, so each tool is the project's own.
        const child = spawn(command[0]!, command.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
        const output: Buffer[] = [];
        child.stdout.on('data', (chunk: Buffer) => output.push(chunk));
        child.stderr.on('data', (chunk: Buffer) => output.push(chunk));
        child.on('error', (error) => output.push(Buffer.from(`${error.message}\n`)));
        child.on('close', (code) => {
          const seconds = Math.round((Date.now() - started) / 1000);
          const text = Buffer.concat(output).toString('utf8').trimEnd();
          process.stdout.write(`${name} (${command.join(' ')}): ${code === 0 ? 'ok' : 'FAILED'} in ${seconds} s\n`);
          if (text) process.stdout.write(`${text}\n`);
          resolve({ name, ok: code === 0, seconds });
        });
      }),
  ),
);
const failed = results.filter((r) => !r.ok).map((r) => r.name);
if (failed.length > 0) {
  process.stderr.write(`static checks failed: ${failed.join(', ')}\n`);
  process.exit(1);
}
