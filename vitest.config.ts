import { defineConfig } from 'vitest/config';

// Three tiers, each runnable alone: `unit` (pure rules, no servers), `integration` (real Postgres
// and Temporal, started once by the global setup) and `e2e` (the local stack, fuzzing, chaos,
// temporal-docker). `npm test` runs all three.
const shared = { pool: 'forks' as const, testTimeout: 60_000, hookTimeout: 180_000, teardownTimeout: 60_000 };

export default defineConfig({
  test: {
    maxWorkers: 2,
    projects: [
      { test: { ...shared, name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      // Integration files share their fork's modules (isolate: false): each loads the app and the SDK
      // once per fork instead of once per file; test/support/restore-environment.ts hands each file
      // the environment it started with.
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
      { test: { ...shared, name: 'e2e', include: ['test/e2e/**/*.test.ts'], globalSetup: ['test/support/global-setup.ts'] } },
    ],
  },
});
