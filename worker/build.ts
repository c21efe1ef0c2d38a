/**
 * `npm run build`: the service as plain JavaScript, for processes that restart (production's API
 * and worker containers, the chaos runs' killed children). Running the TypeScript through tsx
 * costs a restart about 3 s of loader hooks (docs/benchmarks.md, chaos:pnet); a bundle of our own
 * modules loads natively. Packages stay outside the bundle and load from node_modules exactly as
 * the tests load them, so nothing a test has not run is packed differently.
 *
 * Writes `dist/start.mjs` (the `npm start` entry: SERVICE_ROLE picks api, worker or all) and
 * `dist/workflows.js` (the workflow bundle WORKFLOW_BUNDLE names, so a worker starts without a
 * webpack build).
 */
import { build, type Plugin } from 'esbuild';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, isAbsolute, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { projectRoot } from './tools.js';
import { bundleWorkflows } from './worker.js';

/**
 * Each module keeps its own `import.meta.url`: our code finds files beside itself (migrations,
 * the extractor's thread entry, the workflows) and resolves packages from where it lives, and in
 * one bundle every module would otherwise share the bundle's address. So a bundle is for the
 * checkout it was built in, as node_modules is.
 */
const ownModuleUrls: Plugin = {
  name: 'own-module-urls',
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, (args) => {
      if (args.path.includes('/node_modules/')) return undefined;
      const contents = readFileSync(args.path, 'utf8').replaceAll(
        'import.meta.url',
        JSON.stringify(pathToFileURL(args.path).href),
      );
      return { contents, loader: 'ts' };
    });
  },
};

export const distDir = resolve(projectRoot, 'dist');

/** A new folder under dist/ for one run's bundles (the caller removes it). */
export function freshBuildDir(prefix: string): string {
  mkdirSync(distDir, { recursive: true });
  return mkdtempSync(join(distDir, `${prefix}-`));
}

/**
 * Bundles each entry (a path from the project's root) to `<outDir>/<its name>.mjs`; answers the
 * files written. The packages are imported from the bundle's folder, so it must be inside the
 * project (node_modules is found from there).
 */
export async function buildEntries(entries: readonly string[], outDir: string): Promise<string[]> {
  const inside = relative(projectRoot, resolve(outDir));
  if (inside.startsWith('..') || isAbsolute(inside))
    throw new Error(
      `A bundle imports the project's packages, so it must be built inside ${projectRoot}, not in ${outDir}.`,
    );
  mkdirSync(outDir, { recursive: true });
  await build({
    entryPoints: entries.map((entry) => resolve(projectRoot, entry)),
    outdir: outDir,
    entryNames: '[name]',
    outExtension: { '.js': '.mjs' },
    bundle: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: 'node20',
    sourcemap: 'linked',
    logLevel: 'warning',
    plugins: [ownModuleUrls],
  });
  return entries.map((entry) => join(outDir, `${basename(entry, '.ts')}.mjs`));
}

/** The workflow bundle the worker would otherwise build at start, written to `file`. */
export async function buildWorkflowBundle(file: string): Promise<string> {
  writeFileSync(file, (await bundleWorkflows()).code);
  return file;
}

async function main() {
  const started = Date.now();
  const [start] = await buildEntries(['worker/start.ts'], distDir);
  const workflows = await buildWorkflowBundle(join(distDir, 'workflows.js'));
  process.stdout.write(`built ${start} and ${workflows} in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  process.stdout.write(`run: WORKFLOW_BUNDLE=${workflows} node --enable-source-maps ${start}\n`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
