import { defineConfig } from 'vitest/config';

// Three tiers, each runnable alone: `unit` (pure rules, no servers), `integration` (real Postgres
// and Temporal, started once by the global setup) and `e2e` (the local stack, fuzzing, chaos,
// temporal-docker). `npm test` runs all three.
const shared = { pool: 'forks' as const, testTimeout: 60_000, hookTimeout: 180_000, teardownTimeout: 60_000 };

export default defineConfig({
  test: {
    maxWorkers: 2,
    // The default report on screen, and the counts .ci/run's last line is printed from.
    reporters: ['default', './test/support/summary-reporter.ts'],
    projects: [
      // Unit and integration files share their fork's modules (isolate: false): the app, the SDK and
      // the schemas load once per fork instead of once per file; test/support/restore-environment.ts
      // hands each integration file the environment it started with (unit files touch none).
      { test: { ...shared, name: 'unit', isolate: false, include: ['test/unit/**/*.test.ts'] } },
      {
        test: {
          ...shared,
          name: 'integration',
          isolate: false,
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/support/global-setup.ts'],
          setupFiles: ['test/support/restore-environment.ts'],
        },
      },
      {
        test: {
          ...shared,
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          globalSetup: ['test/support/global-setup.ts'],
        },
      },
    ],
  },
});
