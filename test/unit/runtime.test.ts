import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// The project runs on the Node.js line pinned in devDependencies (the registry's `node` package),
// whatever Node the machine has (docs/decisions/052-node-from-the-registry.md).
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
};
const pinnedMajor = Number(pkg.devDependencies.node!.split('.')[0]);

describe('runtime', () => {
  it('runs the tests on the pinned Node.js LTS line', () => {
    expect(pinnedMajor).toBe(26);
    expect(Number(process.versions.node.split('.')[0])).toBe(pinnedMajor);
    expect(pkg.engines.node).toBe(`>=${pinnedMajor}`);
  });

  it('gives child processes started as `node` the same Node.js', () => {
    const version = execFileSync('node', ['--version'], { encoding: 'utf8' }).trim();
    expect(version).toBe(`v${process.versions.node}`);
  });
});
