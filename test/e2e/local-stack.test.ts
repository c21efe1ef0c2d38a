/**
 * `npm start` as a person runs it: a temporary data folder, a free port, Ctrl-C (SIGINT to the
 * whole process group, as a terminal sends it). Two stacks run side by side, nothing is left
 * running after Ctrl-C, and a second start keeps the data.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { freePort } from '../../worker/ports.js';
import { projectRoot } from '../../worker/tools.js';
import { ctrlC, npmStart, processesUsing } from '../support/local-stack.js';

const roots: string[] = [];
afterAll(() => roots.forEach((r) => rmSync(r, { recursive: true, force: true })));

function tempDataDir(): string {
  const root = mkdtempSync(join(tmpdir(), 'outreach-stack-'));
  chmodSync(root, 0o755);
  roots.push(root);
  return join(root, 'data');
}

it('starts with npm start, runs two stacks side by side, stops cleanly on Ctrl-C and keeps its data', async () => {
  const dirA = tempDataDir();
  const dirB = tempDataDir();
  const portA = await freePort(3400);
  const a = await npmStart(dirA, portA);
  const b = await npmStart(dirB, await freePort(portA + 1));
  try {
    for (const s of [a, b]) {
      expect(s.output()).toMatch(/API docs:\s+http:\/\/\S+\/docs\//);
      expect(s.output()).toMatch(/Temporal UI:\s+http:\/\/127\.0\.0\.1:\d+/);
      const health = await fetch(`${s.apiUrl}/health/`);
      expect(health.status).toBe(200);
      const me = await fetch(`${s.apiUrl}/workspace/`, { headers: { 'x-api-key': s.devKey } });
      expect(me.status).toBe(200);
    }
    // Each stack has its own Postgres and Temporal on its own ports.
    expect(/Temporal UI:\s+(\S+)/.exec(a.output())![1]).not.toBe(/Temporal UI:\s+(\S+)/.exec(b.output())![1]);
    // The admin command line finds the running stack's embedded database through DATA_DIR.
    const created = JSON.parse(
      execFileSync(
        'npm',
        ['run', '--silent', 'admin', '--', 'create-workspace', '--name', 'Via CLI', '--plan', 'paid'],
        {
          cwd: projectRoot,
          env: { ...process.env, DATA_DIR: dirA, DATABASE_URL: '' },
          encoding: 'utf8',
        },
      ),
    );
    const viaCli = await fetch(`${a.apiUrl}/workspace/`, { headers: { 'x-api-key': created.api_key } });
    expect((await viaCli.json()).workspace.name).toBe('Via CLI');
    const viaToken = await fetch(`${a.apiUrl}/workspace/`, {
      headers: { authorization: `Bearer ${created.access_token}` },
    });
    expect(viaToken.status).toBe(200);
    await fetch(`${a.apiUrl}/api-keys/`, {
      method: 'POST',
      headers: { 'x-api-key': a.devKey, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'kept across restarts' }),
    });
  } finally {
    await ctrlC(a);
    await ctrlC(b);
  }
  await expect.poll(() => processesUsing(dirA), { timeout: 30_000 }).toEqual([]);
  await expect.poll(() => processesUsing(dirB), { timeout: 30_000 }).toEqual([]);

  const again = await npmStart(dirA, portA);
  try {
    expect(again.devKey).toBe(a.devKey);
    const keys = await (await fetch(`${again.apiUrl}/api-keys/`, { headers: { 'x-api-key': again.devKey } })).json();
    expect(keys.api_keys.map((k: { name: string }) => k.name)).toContain('kept across restarts');
  } finally {
    await ctrlC(again);
  }
  await expect.poll(() => processesUsing(dirA), { timeout: 30_000 }).toEqual([]);
}, 400_000);
