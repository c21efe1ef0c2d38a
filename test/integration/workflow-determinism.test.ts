/**
 * Determinism guards: the lint rule bites on workflows/, the workflows bundle, and every recorded
 * history replays against today's workflow code (a non-deterministic change fails here, not in
 * production). Record new histories with `npm run record:histories`.
 */
import { Worker } from '@temporalio/worker';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { projectRoot } from '../../worker/tools.js';

const historiesDir = join(projectRoot, 'test', 'histories');

describe('workflow determinism', () => {
  it('lints workflows/ clean, and the rule refuses I/O imports there', async () => {
    const eslint = new ESLint({ cwd: projectRoot });
    const results = await eslint.lintFiles(['workflows/']);
    expect(results.flatMap((r) => r.messages.map((m) => `${r.filePath}: ${m.message}`))).toEqual([]);

    const [bad] = await eslint.lintText(
      "import postgres from 'postgres';\nimport { readFileSync } from 'node:fs';\nimport { createCreditActivities } from '../../store/platform/credits.js';\nexport const x = [postgres, readFileSync, createCreditActivities];\n",
      { filePath: join(projectRoot, 'workflows', 'lint-probe.ts') },
    );
    const ruleIds = bad!.messages.map((m) => m.ruleId);
    expect(ruleIds.filter((r) => r === '@typescript-eslint/no-restricted-imports')).toHaveLength(3);
  });

  it('bundles every workflow of workflows/index.ts', () => {
    const code = readFileSync(inject('workflowBundlePath'), 'utf8');
    expect(code).toContain('creditHoldWorkflow');
  });

  it('replays every recorded history against the current workflow code', async () => {
    const files = readdirSync(historiesDir).filter((f) => f.endsWith('.json'));
    expect(files.length).toBeGreaterThan(0);
    const histories = files.map((file) => ({ workflowId: file, history: JSON.parse(readFileSync(join(historiesDir, file), 'utf8')) }));
    const results = [];
    for await (const result of Worker.runReplayHistories({ workflowBundle: { codePath: inject('workflowBundlePath') } }, histories)) {
      results.push({ id: result.workflowId, error: result.error ? String(result.error) : null });
    }
    expect(results).toEqual(files.map((id) => ({ id, error: null })));
  });
});
