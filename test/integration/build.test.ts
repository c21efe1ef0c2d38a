import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { buildEntries, freshBuildDir } from '../../worker/build.js';
import { freePort } from '../../worker/ports.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const { stack } = useTestStack({ workspaces: false });
const outDir = freshBuildDir('build-test');
afterAll(() => rmSync(outDir, { recursive: true, force: true }));

// `npm run build`'s entry as production runs it: the bundle, on this stack's Postgres and Temporal.
describe('the built service', { timeout: 120_000 }, () => {
  it('starts from its bundle with a prebuilt workflow bundle, answers as the source does, and stops on SIGTERM', async () => {
    const [start] = await buildEntries(['worker/start.ts'], outDir);
    const port = await freePort(18900);
    const child = spawn(process.execPath, ['--enable-source-maps', start!], {
      env: {
        ...process.env,
        DATABASE_URL: stack.databaseUrl,
        TEMPORAL_ADDRESS: inject('temporalAddress'),
        TEMPORAL_TASK_QUEUE: `built-${process.pid}`,
        WORKFLOW_BUNDLE: inject('workflowBundlePath'),
        HOST: '127.0.0.1',
        PORT: String(port),
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setInterval(() => {
          if (out.includes('The service is running.')) resolve();
          else if (child.exitCode !== null) reject(new Error(`the built service exited: ${out}`));
        }, 100);
        void exited.then(() => clearInterval(timer));
        setTimeout(() => reject(new Error(`not running after 90 s: ${out}`)), 90_000).unref();
      });
      const base = `http://127.0.0.1:${port}`;
      expect((await fetch(`${base}/health/`)).status).toBe(200);
      // Files found beside the modules that read them: the OpenAPI document is the source's.
      const openapi = (await (await fetch(`${base}/openapi.json`)).json()) as { paths: Record<string, unknown> };
      expect(Object.keys(openapi.paths)).toEqual(Object.keys(stack.app.swagger().paths ?? {}));
      const ws = await stack.createWorkspace('paid');
      const workspace = await fetch(`${base}/workspace/`, { headers: withKey(ws.apiKey) });
      expect(workspace.status).toBe(200);
      expect(((await workspace.json()) as { workspace: { id: string } }).workspace.id).toBe(ws.workspaceId);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });

  it('refuses to build outside the project, where its packages cannot be found', async () => {
    await expect(buildEntries(['worker/start.ts'], '/tmp/elsewhere')).rejects.toThrow(/must be built inside/);
  });
});
