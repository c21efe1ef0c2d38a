/**
 * The last line of `.ci/run`: `N passed, N failed` (`, N skipped` when any were), from the counts
 * vitest's run left (test/support/summary-reporter.ts). Exits non-zero when anything failed or when
 * vitest left no counts (npm test stopped before the tests, at the type check, lint or format).
 */
import { existsSync, readFileSync } from 'node:fs';
import { summaryPath, type TestSummary } from './summary-reporter.js';

const line = (s: Pick<TestSummary, 'passed' | 'failed' | 'skipped'>) =>
  `${s.passed} passed, ${s.failed} failed${s.skipped > 0 ? `, ${s.skipped} skipped` : ''}`;

if (!existsSync(summaryPath)) {
  process.stdout.write('vitest left no counts: npm test stopped before the tests ran (see above).\n');
  process.stdout.write(`${line({ passed: 0, failed: 0, skipped: 0 })}\n`);
  process.exit(1);
}
const summary = JSON.parse(readFileSync(summaryPath, 'utf8')) as TestSummary;
process.stdout.write(`vitest: ${summary.files} files in ${summary.seconds} s\n`);
process.stdout.write(`${line(summary)}\n`);
process.exit(summary.failed > 0 ? 1 : 0);
