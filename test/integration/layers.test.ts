/**
 * The layer rules of eslint.config.js bite (docs/architecture.md, decision 031): for each folder, a
 * probe text linted as if it were a file there has its forbidden imports refused and its allowed
 * ones let through, and `process.env` is refused outside integrations/config.ts (decision 032).
 * In the integration tier because ESLint takes seconds to start. The probe paths never exist on
 * disk, so they are linted untyped: the rules under test read imports and property names only.
 */
import { join } from 'node:path';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';
import { beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../worker/tools.js';

const importRule = '@typescript-eslint/no-restricted-imports';
const envRule = 'no-restricted-properties';

interface Probe {
  /** Where the text is linted as if it lived, relative to the project. */
  file: string;
  refused: string[];
  allowed: string[];
  /** Type-only imports the folder allows. */
  allowedTypes?: string[];
}

let eslint: ESLint;
beforeAll(() => {
  eslint = new ESLint({
    cwd: projectRoot,
    overrideConfig: [
      // The probes are linted without types: only the import and property rules matter here.
      { files: ['**/*.ts'], ...tseslint.configs.disableTypeChecked },
    ],
  });
});

/** Lints one import per line (then a use of each), and answers the specifiers a rule flagged. */
async function flagged(
  file: string,
  values: string[],
  types: string[] = [],
  extra = '',
): Promise<{ imports: string[]; rules: string[] }> {
  const lines = [
    ...values.map((spec, i) => `import * as v${i} from '${spec}';`),
    ...types.map((spec, i) => `import type { Thing as T${i} } from '${spec}';`),
  ];
  const uses = [
    `export const used = [${values.map((_, i) => `v${i}`).join(', ')}];`,
    ...types.map((_, i) => `export type U${i} = T${i};`),
  ];
  const [result] = await eslint.lintText([...lines, ...uses, extra].join('\n') + '\n', {
    filePath: join(projectRoot, file),
  });
  const messages = result!.messages;
  expect(messages.filter((m) => m.fatal)).toEqual([]);
  const specs = [...values, ...types];
  return {
    imports: messages.filter((m) => m.ruleId === importRule).map((m) => specs[m.line - 1]!),
    rules: messages.map((m) => m.ruleId ?? 'fatal'),
  };
}

async function expectRule({ file, refused, allowed, allowedTypes = [] }: Probe) {
  const { imports } = await flagged(file, [...refused, ...allowed], allowedTypes);
  expect({ file, refused: imports.sort() }).toEqual({ file, refused: [...refused].sort() });
}

const forbiddenFromOutsideApi = ['../../api/app.js', '../../api/routes/pnet/steps.js', '../../api/plugins/errors.js'];

describe('the layer rules of the lint', { timeout: 180_000 }, () => {
  it('keep domain/ pure: no other layer, no I/O built-in, no I/O package', async () => {
    await expectRule({
      file: 'domain/pnet/lint-probe.ts',
      refused: [
        '../../db/sql.js',
        '../../store/pnet/steps.js',
        '../../integrations/mailer.js',
        '../../services/pnet/browser-step-client.js',
        '../../workflows/pnet/browser-step.js',
        '../../activities/pnet/steps.js',
        '../../api/app.js',
        '../../worker/config.js',
        'node:fs',
        'fs/promises',
        'node:net',
        'node:http',
        'node:dns',
        'node:child_process',
        'postgres',
        'fastify',
        '@temporalio/client',
        '@temporalio/workflow',
        'nodemailer',
        'imapflow',
        'openai',
        'undici',
      ],
      allowed: [
        'zod',
        'mathjs',
        'node:crypto',
        'node:zlib',
        '../shared/errors.js',
        '../tables/tables.js',
        './pacing.js',
      ],
    });
    // A file at domain/'s top is held to the same rules.
    await expectRule({
      file: 'domain/lint-probe.ts',
      refused: ['../store/pnet/steps.js', 'node:fs'],
      allowed: ['./shared/errors.js', 'zod'],
    });
  });

  it('keep db/ and store/ below the integrations, services, workflows, activities, API and worker', async () => {
    for (const file of ['store/pnet/lint-probe.ts', 'db/lint-probe.ts']) {
      const up = file.startsWith('db/') ? '../' : '../../';
      await expectRule({
        file,
        refused: [
          'integrations/mailer.js',
          'services/pnet/browser-step-client.js',
          'workflows/pnet/browser-step.js',
          'activities/pnet/steps.js',
          'api/app.js',
          'worker/config.js',
        ].map((p) => up + p),
        allowed: [`${up}domain/pnet/pnet.js`, `${up}db/sql.js`, `${up}store/platform/credits.js`, 'postgres'],
      });
    }
  });

  it('keep integrations/ apart from the store and everything above it', async () => {
    await expectRule({
      file: 'integrations/agent-tools/lint-probe.ts',
      refused: [
        '../../store/pnet/steps.js',
        '../../services/agents/research.js',
        '../../workflows/agents/agent-run.js',
        '../../activities/agents/agent-run.js',
        '../../api/app.js',
        '../../worker/config.js',
      ],
      allowed: [
        '../../domain/tables/enrichments.js',
        '../chat-model.js',
        '../web/web-page.js',
        'openai',
        'undici',
        'node:dns',
      ],
    });
  });

  it('keep services/ below the activities, the API and the worker', async () => {
    await expectRule({
      file: 'services/sequences/lint-probe.ts',
      refused: [
        '../../activities/sequences/sequences.js',
        '../../api/app.js',
        '../../api/deps.js',
        '../../worker/worker.js',
      ],
      allowed: [
        '../../store/sequences/sequences.js',
        '../../integrations/mailer.js',
        '../../workflows/sequences/sequence-contact.contract.js',
        '../../domain/sequences/sequences.js',
        '@temporalio/client',
      ],
    });
  });

  it('keep workflows/ deterministic: domain/ and workflows/ only, activities as types', async () => {
    for (const [file, up] of [
      ['workflows/pnet/lint-probe.ts', '../../'],
      ['workflows/lint-probe.ts', '../'],
    ] as const) {
      await expectRule({
        file,
        refused: [
          ...[
            'db/sql.js',
            'store/pnet/steps.js',
            'integrations/mailer.js',
            'services/pnet/browser-step-client.js',
            'api/app.js',
            'worker/config.js',
            'activities/pnet/steps.js',
          ].map((p) => up + p),
          'postgres',
          'node:fs',
          'crypto',
          'timers',
          'undici',
          '@temporalio/client',
          '@temporalio/activity',
          'nodemailer',
          'openai',
        ],
        allowed: [
          `${up}domain/pnet/pnet.js`,
          `${up}workflows/shared/clock.js`,
          '@temporalio/workflow',
          '@temporalio/common',
        ],
        allowedTypes: [`${up}activities/pnet/steps.js`],
      });
    }
  });

  it('keep the determinism globals out of workflows/', async () => {
    const { rules } = await flagged(
      'workflows/pnet/lint-probe.ts',
      [],
      [],
      'export const t = setTimeout(() => {}, 1);\nexport const e = process.argv;',
    );
    expect(rules.filter((r) => r === 'no-restricted-globals')).toHaveLength(2);
  });

  it('keep activities/ below the API and the worker', async () => {
    await expectRule({
      file: 'activities/pnet/lint-probe.ts',
      refused: ['../../api/app.js', '../../api/routes/pnet/steps.js', '../../worker/worker.js'],
      allowed: [
        '../../services/pnet/browser-step-client.js',
        '../../store/pnet/steps.js',
        '../../integrations/mailer.js',
        '../../workflows/pnet/browser-step.contract.js',
        '@temporalio/activity',
      ],
    });
    // activities/index.ts sits at the folder's top.
    await expectRule({
      file: 'activities/lint-probe.ts',
      refused: ['../api/deps.js', '../worker/stack.js'],
      allowed: ['../integrations/config.js', './pnet/steps.js'],
    });
  });

  it('keep api/ apart from the worker', async () => {
    await expectRule({
      file: 'api/routes/lint-probe.ts',
      refused: ['../../worker/config.js', '../../worker/stack.js'],
      allowed: [
        '../../services/pnet/browser-step-client.js',
        '../../store/pnet/steps.js',
        '../../integrations/config.js',
        '../plugins/errors.js',
        'fastify',
      ],
    });
  });

  it('let nothing outside api/ import api/, except the bootstrap importing api/app.ts', async () => {
    for (const file of [
      'worker/probe-area/lint-probe.ts',
      'services/platform/lint-probe.ts',
      'activities/platform/lint-probe.ts',
      'store/platform/lint-probe.ts',
      'domain/platform/lint-probe.ts',
      'integrations/web/lint-probe.ts',
    ]) {
      const { imports } = await flagged(file, forbiddenFromOutsideApi);
      expect({ file, imports }).toEqual({ file, imports: forbiddenFromOutsideApi });
    }
    await expectRule({
      file: 'worker/lint-probe.ts',
      refused: ['../api/app.js', '../api/deps.js'],
      allowed: ['./worker.js', '../integrations/config.js', '../services/platform/tokens.js'],
    });
    // The bootstrap: worker/stack.ts (the file itself, linted with a probe text) imports api/app.ts and nothing else of api/.
    await expectRule({
      file: 'worker/stack.ts',
      refused: ['../api/deps.js', '../api/routes/pnet/steps.js', '../api/plugins/errors.js'],
      allowed: ['../api/app.js', './worker.js'],
    });
  });

  it('refuse process.env outside integrations/config.ts (and the test, bench and sim scripts)', async () => {
    const read = 'export const port = process.env.PORT;\nexport const { HOME } = process.env;';
    for (const file of [
      'services/pnet/lint-probe.ts',
      'api/routes/lint-probe.ts',
      'activities/lint-probe.ts',
      'worker/lint-probe.ts',
      'integrations/web/lint-probe.ts',
      'store/pnet/lint-probe.ts',
      'domain/pnet/lint-probe.ts',
    ]) {
      const { rules } = await flagged(file, [], [], read);
      expect({ file, refused: rules.filter((r) => r === envRule).length }).toEqual({ file, refused: 2 });
    }
    for (const file of ['integrations/config.ts', 'test/lint-probe.ts', 'sim/lint-probe.ts', 'bench/lint-probe.ts']) {
      const { rules } = await flagged(file, [], [], read);
      expect({ file, rules }).toEqual({ file, rules: [] });
    }
  });
});
