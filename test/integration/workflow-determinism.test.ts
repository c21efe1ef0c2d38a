/**
 * Determinism guards: the lint rule bites on workflows/, every workflow of workflows/index.ts is
 * in the bundle and has a recorded history, and every recorded history replays against today's
 * workflow code (a non-deterministic change fails here, not in production). Record new
 * histories with `npm run record:histories` (docs/decisions/030-workflow-versioning.md).
 */
import { Worker } from '@temporalio/worker';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';
import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { projectRoot } from '../../worker/tools.js';
import * as workflows from '../../workflows/index.js';

const historiesDir = join(projectRoot, 'test', 'histories');
/** The workflow types the worker registers: every function workflows/index.ts exports. */
const workflowTypes = Object.entries(workflows)
  .filter(([, value]) => typeof value === 'function')
  .map(([name]) => name)
  .sort();

interface RecordedHistory {
  events: { workflowExecutionStartedEventAttributes?: { workflowType?: { name?: string } } }[];
}
const historyFiles = () =>
  readdirSync(historiesDir)
    .filter((f) => f.endsWith('.json'))
    .sort();
const readHistory = (file: string) => JSON.parse(readFileSync(join(historiesDir, file), 'utf8')) as RecordedHistory;
const workflowTypeOf = (history: RecordedHistory) =>
  history.events[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name;

describe('workflow determinism', () => {
  // `npm test` lints the whole tree (workflows/ included) before vitest; this shows the rule bites.
  it('refuses I/O imports in workflows/', async () => {
    const eslint = new ESLint({
      cwd: projectRoot,
      overrideConfig: [{ files: ['**/*.ts'], ...tseslint.configs.disableTypeChecked }],
    });
    const [bad] = await eslint.lintText(
      "import postgres from 'postgres';\nimport { readFileSync } from 'node:fs';\nimport { createCreditActivities } from '../../store/platform/credits.js';\nexport const x = [postgres, readFileSync, createCreditActivities];\n",
      { filePath: join(projectRoot, 'workflows', 'lint-probe.ts') },
    );
    const ruleIds = bad!.messages.map((m) => m.ruleId);
    expect(ruleIds.filter((r) => r === '@typescript-eslint/no-restricted-imports')).toHaveLength(3);
  });

  it('bundles every workflow of workflows/index.ts', () => {
    expect(workflowTypes.length).toBeGreaterThan(0);
    const code = readFileSync(inject('workflowBundlePath'), 'utf8');
    // The bundle's module for workflows/index.ts, up to the next module: its export list is what
    // the worker registers.
    const start = code.indexOf('/***/ "./workflows/index.ts"');
    expect(start).toBeGreaterThanOrEqual(0);
    const end = code.indexOf('\n/***/ "', start + 1);
    const index = code.slice(start, end === -1 ? undefined : end);
    const missing = workflowTypes.filter((name) => !new RegExp(`\\b${name}: \\(\\) =>`).test(index));
    expect(missing).toEqual([]);
  });

  it('has a recorded history of every workflow, and none of a workflow that is gone', () => {
    const recorded = new Set(historyFiles().map((file) => workflowTypeOf(readHistory(file))));
    expect(workflowTypes.filter((name) => !recorded.has(name))).toEqual([]);
    expect([...recorded].filter((name) => name === undefined || !workflowTypes.includes(name))).toEqual([]);
  });

  it('replays every recorded history against the current workflow code', async () => {
    const files = historyFiles();
    expect(files.length).toBeGreaterThan(0);
    const histories = files.map((file) => ({ workflowId: file, history: readHistory(file) }));
    const results = [];
    for await (const result of Worker.runReplayHistories(
      { workflowBundle: { codePath: inject('workflowBundlePath') } },
      histories,
    )) {
      results.push({ id: result.workflowId, error: result.error ? String(result.error) : null });
    }
    expect(results).toEqual(files.map((id) => ({ id, error: null })));
  });
});
