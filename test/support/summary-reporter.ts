/**
 * Counts what vitest ran, for the closing line of `.ci/run` (test/support/print-summary.ts). A file
 * that fails outside its tests (an import error, a failing hook) and an error no test caught count
 * as failures too, so the line never reads green while vitest exits red.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Reporter, SerializedError, TestModule } from 'vitest/node';

export const summaryPath = '.test-report/summary.json';

export interface TestSummary {
  passed: number;
  failed: number;
  skipped: number;
  files: number;
  /** Wall seconds from the start of the run to its report. */
  seconds: number;
}

export default class SummaryReporter implements Reporter {
  private started = Date.now();

  onInit(): void {
    this.started = Date.now();
  }

  onTestRunEnd(modules: ReadonlyArray<TestModule>, unhandled: ReadonlyArray<SerializedError>): void {
    const summary: TestSummary = { passed: 0, failed: unhandled.length, skipped: 0, files: modules.length, seconds: 0 };
    for (const module of modules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') summary.passed += 1;
        else if (state === 'failed') summary.failed += 1;
        else summary.skipped += 1;
      }
      if (module.errors().length > 0) summary.failed += 1;
    }
    summary.seconds = Math.round((Date.now() - this.started) / 1000);
    mkdirSync(dirname(summaryPath), { recursive: true });
    writeFileSync(summaryPath, JSON.stringify(summary));
  }
}
